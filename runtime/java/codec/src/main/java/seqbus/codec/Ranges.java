package seqbus.codec;

/**
 * Range checks of unsigned values held in wider Java types (u8 in a short, u16 in an int, u32
 * in a long): an encoder refuses a value its field cannot hold rather than cut it. And the one
 * rule that keeps a re-encoded f32 byte-identical with the other languages' codecs.
 */
public final class Ranges {
    private Ranges() {
    }

    public static short u8(short value, String field) {
        if (value < 0 || value > 0xFF) {
            throw new EncodeException(field, value + " is out of range of u8 (0 to 255)");
        }
        return value;
    }

    public static int u16(int value, String field) {
        if (value < 0 || value > 0xFFFF) {
            throw new EncodeException(field, value + " is out of range of u16 (0 to 65535)");
        }
        return value;
    }

    public static long u32(long value, String field) {
        if (value < 0 || value > 0xFFFFFFFFL) {
            throw new EncodeException(field, value + " is out of range of u32 (0 to 4294967295)");
        }
        return value;
    }

    /**
     * An f32 as the Python codecs write it back after reading it (they hold it as a double): a
     * signalling NaN comes back quiet (its quiet bit, 0x00400000, set); anything else as is.
     */
    public static float quietNaN(float value) {
        int bits = Float.floatToRawIntBits(value);
        if ((bits & 0x7F800000) == 0x7F800000 && (bits & 0x003FFFFF) != 0
                && (bits & 0x00400000) == 0) {
            return Float.intBitsToFloat(bits | 0x00400000);
        }
        return value;
    }
}
