package seqbus.codec;

/**
 * {@code char[N]} fields: N bytes of ASCII, shorter text padded with NUL. Readers strip
 * trailing NUL and space bytes, so writers refuse a text that ends in either (it would not read
 * back as written); a byte of 0x80 or more is corrupt.
 */
public final class Chars {
    private Chars() {
    }

    /** The length of the text in the {@code n} bytes at {@code at}: trailing NULs and spaces off. */
    public static int length(ReadBuffer buffer, int at, int n) {
        while (n > 0) {
            byte b = buffer.getByte(at + n - 1);
            if (b != 0 && b != ' ') {
                break;
            }
            n--;
        }
        return n;
    }

    /** The length of the text at {@code at}, its bytes checked to be ASCII. */
    public static int checkedLength(ReadBuffer buffer, int at, int n, String msg, String field,
                                    int base) {
        if (n == 8) {  // the common char[8] (symbols, accounts) in one read
            long v = buffer.getLong(at);
            int len = 8;
            while (len > 0) {
                int b = (int) (v >>> (8 * (len - 1))) & 0xFF;
                if (b != 0 && b != ' ') {
                    break;
                }
                len--;
            }
            long kept = len == 8 ? v : v & ((1L << (8 * len)) - 1);
            if ((kept & 0x8080808080808080L) == 0) {
                return len;
            }
        }
        int len = length(buffer, at, n);
        for (int i = 0; i < len; i++) {
            if (buffer.getByte(at + i) < 0) {
                throw new DecodeException(msg, field, at + i - base,
                                          "char field holds a non-ASCII byte");
            }
        }
        return len;
    }

    /** The text of the {@code n} bytes at {@code at}. */
    public static String get(ReadBuffer buffer, int at, int n, String msg, String field, int base) {
        int len = checkedLength(buffer, at, n, msg, field, base);
        if (len == 0) {
            return "";
        }
        char[] chars = new char[len];
        for (int i = 0; i < len; i++) {
            chars[i] = (char) buffer.getByte(at + i);
        }
        return new String(chars);
    }

    /** Append the text of the {@code n} bytes at {@code at}, as a JSON string with {@code json}. */
    public static StringBuilder append(StringBuilder out, ReadBuffer buffer, int at, int n,
                                       boolean json, String msg, String field, int base) {
        int len = checkedLength(buffer, at, n, msg, field, base);
        for (int i = 0; i < len; i++) {
            char c = (char) buffer.getByte(at + i);
            if (json) {
                Json.appendChar(out, c);
            } else {
                out.append(c);
            }
        }
        return out;
    }

    /** Copy the text (up to {@code length} bytes of it) into {@code dst}; returns bytes copied. */
    public static int copy(ReadBuffer buffer, int at, int n, byte[] dst, int dstOffset, int length,
                           String msg, String field, int base) {
        int len = Math.min(checkedLength(buffer, at, n, msg, field, base), length);
        buffer.getBytes(at, dst, dstOffset, len);
        return len;
    }

    /** Write {@code text} into the {@code n} bytes at {@code at}, NUL padded. */
    public static void put(MutableBuffer buffer, int at, int n, CharSequence text, String field) {
        int len = text.length();
        if (len > n) {
            throw new EncodeException(field, Json.quote(text) + " is longer than " + n
                                      + " characters");
        }
        if (len > 0 && (text.charAt(len - 1) == ' ' || text.charAt(len - 1) == 0)) {
            throw new EncodeException(field, Json.quote(text)
                                      + " ends in padding (a space or a NUL), which readers strip");
        }
        for (int i = 0; i < len; i++) {
            char c = text.charAt(i);
            if (c >= 0x80) {
                throw new EncodeException(field, Json.quote(text) + " is not ASCII");
            }
            buffer.putByte(at + i, (byte) c);
        }
        for (int i = len; i < n; i++) {
            buffer.putByte(at + i, (byte) 0);
        }
    }

    /** Write {@code length} ASCII bytes of {@code src} into the {@code n} bytes at {@code at}. */
    public static void put(MutableBuffer buffer, int at, int n, byte[] src, int srcOffset,
                           int length, String field) {
        for (int i = 0; i < length; i++) {
            if (src[srcOffset + i] < 0) {
                throw new EncodeException(field, "byte " + i + " is not ASCII");
            }
        }
        if (length > n) {
            throw new EncodeException(field, length + " bytes are longer than " + n
                                      + " characters");
        }
        if (length > 0 && (src[srcOffset + length - 1] == ' ' || src[srcOffset + length - 1] == 0)) {
            throw new EncodeException(field, "text ends in padding (a space or a NUL), which "
                                      + "readers strip");
        }
        buffer.putBytes(at, src, srcOffset, length);
        buffer.setMemory(at + length, n - length, (byte) 0);
    }

    /**
     * Re-encode the text in the {@code n} bytes at {@code srcAt} of {@code src} (a decoded field,
     * checked to be ASCII) into the {@code n} bytes at {@code dstAt}: as read, so NUL padded.
     */
    public static void copy(ReadBuffer src, int srcAt, MutableBuffer dst, int dstAt, int n,
                            String msg, String field, int base) {
        int len = checkedLength(src, srcAt, n, msg, field, base);
        dst.putBytes(dstAt, src, srcAt, len);
        dst.setMemory(dstAt + len, n - len, (byte) 0);
    }
}
