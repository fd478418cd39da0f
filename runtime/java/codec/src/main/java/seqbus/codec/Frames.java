package seqbus.codec;

/**
 * The framing of the seqbus wire format (docs/wire-format.md) that every generated decoder
 * shares: the message header, group headers, variable-length fields, presence and bool bytes,
 * and the checks each needs. Positions are absolute indexes into the buffer; {@code limit} is
 * the end of the message's bytes and {@code base} its first byte (offsets in errors are
 * counted from it). Generated code calls these; applications need not.
 */
public final class Frames {
    /** block_length u16, template_id u16, schema_id u16, version u16. */
    public static final int HEADER_SIZE = 8;
    /** num_groups u8, num_var_fields u8, right after a message's block. */
    public static final int SECTION_HEADER_SIZE = 2;
    /** block_length u16, num_groups u8, num_var_fields u8, count u32. */
    public static final int GROUP_HEADER_SIZE = 8;
    /** The u32 before each string/bytes value. */
    public static final int VAR_LENGTH_SIZE = 4;
    /** Groups nested deeper than this are refused when skipped (the Python codecs' limit). */
    public static final int MAX_DEPTH = 16;
    /** Zero-length entries a group may claim (they take no bytes, so no length bounds them). */
    public static final long MAX_EMPTY_ENTRIES = 65536;

    /** What fixed fields newer than the writer read as: 65,536 zero bytes, never written. */
    public static final ReadBuffer ZEROS = new ZeroBuffer(65536);

    private Frames() {
    }

    // ---- the message ---------------------------------------------------------------------

    /**
     * Check that {@code length} bytes from {@code offset} lie in the buffer, and the header
     * there: schema id, template id, a block at least {@code minBlock} long, and the block and
     * section header within {@code length}. Returns the writer's block length.
     */
    public static int header(ReadBuffer buffer, int offset, int length, String msg, int schemaId,
                             int templateId, int minBlock) {
        window(buffer, offset, length, msg);
        if (length < HEADER_SIZE) {
            throw truncated(msg, "header", 0, "message header");
        }
        long header = buffer.getLong(offset);
        int bl = (int) header & 0xFFFF;
        int tid = (int) (header >>> 16) & 0xFFFF;
        int sid = (int) (header >>> 32) & 0xFFFF;
        if (sid != schemaId) {
            throw new DecodeException(msg, "header", 4,
                                      "schema id " + sid + ", expected " + schemaId);
        }
        if (tid != templateId) {
            throw new DecodeException(msg, "header", 2,
                                      "template id " + tid + ", expected " + templateId);
        }
        if (bl < minBlock) {
            throw new DecodeException(msg, "header", 0,
                                      "block length " + bl + " is shorter than " + minBlock);
        }
        if (length - HEADER_SIZE - SECTION_HEADER_SIZE < bl) {
            throw truncated(msg, "header", 0, "block of " + bl + " bytes");
        }
        return bl;
    }

    /** The template id of the message at {@code offset} (its header checked to be there). */
    public static int templateId(ReadBuffer buffer, int offset, int length, String pkg) {
        window(buffer, offset, length, pkg);
        if (length < HEADER_SIZE) {
            throw truncated(pkg, "header", 0, "message header");
        }
        return buffer.getShort(offset + 2) & 0xFFFF;
    }

    /** Check that {@code length} bytes from {@code offset} lie inside the buffer. */
    public static void window(ReadBuffer buffer, int offset, int length, String msg) {
        int size = buffer.capacity();
        if (offset < 0 || offset > size) {
            throw new DecodeException(msg, "", offset,
                                      "offset outside a buffer of " + size + " bytes");
        }
        if (length < 0 || length > size - offset) {
            throw new DecodeException(msg, "", offset,
                                      "length " + length + " runs past a buffer of " + size
                                      + " bytes");
        }
    }

    // ---- groups and variable-length fields -----------------------------------------------

    /**
     * Skip the group whose header is at {@code pos}, checking every entry, nested group and
     * variable-length field of it against {@code limit}; returns the position just past it.
     * {@code depth} is the group's own nesting depth (1 for a group of a message).
     */
    public static int skipGroup(ReadBuffer buffer, int pos, int limit, int depth, String msg,
                                String field, int base) {
        if (limit - pos < GROUP_HEADER_SIZE) {
            throw truncated(msg, field, pos - base, "group header");
        }
        int bl = buffer.getShort(pos) & 0xFFFF;
        int ng = buffer.getByte(pos + 2) & 0xFF;
        int nv = buffer.getByte(pos + 3) & 0xFF;
        long count = buffer.getInt(pos + 4) & 0xFFFFFFFFL;
        if (bl == 0 && ng == 0 && nv == 0 && count > MAX_EMPTY_ENTRIES) {
            throw new DecodeException(msg, field, pos - base, count + " zero-length entries");
        }
        pos += GROUP_HEADER_SIZE;
        if (ng == 0 && nv == 0) {
            long total = bl * count;
            if (total > limit - pos) {
                throw truncated(msg, field, pos - base, "group of " + count + " entries");
            }
            return pos + (int) total;
        }
        if (depth >= MAX_DEPTH) {
            throw new DecodeException(msg, field, pos - base, "groups nested too deep");
        }
        for (long i = 0; i < count; i++) {
            if (limit - pos < bl) {
                throw truncated(msg, field, pos - base, "group entry");
            }
            pos += bl;
            for (int k = 0; k < ng; k++) {
                pos = skipGroup(buffer, pos, limit, depth + 1, msg, field, base);
            }
            for (int k = 0; k < nv; k++) {
                pos = skipVar(buffer, pos, limit, msg, field, base);
            }
        }
        return pos;
    }

