package seqbus.codec;

import java.nio.ByteOrder;

/**
 * Reads and writes of a {@code byte[]} through {@code sun.misc.Unsafe}, for {@link ArrayBuffer},
 * where that is fit: x86-64 or AArch64 (little-endian, unaligned loads allowed) and a JVM from
 * 17 to 23, unless the system property
 * {@code seqbus.codec.unsafe} is {@code false}. Why: the JIT makes the same loads and stores of
 * both these and the array-view VarHandles ArrayBuffer uses otherwise, but the VarHandles' code
 * is larger before it is reduced, and where a whole decode is compiled into one method (a loop
 * over messages reading every field and group) the larger code runs out the JIT's inlining
 * budget: the calls left out (a group's {@code hasNext}, …) made decoding up to twice as slow
 * (docs/benchmarks.md, "Java codecs"). From JDK 24 on, sun.misc.Unsafe's memory access prints
 * a warning (JEP 498) and will go away: there the VarHandles serve.
 *
 * <p>Every access is bounds-checked first ({@link #check}), so an index outside the array is an
 * {@link IndexOutOfBoundsException} as with the VarHandles, never a read of other memory.
 */
final class UnsafeArrays {
    /** The Unsafe to use, or null: use the VarHandles. */
    static final sun.misc.Unsafe UNSAFE = find();
    static final long BASE = UNSAFE == null ? 0 : UNSAFE.arrayBaseOffset(byte[].class);

    private UnsafeArrays() {
    }

    private static sun.misc.Unsafe find() {
        String arch = System.getProperty("os.arch", "");
        if (ByteOrder.nativeOrder() != ByteOrder.LITTLE_ENDIAN
                || !(arch.equals("amd64") || arch.equals("x86_64") || arch.equals("aarch64"))
                || Runtime.version().feature() > 23
                || "false".equals(System.getProperty("seqbus.codec.unsafe"))) {
            return null;
        }
        try {
            java.lang.reflect.Field f = sun.misc.Unsafe.class.getDeclaredField("theUnsafe");
            f.setAccessible(true);
            return (sun.misc.Unsafe) f.get(null);
        } catch (ReflectiveOperationException | RuntimeException e) {
            return null;
        }
    }

    static void check(byte[] array, int index, int size) {
        if (index < 0 || index > array.length - size) {
            throw new IndexOutOfBoundsException("index " + index + " of " + size + " bytes in an "
                                                + "array of " + array.length);
        }
    }
}
