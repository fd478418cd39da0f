package seqbus.codec;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteBuffer;
import java.nio.ByteOrder;

/**
 * A {@link MutableBuffer} over a {@link ByteBuffer}, direct (off-heap, memory-mapped) or heap.
 * Indexes are absolute, from the ByteBuffer's index 0 up to its capacity: its position, limit
 * and byte order are neither used nor changed, so the ByteBuffer can be shared with code that
 * uses them. A read-only ByteBuffer can be read; writing it throws
 * {@link java.nio.ReadOnlyBufferException}.
 */
public final class NioBuffer implements MutableBuffer {
    private static final VarHandle SHORT = view(short[].class);
    private static final VarHandle INT = view(int[].class);
    private static final VarHandle LONG = view(long[].class);
    private static final VarHandle FLOAT = view(float[].class);
    private static final VarHandle DOUBLE = view(double[].class);

    private static VarHandle view(Class<?> arrayType) {
        return MethodHandles.byteBufferViewVarHandle(arrayType, ByteOrder.LITTLE_ENDIAN);
    }

    private ByteBuffer buffer;

    public NioBuffer(ByteBuffer buffer) {
        this.buffer = buffer;
    }

    /** A buffer over a new direct ByteBuffer of {@code capacity} bytes. */
    public static NioBuffer allocateDirect(int capacity) {
        return new NioBuffer(ByteBuffer.allocateDirect(capacity));
    }

    /** Point this buffer at {@code buffer} (no allocation). */
    public NioBuffer wrap(ByteBuffer buffer) {
        this.buffer = buffer;
        return this;
    }

    /** The ByteBuffer read and written. */
    public ByteBuffer byteBuffer() {
        return buffer;
    }

    @Override
    public int capacity() {
        return buffer.capacity();
    }

    @Override
    public byte getByte(int index) {
        return buffer.get(index);
    }

    @Override
    public short getShort(int index) {
        return (short) SHORT.get(buffer, index);
    }

    @Override
    public int getInt(int index) {
        return (int) INT.get(buffer, index);
    }

    @Override
    public long getLong(int index) {
        return (long) LONG.get(buffer, index);
    }

    @Override
    public float getFloat(int index) {
        return (float) FLOAT.get(buffer, index);
    }

    @Override
    public double getDouble(int index) {
        return (double) DOUBLE.get(buffer, index);
    }

    @Override
    public void getBytes(int index, byte[] dst, int dstOffset, int length) {
        buffer.get(index, dst, dstOffset, length);
    }

    @Override
    public void putByte(int index, byte value) {
        buffer.put(index, value);
    }

    @Override
    public void putShort(int index, short value) {
        SHORT.set(buffer, index, value);
    }

    @Override
    public void putInt(int index, int value) {
        INT.set(buffer, index, value);
    }

    @Override
    public void putLong(int index, long value) {
        LONG.set(buffer, index, value);
    }

    @Override
    public void putFloat(int index, float value) {
        FLOAT.set(buffer, index, value);
    }

    @Override
    public void putDouble(int index, double value) {
        DOUBLE.set(buffer, index, value);
    }

    @Override
    public void putBytes(int index, byte[] src, int srcOffset, int length) {
        buffer.put(index, src, srcOffset, length);
    }

    @Override
    public void putBytes(int index, ReadBuffer src, int srcIndex, int length) {
        if (src instanceof ArrayBuffer) {
            buffer.put(index, ((ArrayBuffer) src).array(), srcIndex, length);
        } else if (src instanceof NioBuffer) {
            buffer.put(index, ((NioBuffer) src).buffer, srcIndex, length);
        } else {
            for (int i = 0; i < length; i++) {
                buffer.put(index + i, src.getByte(srcIndex + i));
            }
        }
    }

    @Override
    public void setMemory(int index, int length, byte value) {
        long wide = (value & 0xFFL) * 0x0101010101010101L;
        if (length < 8) {
            for (int i = 0; i < length; i++) {
                buffer.put(index + i, value);
            }
            return;
        }
        int end = index + length - 8;
        for (int i = index; i < end; i += 8) {
            LONG.set(buffer, i, wide);
        }
        LONG.set(buffer, end, wide);
    }
}