    /** Skip the variable-length field at {@code pos}; returns the position just past it. */
    public static int skipVar(ReadBuffer buffer, int pos, int limit, String msg, String field,
                              int base) {
        if (limit - pos < VAR_LENGTH_SIZE) {
            throw truncated(msg, field, pos - base, "length of variable-length field");
        }
        long size = buffer.getInt(pos) & 0xFFFFFFFFL;
        if (size > limit - pos - VAR_LENGTH_SIZE) {
            throw truncated(msg, field, pos - base, "variable-length field of " + size + " bytes");
        }
        return pos + VAR_LENGTH_SIZE + (int) size;
    }

    /**
     * Check the header of a group the reader knows, at {@code at} (its 8 bytes read as one
     * little-endian long: {@link #GROUP_HEADER_SIZE} bytes must lie before {@code limit}, which
     * the caller checked): entries of at least {@code minBlock} bytes, no more entries than the
     * rest of the message can hold (each takes its block, a header per nested group and a length
     * per variable-length field at least), at most {@link #MAX_EMPTY_ENTRIES} that take no
     * bytes. Returns the count.
     */
    public static int groupCount(long header, int at, int limit, int minBlock, String msg,
                                 String field, int base) {
        int bl = (int) header & 0xFFFF;
        long count = header >>> 32;
        if (count != 0 && bl < minBlock) {
            throw new DecodeException(msg, field, at - base,
                                      "entry block length " + bl + " is shorter than " + minBlock);
        }
        long least = bl + GROUP_HEADER_SIZE * ((header >>> 16) & 0xFF)
            + VAR_LENGTH_SIZE * ((header >>> 24) & 0xFF);
        if (least == 0 && count > MAX_EMPTY_ENTRIES) {
            throw new DecodeException(msg, field, at - base, count + " zero-length entries");
        }
        if (count * least > limit - at - GROUP_HEADER_SIZE) {
            throw truncated(msg, field, at + GROUP_HEADER_SIZE - base,
                            "group of " + count + " entries");
        }
        return (int) count;
    }

    // ---- values ----------------------------------------------------------------------------

    /** The presence byte of an optional field at {@code at}: 0 absent, 1 present. */
    public static boolean present(ReadBuffer buffer, int at, String msg, String field, int base) {
        byte b = buffer.getByte(at);
        if (b == 1) {
            return true;
        }
        if (b == 0) {
            return false;
        }
        throw new DecodeException(msg, field, at - base,
                                  "presence byte is " + (b & 0xFF) + ", not 0 or 1");
    }

    /** A bool at {@code at}: 0 false, 1 true. */
    public static boolean bool(ReadBuffer buffer, int at, String msg, String field, int base) {
        byte b = buffer.getByte(at);
        if (b == 1) {
            return true;
        }
        if (b == 0) {
            return false;
        }
        throw new DecodeException(msg, field, at - base,
                                  "bool byte is " + (b & 0xFF) + ", not 0 or 1");
    }

    /** The error for an enum value the schema does not list. */
    public static DecodeException notInEnum(String msg, String field, int offset, String value,
                                            String enumName) {
        return new DecodeException(msg, field, offset, value + " is not a value of " + enumName);
    }

    /** What reading an absent optional field throws. */
    public static java.util.NoSuchElementException absent(String path) {
        return new java.util.NoSuchElementException(path + " is absent");
    }

    /** The error for {@code what} running past the end of the message. */
    public static DecodeException truncated(String msg, String field, int offset, String what) {
        return new DecodeException(msg, field, offset, what + " runs past the end of the buffer");
    }

    /** Bytes that read as 0 and cannot be written. */
    private static final class ZeroBuffer implements ReadBuffer {
        private final int capacity;

        ZeroBuffer(int capacity) {
            this.capacity = capacity;
        }

        private void check(int index, int size) {
            if (index < 0 || index > capacity - size) {
                throw new IndexOutOfBoundsException(index);
            }
        }

        @Override
        public int capacity() {
            return capacity;
        }

        @Override
        public byte getByte(int index) {
            check(index, 1);
            return 0;
        }

        @Override
        public short getShort(int index) {
            check(index, 2);
            return 0;
        }

        @Override
        public int getInt(int index) {
            check(index, 4);
            return 0;
        }

        @Override
        public long getLong(int index) {
            check(index, 8);
            return 0;
        }

        @Override
        public float getFloat(int index) {
            check(index, 4);
            return 0;
        }

        @Override
        public double getDouble(int index) {
            check(index, 8);
            return 0;
        }

        @Override
        public void getBytes(int index, byte[] dst, int dstOffset, int length) {
            check(index, length);
            java.util.Arrays.fill(dst, dstOffset, dstOffset + length, (byte) 0);
        }
    }
}
