package seqbus.node;

/** What an admin command runs: its converted arguments in, the reply text out (null: empty). */
@FunctionalInterface
public interface AdminHandler {
    String run(AdminArgs args) throws Exception;
}
