package seqbus.codec;

import java.math.BigDecimal;
import java.math.MathContext;
import java.math.RoundingMode;

/**
 * Canonical JSON, the form of the shared test vectors (tests/compiler/vectors.py): compact,
 * keys in declaration order, enums by name, flags as integers, {@code bytes} and
 * {@code byte[N]} as lowercase hex, absent optionals and non-finite floats as {@code null},
 * strings with non-ASCII kept. Numbers are written as Python's {@code json.dumps} writes them,
 * floats included (the shortest text that reads back as the same double).
 */
public final class Json {
    private static final char[] HEX = "0123456789abcdef".toCharArray();

    private Json() {
    }

    /** Append {@code c} as it appears inside a JSON string. */
    public static StringBuilder appendChar(StringBuilder out, char c) {
        switch (c) {
            case '"':
                return out.append("\\\"");
            case '\\':
                return out.append("\\\\");
            case '\n':
                return out.append("\\n");
            case '\r':
                return out.append("\\r");
            case '\t':
                return out.append("\\t");
            case '\b':
                return out.append("\\b");
            case '\f':
                return out.append("\\f");
            default:
                if (c < 0x20) {
                    return out.append("\\u00").append(HEX[c >> 4]).append(HEX[c & 0xF]);
                }
                return out.append(c);
        }
    }

    /** Append {@code text} as a JSON string, quotes included. */
    public static StringBuilder appendString(StringBuilder out, CharSequence text) {
        out.append('"');
        for (int i = 0; i < text.length(); i++) {
            appendChar(out, text.charAt(i));
        }
        return out.append('"');
    }

    /** {@code text} as a JSON string. */
    public static String quote(CharSequence text) {
        return appendString(new StringBuilder(text.length() + 2), text).toString();
    }

    /** Append {@code length} bytes at {@code at} as a JSON string of lowercase hex. */
    public static StringBuilder appendHex(StringBuilder out, ReadBuffer buffer, int at, int length) {
        out.append('"');
        for (int i = 0; i < length; i++) {
            int b = buffer.getByte(at + i) & 0xFF;
            out.append(HEX[b >> 4]).append(HEX[b & 0xF]);
        }
        return out.append('"');
    }

    /** Append a u64 held in a long. */
    public static StringBuilder appendUnsigned(StringBuilder out, long value) {
        if (value >= 0) {
            return out.append(value);
        }
        return out.append(Long.toUnsignedString(value));
    }

    /** Append an f32 as Python writes the double it widens to. */
    public static StringBuilder appendFloat(StringBuilder out, float value) {
        return appendDouble(out, value);
    }

    /** Append an f64 as Python's {@code json.dumps} does ({@code repr}), non-finite as null. */
    public static StringBuilder appendDouble(StringBuilder out, double value) {
        if (Double.isNaN(value) || Double.isInfinite(value)) {
            return out.append("null");
        }
        return out.append(repr(value));
    }

    /**
     * Python's {@code repr} of a finite double: the shortest decimal that reads back as the
     * same double (the nearest one when several are as short), in fixed notation when its
     * decimal exponent is from -4 to 15 ({@code 0.0001}, {@code 100.0}) and in exponent notation
     * otherwise ({@code 1e-05}, {@code 1.5e+16}).
     */
    public static String repr(double value) {
        if (value == 0) {
            return 1 / value < 0 ? "-0.0" : "0.0";
        }
        BigDecimal exact = new BigDecimal(value);
        BigDecimal best = null;
        for (int p = 1; p <= 17 && best == null; p++) {
            BigDecimal nearest = exact.round(new MathContext(p, RoundingMode.HALF_EVEN));
            if (nearest.doubleValue() == value) {
                best = nearest;
                break;
            }
            // the interval reading back as value is lopsided at powers of two: the nearest
            // p-digit decimal may lie outside it while the one on the other side lies inside
            RoundingMode other = nearest.compareTo(exact) < 0 ? RoundingMode.CEILING
                                                              : RoundingMode.FLOOR;
            BigDecimal far = exact.round(new MathContext(p, other));
            if (far.doubleValue() == value) {
                best = far;
            }
        }
        if (best == null) {
            best = exact.round(MathContext.DECIMAL64);
        }
        best = best.stripTrailingZeros();
        String digits = best.unscaledValue().abs().toString();
        int decpt = digits.length() - best.scale();  // value = 0.DIGITS x 10^decpt
        StringBuilder out = new StringBuilder(24);
        if (value < 0) {
            out.append('-');
        }
        int exp = decpt - 1;
        if (exp < -4 || exp >= 16) {
            out.append(digits.charAt(0));
            if (digits.length() > 1) {
                out.append('.').append(digits, 1, digits.length());
            }
            out.append('e').append(exp < 0 ? '-' : '+');
            int a = Math.abs(exp);
            if (a < 10) {
                out.append('0');
            }
            out.append(a);
        } else if (decpt <= 0) {
            out.append("0.");
            for (int i = 0; i < -decpt; i++) {
                out.append('0');
            }
            out.append(digits);
        } else if (decpt < digits.length()) {
            out.append(digits, 0, decpt).append('.').append(digits, decpt, digits.length());
        } else {
            out.append(digits);
            for (int i = digits.length(); i < decpt; i++) {
                out.append('0');
            }
            out.append(".0");
        }
        return out.toString();
    }
}
