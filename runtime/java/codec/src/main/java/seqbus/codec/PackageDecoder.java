package seqbus.codec;

/**
 * The decoding entry of one schema package (the generated {@code <Package>Messages}): code that
 * handles the messages of several schemas (a logger, a bridge, a test tool) holds them by this
 * interface.
 */
public interface PackageDecoder {
    /** The package's name in the schema ({@code exchange}). */
    String packageName();

    /** The schema id in every message header of the package. */
    int schemaId();

    /** The schema version the generated code writes. */
    int schemaVersion();

    /**
     * The decoder of the message of {@code length} bytes at {@code offset}, wrapped (one per
     * message type, owned by this object: the next call re-points it).
     */
    MessageDecoder decode(ReadBuffer buffer, int offset, int length);
}
