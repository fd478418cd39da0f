package seqbus.codec;

/**
 * Where a message encoder and its group encoders write: the buffer, the start of the message
 * and the end of what is written so far (the limit), shared by every level so that groups and
 * variable-length fields follow each other. Every claim is checked against the space the
 * encoder was given. Generated code uses it; applications need not.
 */
public final class EncodeCursor {
    private MutableBuffer buffer;
    private int start;
    private int limit;
    private int end;

    /** Start a message of {@code capacity} bytes at most at {@code offset}. */
    public void reset(MutableBuffer buffer, int offset, int capacity, String message) {
        if (offset < 0 || capacity < 0 || offset > buffer.capacity() - capacity) {
            throw new EncodeException(message, "offset " + offset + " and capacity " + capacity
                                      + " do not fit a buffer of " + buffer.capacity() + " bytes");
        }
        if (this.buffer != buffer) {  // a reference store costs a GC write barrier
            this.buffer = buffer;
        }
        this.start = offset;
        this.limit = offset;
        this.end = offset + capacity;
    }

    public MutableBuffer buffer() {
        return buffer;
    }

    /** The position just past what is written. */
    public int limit() {
        return limit;
    }

    /** Bytes written since the message's start. */
    public int length() {
        return limit - start;
    }

    /** Reserve {@code n} bytes at the limit; returns their position. */
    public int claim(int n, String field) {
        if (end - limit < n) {
            throw new EncodeException(field, "the buffer is too small (" + (end - start)
                                      + " bytes, " + ((long) limit - start + n) + " needed)");
        }
        int at = limit;
        limit += n;
        return at;
    }

    /** Write a group header. */
    public void groupHeader(int blockLength, int numGroups, int numVars, int count,
                            String field) {
        if (count < 0) {
            throw new EncodeException(field, "count " + count + " is negative");
        }
        int at = claim(Frames.GROUP_HEADER_SIZE, field);
        // block length u16, groups u8, variable-length fields u8, count u32: one long
        buffer.putLong(at, blockLength | (long) numGroups << 16 | (long) numVars << 24
                       | (count & 0xFFFFFFFFL) << 32);
    }

    /** Write an empty variable-length field. */
    public void emptyVar(String field) {
        buffer.putInt(claim(Frames.VAR_LENGTH_SIZE, field), 0);
    }

    /** Write a variable-length field of {@code length} bytes of {@code src}. */
    public void putVar(byte[] src, int srcOffset, int length, String field) {
        int at = claim(Frames.VAR_LENGTH_SIZE + length, field);
        buffer.putInt(at, length);
        buffer.putBytes(at + Frames.VAR_LENGTH_SIZE, src, srcOffset, length);
    }

    /** Write a variable-length field of {@code length} bytes of {@code src}. */
    public void putVar(ReadBuffer src, int srcIndex, int length, String field) {
        int at = claim(Frames.VAR_LENGTH_SIZE + length, field);
        buffer.putInt(at, length);
        buffer.putBytes(at + Frames.VAR_LENGTH_SIZE, src, srcIndex, length);
    }

    /** Write a string field: {@code text} as UTF-8. */
    public void putString(CharSequence text, String field) {
        int n = Utf8.encodedLength(text, field);
        int at = claim(Frames.VAR_LENGTH_SIZE + n, field);
        buffer.putInt(at, n);
        Utf8.encode(text, buffer, at + Frames.VAR_LENGTH_SIZE);
    }

    /** Write a string field of {@code length} bytes of UTF-8 at {@code srcIndex}, checked. */
    public void putUtf8(ReadBuffer src, int srcIndex, int length, String msg, String field,
                        int base) {
        Utf8.check(src, srcIndex, length, msg, field, base);
        putVar(src, srcIndex, length, field);
    }

    /** Write a string field of {@code length} bytes of UTF-8, checked. */
    public void putUtf8(byte[] src, int srcOffset, int length, String field) {
        int at = limit;
        putVar(src, srcOffset, length, field);
        int bad = Utf8.invalidAt(buffer, at + Frames.VAR_LENGTH_SIZE, length);
        if (bad >= 0) {
            limit = at;
            throw new EncodeException(field, "byte " + bad + " is not valid UTF-8");
        }
    }
}
