package seqbus.node;

import java.time.Duration;
import java.util.Set;
import seqbus.examples.pingpong.PingDecoder;
import seqbus.examples.pingpong.PingpongNode;

/**
 * The Java admin twin: tests/languages/admin_twin.py's TwinNode written in Java, with the same
 * admin commands and help, so that its AdminReplies are byte for byte the Python node's (AdminTest)
 * and a Java instance can be a hot backup of a Python one (tests/languages/test_admin_nodes.py:
 * {@code main}).
 */
class AdminTwin extends PingpongNode {
    long total;
    private final Set<String> senders;

    AdminTwin(Set<String> senders) {
        this.senders = senders;
        adminCommand("bump", "add AMOUNT to the total (twice with DOUBLE)", a -> {
            total += a.bool(1, false) ? a.integer(0) * 2 : a.integer(0);
            return "total " + total;
        }).param("amount", AdminType.INTEGER).optional("double", AdminType.BOOLEAN);
        adminCommand("scale", "", a -> a.number(0) > 1 ? "scale up" : "scale down").param("factor", AdminType.NUMBER);
        adminCommand("echo", "join the words", a -> {
            StringBuilder b = new StringBuilder(a.text(0));
            for (Object w : a.from(1)) {
                b.append(' ').append(w);
            }
            return b.toString();
        }).param("first", AdminType.TEXT).rest("rest", AdminType.TEXT);
        adminCommand("refuse", "refuse, as a command whose preconditions fail does", a -> {
            throw new AdminError("refused at total " + total);
        });
        adminCommand("long", "a reply of COUNT characters", a -> "\u00e9".repeat((int) Math.max(0, a.integer(0))))
                .param("count", AdminType.INTEGER);
    }

    AdminTwin() {
        this(null);
    }

    @Override
    protected Set<String> adminSenders() {
        return senders;
    }

    @Override
    protected void onPing(PingDecoder ping, Message m) {
        if (!m.mine()) {
            post(encodePong().id(ping.id()).pingSentAtNs(total));
        }
    }

    /** {@code AdminTwin CONFIG ACCOUNT INSTANCE [live|rewind]}: runs the twin until SIGTERM. */
    public static void main(String[] args) {
        if (args.length < 3 || args.length > 4 || (args.length == 4 && !Set.of("live", "rewind").contains(args[3]))) {
            System.err.println("usage: AdminTwin CONFIG ACCOUNT INSTANCE [live|rewind]");
            System.exit(2);
        }
        Start start = args.length == 4 && args[3].equals("rewind") ? Start.rewind() : Start.live();
        Node.logToStderr("admin-twin-java", 0);
        AdminTwin twin = new AdminTwin();
        twin.stopOnSignals(Duration.ofSeconds(5));
        twin.run(new Options(args[0], args[1]).instance(Integer.parseInt(args[2])).start(start));
    }
}
