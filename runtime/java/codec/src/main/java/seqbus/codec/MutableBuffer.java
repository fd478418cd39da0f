package seqbus.codec;

/** Bytes an encoder writes: a {@link ReadBuffer} that can also be written, little-endian. */
public interface MutableBuffer extends ReadBuffer {
    void putByte(int index, byte value);

    void putShort(int index, short value);

    void putInt(int index, int value);

    void putLong(int index, long value);

    void putFloat(int index, float value);

    void putDouble(int index, double value);

    /** Copy {@code length} bytes of {@code src} from {@code srcOffset} to {@code index}. */
    void putBytes(int index, byte[] src, int srcOffset, int length);

    /** Copy {@code length} bytes of {@code src} from {@code srcIndex} to {@code index}. */
    void putBytes(int index, ReadBuffer src, int srcIndex, int length);

    /** Set {@code length} bytes from {@code index} to {@code value}. */
    void setMemory(int index, int length, byte value);
}
