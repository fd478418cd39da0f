package seqbus.codec;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.util.HashSet;
import java.util.Set;
import java.util.stream.Stream;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestFactory;
import seqbus.codec.tool.CodecTool;
import seqbus.codec.tool.Packages;

/**
 * Every shared vector (made by the Python codecs) decodes in Java to its canonical JSON and
 * re-encodes to its bytes, from a heap array and from a direct ByteBuffer at an offset.
 */
class VectorsTest {
    @TestFactory
    Stream<DynamicTest> everyVectorDecodesToItsJsonAndReencodesByteForByte() {
        return Vectors.all().stream().map(v -> DynamicTest.dynamicTest(v.toString(), () -> {
            PackageDecoder codecs = Packages.of(v.pkg);
            MessageDecoder m = codecs.decode(new ArrayBuffer(v.bytes), 0, v.bytes.length);
            assertEquals(v.message, m.messageName());
            assertEquals(v.bytes.length, m.encodedLength());
            assertEquals(v.json, m.toJson());
            ArrayBuffer out = ArrayBuffer.allocate(v.bytes.length + 64);
            int n = m.reencode(out, 0);
            assertArrayEquals(v.bytes, out.copyOf(0, n));

            // the same from a direct ByteBuffer, the message 13 bytes in, garbage around it
            ByteBuffer direct = ByteBuffer.allocateDirect(v.bytes.length + 40);
            for (int i = 0; i < direct.capacity(); i++) {
                direct.put(i, (byte) 0xA5);
            }
            direct.put(13, v.bytes);
            NioBuffer nio = new NioBuffer(direct);
            MessageDecoder d = codecs.decode(nio, 13, v.bytes.length);
            assertEquals(v.json, d.toJson());
            NioBuffer target = NioBuffer.allocateDirect(v.bytes.length + 64);
            int k = d.reencode(target, 7);
            byte[] again = new byte[k];
            target.getBytes(7, again, 0, k);
            assertArrayEquals(v.bytes, again);
        }));
    }

    @Test
    void theCodecToolAnswersEachVectorWithItsNameJsonAndBytes() {
        for (Vectors.Vector v : Vectors.all()) {
            CodecTool tool = new CodecTool(Packages.of(v.pkg));
            String hex = hex(v.bytes);
            assertEquals("{\"name\":\"" + v.message + "\",\"json\":" + v.json + ",\"hex\":\"" + hex
                         + "\"}", tool.answer(hex), v.toString());
        }
    }

    @Test
    void theVectorsOfEveryPackageAreRead() {
        Set<String> seen = new HashSet<>();
        for (Vectors.Vector v : Vectors.all()) {
            assertNotNull(Packages.of(v.pkg), "no Java codecs for " + v);
            seen.add(v.pkg);
        }
        assertTrue(seen.containsAll(Set.of("bus", "exchange", "pingpong")), seen.toString());
    }

    static String hex(byte[] bytes) {
        StringBuilder sb = new StringBuilder();
        for (byte b : bytes) {
            sb.append(String.format("%02x", b & 0xFF));
        }
        return sb.toString();
    }
}
