package seqbus.node;

/**
 * Back-pressure: the window of commands in flight is full (or posted commands wait, or the node
 * is not ready to send yet). Poll, then send again; or {@link Node#post}.
 */
public class BackPressureException extends SeqbusException {
    private static final long serialVersionUID = 1L;

    public BackPressureException(String message) {
        super(ERR_BACKPRESSURE, message);
    }
}
