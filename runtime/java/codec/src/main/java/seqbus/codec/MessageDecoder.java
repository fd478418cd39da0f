package seqbus.codec;

/**
 * What every generated message decoder answers, whatever its message: the per-package entry
 * ({@code <Package>Messages.decode}) returns one, so code that handles any message (a logger,
 * a bridge, a test) needs no per-message code.
 */
public interface MessageDecoder {
    /** The message's name in the schema ({@code NewOrder}). */
    String messageName();

    /** The message's template id. */
    int templateId();

    /** The schema version the writer used (the header's). */
    int writerVersion();

    /** Bytes the message takes: header, block, groups and variable-length fields. */
    int encodedLength();

    /**
     * Append the message's canonical JSON (every field decoded and checked: a corrupt value is
     * a {@link DecodeException}). Uses a decoder of its own, so a group being iterated on this
     * one is left where it was.
     */
    StringBuilder appendTo(StringBuilder out);

    /** The message's canonical JSON. */
    default String toJson() {
        return appendTo(new StringBuilder(256)).toString();
    }

    /**
     * Encode the decoded message again, at this code's schema version, into {@code buffer} at
     * {@code offset} (every field decoded and checked on the way); returns the bytes written.
     * The vectors of the version this code writes come back byte for byte.
     */
    int reencode(MutableBuffer buffer, int offset);
}
