package seqbus.codec;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CharsetDecoder;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;

/** Strict UTF-8, checked against the JDK's strict decoder and encoder. */
class Utf8Test {
    private static String strict(byte[] bytes) {
        CharsetDecoder d = StandardCharsets.UTF_8.newDecoder()
            .onMalformedInput(CodingErrorAction.REPORT)
            .onUnmappableCharacter(CodingErrorAction.REPORT);
        try {
            return d.decode(ByteBuffer.wrap(bytes)).toString();
        } catch (CharacterCodingException e) {
            return null;
        }
    }

    @Test
    void validityAndTextAgreeWithTheJdkOnRandomBytes() {
        SplittableRandom rnd = new SplittableRandom(31);
        int valid = 0;
        for (int round = 0; round < 50_000; round++) {
            byte[] bytes = new byte[rnd.nextInt(1, 8)];
            for (int i = 0; i < bytes.length; i++) {
                // mostly the bytes that make multi-byte sequences and their edges
                int pick = rnd.nextInt(4);
                bytes[i] = (byte) (pick == 0 ? rnd.nextInt(256) : pick == 1 ? 0x80 + rnd.nextInt(64)
                                   : pick == 2 ? 0xC0 + rnd.nextInt(64) : rnd.nextInt(128));
            }
            ArrayBuffer b = new ArrayBuffer(bytes);
            String jdk = strict(bytes);
            int bad = Utf8.invalidAt(b, 0, bytes.length);
            assertEquals(jdk == null, bad >= 0, () -> java.util.Arrays.toString(bytes));
            if (jdk != null) {
                valid++;
                assertEquals(jdk, Utf8.decode(b, 0, bytes.length, "M", "f", 0));
                assertEquals(jdk, Utf8.append(new StringBuilder(), b, 0, bytes.length, false, "M",
                                              "f", 0).toString());
            } else {
                // everything before the reported byte is valid; the sequence there is not
                assertTrue(strict(java.util.Arrays.copyOf(bytes, bad)) != null);
                DecodeException e = assertThrows(DecodeException.class,
                    () -> Utf8.decode(b, 0, bytes.length, "M", "f", 0));
                assertEquals(bad, e.offset());
            }
        }
        assertTrue(valid > 2_500, valid + " valid");
    }

    @Test
    void encodingAgreesWithTheJdk() {
        String[] texts = {"", "ascii", "é", "✓ ok", "\uD83D\uDE00 emoji", "\u0000\u007f\u0080\u07ff\u0800\uffff"};
        ArrayBuffer b = ArrayBuffer.allocate(64);
        for (String t : texts) {
            byte[] jdk = t.getBytes(StandardCharsets.UTF_8);
            assertEquals(jdk.length, Utf8.encodedLength(t, "f"));
            Utf8.encode(t, b, 3);
            assertArrayEquals(jdk, b.copyOf(3, jdk.length));
        }
    }

    @Test
    void aLoneSurrogateIsRefused() {
        EncodeException e = assertThrows(EncodeException.class,
                                         () -> Utf8.encodedLength("ab\uD800c", "M.f"));
        assertEquals("cannot encode M.f: lone surrogate at index 2 is not text UTF-8 can hold",
                     e.getMessage());
        assertThrows(EncodeException.class, () -> Utf8.encodedLength("\uDC00", "M.f"));
        assertThrows(EncodeException.class, () -> Utf8.encodedLength("x\uD800", "M.f"));
    }
}
