package seqbus.codec;

/**
 * Bytes a decoder reads: absolute indexes from 0 to {@link #capacity()}, every multi-byte value
 * little-endian (the seqbus wire format's byte order, whatever the host's).
 *
 * <p>Two implementations ship: {@link ArrayBuffer} over a {@code byte[]} and {@link NioBuffer}
 * over a {@link java.nio.ByteBuffer} (heap or direct). Both are final and hold no state besides
 * what they wrap, so one instance can be re-pointed at new bytes without allocating. Decoders
 * check every position they read against the message's length before reading; the buffers'
 * own bounds checks are a second line that well-formed and malformed input never reach.
 */
public interface ReadBuffer {
    /** Bytes addressable, from index 0. */
    int capacity();

    byte getByte(int index);

    short getShort(int index);

    int getInt(int index);

    long getLong(int index);

    float getFloat(int index);

    double getDouble(int index);

    /** Copy {@code length} bytes from {@code index} into {@code dst} at {@code dstOffset}. */
    void getBytes(int index, byte[] dst, int dstOffset, int length);
}
