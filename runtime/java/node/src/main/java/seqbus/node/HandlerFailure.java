package seqbus.node;

/**
 * A handler (or timer callback) that threw: the message's sequence (a timer's: of the record
 * that made it due), its type ("schema S template T" or "timer"), the handler, the error, and
 * what was done ("stopped" or "skipped").
 */
public record HandlerFailure(
        long sequence, String messageType, String handler, String error, String action) {
    /** One line: what raised where and what was done. */
    public String describe() {
        return handler + " raised at #" + sequence + " (" + messageType + "): " + error + "; " + action;
    }
}
