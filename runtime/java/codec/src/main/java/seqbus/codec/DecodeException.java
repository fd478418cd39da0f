package seqbus.codec;

/**
 * Bytes that do not decode: a truncated or corrupt message. It names the message (or, when the
 * template id is unknown, the schema's package), the field, the byte offset from the start of
 * the message (its header's first byte) and what is wrong, as the Python and Rust codecs do:
 * {@code cannot decode NewOrder.legs at offset 70: group header runs past the end of the
 * buffer}.
 *
 * <p>Decoders throw it, never an {@link IndexOutOfBoundsException}: every position is checked
 * against the message's length before it is read.
 */
public final class DecodeException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    private final String messageName;
    private final String field;
    private final int offset;
    private final String detail;

    public DecodeException(String messageName, String field, int offset, String detail) {
        super(text(messageName, field, offset, detail));
        this.messageName = messageName;
        this.field = field;
        this.offset = offset;
        this.detail = detail;
    }

    private static String text(String messageName, String field, int offset, String detail) {
        String where = field.isEmpty() ? messageName : messageName + "." + field;
        return "cannot decode " + where + " at offset " + offset + ": " + detail;
    }

    /** The message's name in the schema, or the package's for a header naming no message. */
    public String messageName() {
        return messageName;
    }

    /** The field (a dotted path inside groups and structs), "header", or "" for the buffer. */
    public String field() {
        return field;
    }

    /** Bytes from the start of the message (its header) to the offending byte. */
    public int offset() {
        return offset;
    }

    /** What is wrong, without the message, field and offset. */
    public String detail() {
        return detail;
    }
}
