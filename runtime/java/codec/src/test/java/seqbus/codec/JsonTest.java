package seqbus.codec;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import org.junit.jupiter.api.Test;

/** Canonical JSON: numbers and strings exactly as Python's json.dumps writes them. */
class JsonTest {
    @Test
    void doublesAreWrittenAsPythonWritesThem() throws IOException {
        int checked = 0;
        try (InputStream in = JsonTest.class.getResourceAsStream("python-float-repr.txt");
             BufferedReader r = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8))) {
            for (String line = r.readLine(); line != null; line = r.readLine()) {
                if (line.startsWith("#")) {
                    continue;
                }
                String[] parts = line.split(" ");
                double v = Double.longBitsToDouble(Long.parseUnsignedLong(parts[0], 16));
                assertEquals(parts[1], Json.appendDouble(new StringBuilder(), v).toString(),
                             parts[0]);
                checked++;
            }
        }
        assertEquals(8000, checked);
    }

    @Test
    void specialFloats() {
        assertEquals("null", Json.appendDouble(new StringBuilder(), Double.NaN).toString());
        assertEquals("null", Json.appendDouble(new StringBuilder(), Double.NEGATIVE_INFINITY).toString());
        assertEquals("null", Json.appendFloat(new StringBuilder(), Float.POSITIVE_INFINITY).toString());
        assertEquals("-0.0", Json.repr(-0.0));
        assertEquals("0.10000000149011612", Json.appendFloat(new StringBuilder(), 0.1f).toString());
        assertEquals("1e+16", Json.repr(1e16));
        assertEquals("1e-05", Json.repr(1e-5));
        assertEquals("0.0001", Json.repr(1e-4));
        assertEquals("1000000000000000.0", Json.repr(1e15));
        assertEquals("5e-324", Json.repr(Double.MIN_VALUE));
    }

    @Test
    void stringsAreEscapedAsPythonEscapesThem() {
        assertEquals("\"\\\"\\\\\\n\\r\\t\\b\\f\\u0001\\u001f \u007f é✓\"",
                     Json.quote("\"\\\n\r\t\b\f\u0001\u001f \u007f é✓"));
    }

    @Test
    void u64AndHex() {
        assertEquals("18446744073709551615", Json.appendUnsigned(new StringBuilder(), -1L).toString());
        assertEquals("9223372036854775807",
                     Json.appendUnsigned(new StringBuilder(), Long.MAX_VALUE).toString());
        ArrayBuffer b = new ArrayBuffer(new byte[] {0, 1, (byte) 0xab, (byte) 0xff});
        assertEquals("\"0001abff\"", Json.appendHex(new StringBuilder(), b, 0, 4).toString());
        assertTrue(Json.appendHex(new StringBuilder(), b, 1, 0).toString().equals("\"\""));
    }

    @Test
    void aSignallingNanF32ComesBackQuietAsFromPython() {
        float snan = Float.intBitsToFloat(0x7f800001);
        assertEquals(0x7fc00001, Float.floatToRawIntBits(Ranges.quietNaN(snan)));
        assertEquals(0xffc00001, Float.floatToRawIntBits(Ranges.quietNaN(Float.intBitsToFloat(0xffc00001))));
        assertEquals(0x7f800000, Float.floatToRawIntBits(Ranges.quietNaN(Float.POSITIVE_INFINITY)));
        assertEquals(1.5f, Ranges.quietNaN(1.5f));
    }
}
