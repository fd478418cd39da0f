package seqbus.codec;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.nio.ByteOrder;
import java.util.Arrays;

/**
 * A {@link MutableBuffer} over a {@code byte[]}: index 0 is the array's first byte. Reads and
 * writes go through little-endian array views ({@link VarHandle}s the JIT turns into plain
 * loads and stores), or on JDK 17 to 23 through {@code sun.misc.Unsafe} after a bounds check of
 * their own ({@link UnsafeArrays} says why): either way an index outside the array is an
 * {@link IndexOutOfBoundsException}, never a touch of other memory.
 */
public final class ArrayBuffer implements MutableBuffer {
    private static final VarHandle SHORT = view(short[].class);
    private static final VarHandle INT = view(int[].class);
    private static final VarHandle LONG = view(long[].class);
    private static final VarHandle FLOAT = view(float[].class);
    private static final VarHandle DOUBLE = view(double[].class);
    /** Unsafe on JDK 17 to 23, else null: see {@link UnsafeArrays}. */
    private static final sun.misc.Unsafe UNSAFE = UnsafeArrays.UNSAFE;
    private static final long BASE = UnsafeArrays.BASE;

    private static VarHandle view(Class<?> arrayType) {
        return MethodHandles.byteArrayViewVarHandle(arrayType, ByteOrder.LITTLE_ENDIAN);
    }

    private byte[] array;

    /** A buffer over an empty array; {@link #wrap(byte[])} points it at bytes. */
    public ArrayBuffer() {
        this.array = new byte[0];
    }

    public ArrayBuffer(byte[] array) {
        this.array = array;
    }

    /** A buffer over a new zeroed array of {@code capacity} bytes. */
    public static ArrayBuffer allocate(int capacity) {
        return new ArrayBuffer(new byte[capacity]);
    }

    /** Point this buffer at {@code array} (no allocation). */
    public ArrayBuffer wrap(byte[] array) {
        this.array = array;
        return this;
    }

    /** The array read and written (not a copy). */
    public byte[] array() {
        return array;
    }

    /** A copy of {@code length} bytes from {@code index}. */
    public byte[] copyOf(int index, int length) {
        return Arrays.copyOfRange(array, index, index + length);
    }

    @Override
    public int capacity() {
        return array.length;
    }

    @Override
    public byte getByte(int index) {
        return array[index];
    }

    @Override
    public short getShort(int index) {
        if (UNSAFE != null) {
            UnsafeArrays.check(array, index, 2);
            return UNSAFE.getShort(array, BASE + index);
        }
        return (short) SHORT.get(array, index);
    }

    @Override
    public int getInt(int index) {
        if (UNSAFE != null) {
            UnsafeArrays.check(array, index, 4);
            return UNSAFE.getInt(array, BASE + index);
        }
        return (int) INT.get(array, index);
    }

    @Override
    public long getLong(int index) {
        if (UNSAFE != null) {
            UnsafeArrays.check(array, index, 8);
            return UNSAFE.getLong(array, BASE + index);
        }
        return (long) LONG.get(array, index);
    }

    @Override
    public float getFloat(int index) {
        if (UNSAFE != null) {
            UnsafeArrays.check(array, index, 4);
            return UNSAFE.getFloat(array, BASE + index);
        }
        return (float) FLOAT.get(array, index);
    }

    @Override
    public double getDouble(int index) {
        if (UNSAFE != null) {
            UnsafeArrays.check(array, index, 8);
            return UNSAFE.getDouble(array, BASE + index);
        }
        return (double) DOUBLE.get(array, index);
    }

    @Override
    public void getBytes(int index, byte[] dst, int dstOffset, int length) {
        System.arraycopy(array, index, dst, dstOffset, length);
    }

    @Override
    public void putByte(int index, byte value) {
        array[index] = value;
    }

    @Override
    public void putShort(int index, short value) {
        if (UNSAFE != null) {
            UnsafeArrays.check(array, index, 2);
            UNSAFE.putShort(array, BASE + index, value);
            return;
        }
        SHORT.set(array, index, value);
    }

    @Override
    public void putInt(int index, int value) {
        if (UNSAFE != null) {
            UnsafeArrays.check(array, index, 4);
            UNSAFE.putInt(array, BASE + index, value);
            return;
        }
        INT.set(array, index, value);
    }

    @Override
    public void putLong(int index, long value) {
        if (UNSAFE != null) {
            UnsafeArrays.check(array, index, 8);
            UNSAFE.putLong(array, BASE + index, value);
            return;
        }
        LONG.set(array, index, value);
    }

    @Override
    public void putFloat(int index, float value) {
        if (UNSAFE != null) {
            UnsafeArrays.check(array, index, 4);
            UNSAFE.putFloat(array, BASE + index, value);
            return;
        }
        FLOAT.set(array, index, value);
    }

    @Override
    public void putDouble(int index, double value) {
        if (UNSAFE != null) {
            UnsafeArrays.check(array, index, 8);
            UNSAFE.putDouble(array, BASE + index, value);
            return;
        }
        DOUBLE.set(array, index, value);
    }

    @Override
    public void putBytes(int index, byte[] src, int srcOffset, int length) {
        System.arraycopy(src, srcOffset, array, index, length);
    }

    @Override
    public void putBytes(int index, ReadBuffer src, int srcIndex, int length) {
        src.getBytes(srcIndex, array, index, length);
    }

    @Override
    public void setMemory(int index, int length, byte value) {
        if (length > 64 || length < 8) {
            Arrays.fill(array, index, index + length, value);
            return;
        }
        // encoders zero each block they start: a few 8-byte stores, the last one overlapping,
        // unrolled where the length is a constant (a call to Arrays.fill costs more)
        java.util.Objects.checkFromIndexSize(index, length, array.length);
        long wide = (value & 0xFFL) * 0x0101010101010101L;
        int end = index + length - 8;
        for (int i = index; i < end; i += 8) {
            putLong(i, wide);
        }
        putLong(end, wide);
    }
}
