package seqbus.codec;

/**
 * A value an encoder cannot write, or an encoder used out of order: a {@code char[N]} text that
 * is too long, not ASCII or ends in padding; a number out of its field's range; a string with a
 * lone surrogate; a group given fewer or more entries than its count; a group or
 * variable-length field written after a later one; a buffer too small. It names the field as
 * {@code Message.group.field}: {@code cannot encode NewOrder.symbol: "ABCDEFGHI" is longer
 * than 8 characters}.
 */
public final class EncodeException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    private final String field;
    private final String detail;

    public EncodeException(String field, String detail) {
        super("cannot encode " + field + ": " + detail);
        this.field = field;
        this.detail = detail;
    }

    /** The field, as {@code Message.group.field}. */
    public String field() {
        return field;
    }

    /** What is wrong, without the field. */
    public String detail() {
        return detail;
    }
}
