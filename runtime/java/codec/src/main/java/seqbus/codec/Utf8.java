package seqbus.codec;

import java.nio.charset.StandardCharsets;

/**
 * Strict UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF), read from
 * and written to buffers without allocating: what {@code string} fields hold. Invalid bytes
 * are refused as the Python and Rust codecs refuse them, at the first byte of the sequence
 * that is not valid.
 */
public final class Utf8 {
    private Utf8() {
    }

    /** The index (from {@code pos}) of the first invalid sequence, or -1 when all is valid. */
    public static int invalidAt(ReadBuffer buffer, int pos, int length) {
        int i = 0;
        while (i < length) {
            if (length - i >= 8 && (buffer.getLong(pos + i) & 0x8080808080808080L) == 0) {
                i += 8;  // eight ASCII bytes
                continue;
            }
            if (buffer.getByte(pos + i) >= 0) {  // ASCII
                i++;
                continue;
            }
            int n = sequence(buffer, pos + i, length - i);
            if (n < 0) {
                return i;
            }
            i += n;
        }
        return -1;
    }

    /** The length of the valid sequence at {@code at} ({@code room} bytes left), or -1. */
    private static int sequence(ReadBuffer buffer, int at, int room) {
        int b0 = buffer.getByte(at) & 0xFF;
        if (b0 < 0x80) {
            return 1;
        }
        int n;
        int lo = 0x80;
        int hi = 0xBF;
        if (b0 >= 0xC2 && b0 <= 0xDF) {
            n = 2;
        } else if (b0 >= 0xE0 && b0 <= 0xEF) {
            n = 3;
            if (b0 == 0xE0) {
                lo = 0xA0;
            } else if (b0 == 0xED) {
                hi = 0x9F;
            }
        } else if (b0 >= 0xF0 && b0 <= 0xF4) {
            n = 4;
            if (b0 == 0xF0) {
                lo = 0x90;
            } else if (b0 == 0xF4) {
                hi = 0x8F;
            }
        } else {
            return -1;
        }
        if (room < n) {
            return -1;
        }
        int b1 = buffer.getByte(at + 1) & 0xFF;
        if (b1 < lo || b1 > hi) {
            return -1;
        }
        for (int k = 2; k < n; k++) {
            int b = buffer.getByte(at + k) & 0xFF;
            if (b < 0x80 || b > 0xBF) {
                return -1;
            }
        }
        return n;
    }

    /** Throw the decode error for invalid UTF-8 in {@code length} bytes at {@code pos}. */
    public static void check(ReadBuffer buffer, int pos, int length, String msg, String field,
                             int base) {
        int bad = invalidAt(buffer, pos, length);
        if (bad >= 0) {
            throw invalid(msg, field, pos + bad - base);
        }
    }

    private static DecodeException invalid(String msg, String field, int offset) {
        return new DecodeException(msg, field, offset, "string is not valid UTF-8");
    }

    /** The text of {@code length} bytes at {@code pos}, checked. */
    public static String decode(ReadBuffer buffer, int pos, int length, String msg, String field,
                                int base) {
        check(buffer, pos, length, msg, field, base);
        if (buffer instanceof ArrayBuffer) {
            return new String(((ArrayBuffer) buffer).array(), pos, length, StandardCharsets.UTF_8);
        }
        byte[] bytes = new byte[length];
        buffer.getBytes(pos, bytes, 0, length);
        return new String(bytes, StandardCharsets.UTF_8);
    }

    /**
     * Append the text of {@code length} bytes at {@code pos} to {@code out}, checked, without
     * allocating; with {@code json}, as the body of a JSON string (escaped as Python's
     * {@code json.dumps(ensure_ascii=False)} escapes).
     */
    public static StringBuilder append(StringBuilder out, ReadBuffer buffer, int pos, int length,
                                       boolean json, String msg, String field, int base) {
        int i = 0;
        while (i < length) {
            int at = pos + i;
            int n = sequence(buffer, at, length - i);
            if (n < 0) {
                throw invalid(msg, field, at - base);
            }
            int b0 = buffer.getByte(at) & 0xFF;
            if (n == 1) {
                if (json) {
                    Json.appendChar(out, (char) b0);
                } else {
                    out.append((char) b0);
                }
            } else {
                int cp = b0 & (0xFF >> (n + 1));
                for (int k = 1; k < n; k++) {
                    cp = (cp << 6) | (buffer.getByte(at + k) & 0x3F);
                }
                out.appendCodePoint(cp);
            }
            i += n;
        }
        return out;
    }

    /**
     * The UTF-8 length of {@code text}; a lone surrogate (which UTF-8 cannot hold) is an
     * {@link EncodeException} naming {@code field}.
     */
    public static int encodedLength(CharSequence text, String field) {
        int n = 0;
        int len = text.length();
        for (int i = 0; i < len; i++) {
            char c = text.charAt(i);
            if (c < 0x80) {
                n += 1;
            } else if (c < 0x800) {
                n += 2;
            } else if (Character.isHighSurrogate(c)) {
                if (i + 1 >= len || !Character.isLowSurrogate(text.charAt(i + 1))) {
                    throw new EncodeException(field, "lone surrogate at index " + i
                                              + " is not text UTF-8 can hold");
                }
                n += 4;
                i++;
            } else if (Character.isLowSurrogate(c)) {
                throw new EncodeException(field, "lone surrogate at index " + i
                                          + " is not text UTF-8 can hold");
            } else {
                n += 3;
            }
        }
        return n;
    }

    /** Write {@code text} (checked by {@link #encodedLength}) as UTF-8 at {@code at}. */
    public static void encode(CharSequence text, MutableBuffer buffer, int at) {
        int len = text.length();
        int p = at;
        for (int i = 0; i < len; i++) {
            char c = text.charAt(i);
            if (c < 0x80) {
                buffer.putByte(p++, (byte) c);
            } else if (c < 0x800) {
                buffer.putByte(p++, (byte) (0xC0 | (c >> 6)));
                buffer.putByte(p++, (byte) (0x80 | (c & 0x3F)));
            } else if (Character.isHighSurrogate(c)) {
                int cp = Character.toCodePoint(c, text.charAt(++i));
                buffer.putByte(p++, (byte) (0xF0 | (cp >> 18)));
                buffer.putByte(p++, (byte) (0x80 | ((cp >> 12) & 0x3F)));
                buffer.putByte(p++, (byte) (0x80 | ((cp >> 6) & 0x3F)));
                buffer.putByte(p++, (byte) (0x80 | (cp & 0x3F)));
            } else {
                buffer.putByte(p++, (byte) (0xE0 | (c >> 12)));
                buffer.putByte(p++, (byte) (0x80 | ((c >> 6) & 0x3F)));
                buffer.putByte(p++, (byte) (0x80 | (c & 0x3F)));
            }
        }
    }
}
