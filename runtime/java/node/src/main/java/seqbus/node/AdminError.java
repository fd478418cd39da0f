package seqbus.node;

/**
 * Thrown by an admin command's handler to refuse with a message: the reply is {@code Failed} with
 * the message as its text (no stack trace logged, not counted as an error), as Python's
 * {@code seqbus.AdminError}.
 */
public class AdminError extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public AdminError(String message) {
        super(message);
    }
}
