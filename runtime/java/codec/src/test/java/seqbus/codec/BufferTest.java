package seqbus.codec;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import java.nio.ByteBuffer;
import java.nio.ByteOrder;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/**
 * ArrayBuffer and NioBuffer read and write little-endian values as ByteBuffer does, and refuse
 * an index outside their bytes. Run twice by make test-java: with ArrayBuffer on
 * sun.misc.Unsafe where the JVM allows it, and with -Dseqbus.codec.unsafe=false (VarHandles).
 */
class BufferTest {
    @Test
    void theAccessPathIsTheOneAskedFor() {
        boolean off = "false".equals(System.getProperty("seqbus.codec.unsafe"));
        boolean fit = Runtime.version().feature() <= 23
            && ByteOrder.nativeOrder() == ByteOrder.LITTLE_ENDIAN
            && java.util.Set.of("amd64", "x86_64", "aarch64").contains(System.getProperty("os.arch"));
        assertEquals(!off && fit, UnsafeArrays.UNSAFE != null);
    }

    @Test
    void valuesReadAndWriteAsLittleEndian() {
        SplittableRandom rnd = new SplittableRandom(31);
        byte[] array = new byte[64];
        ByteBuffer reference = ByteBuffer.wrap(array).order(ByteOrder.LITTLE_ENDIAN);
        MutableBuffer[] buffers = {new ArrayBuffer(array), new NioBuffer(ByteBuffer.wrap(array))};
        for (int round = 0; round < 2000; round++) {
            MutableBuffer b = buffers[round % 2];
            int at = rnd.nextInt(64 - 8);
            long v = rnd.nextLong();
            b.putLong(at, v);
            assertEquals(v, reference.getLong(at));
            assertEquals(reference.getInt(at + 1), b.getInt(at + 1));
            assertEquals(reference.getShort(at + 2), b.getShort(at + 2));
            assertEquals(reference.get(at + 3), b.getByte(at + 3));
            b.putInt(at, (int) v);
            assertEquals((int) v, reference.getInt(at));
            b.putShort(at, (short) v);
            assertEquals((short) v, reference.getShort(at));
            b.putDouble(at, Double.longBitsToDouble(v));
            assertEquals(v, Double.doubleToRawLongBits(reference.getDouble(at)));
            b.putFloat(at, 1.5f);
            assertEquals(1.5f, b.getFloat(at));
            assertEquals(reference.getDouble(at), b.getDouble(at));
            int n = rnd.nextInt(1, 40);
            b.setMemory(at, Math.min(n, 64 - at), (byte) 0x5A);
            assertEquals(0x5A, b.getByte(at + Math.min(n, 64 - at) - 1));
        }
    }

    @Test
    void anIndexOutsideTheBytesIsRefused() {
        for (MutableBuffer b : new MutableBuffer[] {ArrayBuffer.allocate(16), NioBuffer.allocateDirect(16)}) {
            assertThrows(IndexOutOfBoundsException.class, () -> b.getLong(9));
            assertThrows(IndexOutOfBoundsException.class, () -> b.getLong(-1));
            assertThrows(IndexOutOfBoundsException.class, () -> b.getInt(13));
            assertThrows(IndexOutOfBoundsException.class, () -> b.putShort(15, (short) 1));
            assertThrows(IndexOutOfBoundsException.class, () -> b.getByte(16));
            assertThrows(IndexOutOfBoundsException.class, () -> b.setMemory(10, 8, (byte) 0));
            b.putLong(8, -1L);
            assertEquals(-1L, b.getLong(8));
        }
    }
}
