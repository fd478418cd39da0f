package seqbus.codec;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.BufferedReader;
import java.io.IOException;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.NoSuchElementException;
import org.junit.jupiter.api.Test;
import seqbus.alltypes.AlltypesMessages;
import seqbus.alltypes.Color;
import seqbus.alltypes.EverythingDecoder;
import seqbus.alltypes.EverythingEncoder;
import seqbus.alltypes.EverythingItemsDecoder;
import seqbus.alltypes.EverythingItemsEncoder;
import seqbus.alltypes.EverythingItemsSubDecoder;
import seqbus.alltypes.Perm;
import seqbus.codec.tool.CodecTool;

/**
 * Every kind of field (the compiler's all-types schema): the messages and damaged messages of
 * alltypes-vectors.txt get in Java the answer the Python codecs give (the same JSON and
 * re-encoded bytes, or an error where Python refuses), and the encoder API writes each kind.
 */
class AllTypesTest {
    static List<String[]> fixture() throws IOException {
        List<String[]> out = new ArrayList<>();
        try (InputStream in = AllTypesTest.class.getResourceAsStream("alltypes-vectors.txt");
             BufferedReader r = new BufferedReader(new InputStreamReader(in, StandardCharsets.UTF_8))) {
            for (String line = r.readLine(); line != null; line = r.readLine()) {
                out.add(line.split("\t", 2));
            }
        }
        assertTrue(out.size() > 400, "alltypes-vectors.txt holds " + out.size() + " messages");
        return out;
    }

    @Test
    void javaAnswersEveryMessageAsPythonDoes() throws IOException {
        CodecTool tool = new CodecTool(new AlltypesMessages());
        int decoded = 0;
        int refused = 0;
        for (String[] line : fixture()) {
            String answer = tool.answer(line[0]);
            if (line[1].equals("error")) {
                assertTrue(answer.startsWith("{\"error\":\"cannot decode "),
                           "Python refuses " + line[0] + ", Java answered " + answer);
                refused++;
            } else {
                assertEquals(line[1], answer, line[0]);
                decoded++;
            }
        }
        assertTrue(decoded > 100 && refused > 100, decoded + " decoded, " + refused + " refused");
    }

    /** The value of the Rust codecs' every-kind test (rust/crates/codecs/tests/alltypes.rs). */
    static int encodeEverything(MutableBuffer buffer, int offset) {
        EverythingEncoder e = new EverythingEncoder().wrapAndApplyHeader(buffer, offset);
        e.b(true).u8v((short) 255).u16v(65535).u32v(4294967295L).u64v(-1L)
            .i8v(Byte.MIN_VALUE).i16v(Short.MIN_VALUE).i32v(Integer.MIN_VALUE).i64v(Long.MIN_VALUE)
            .f32v(3.5f).f64v(-0.25).name("ABCDEF").raw(new byte[] {0, 1, (byte) 0xfe, (byte) 0xff})
            .color(Color.Blue).perm(Perm.READ | Perm.EXEC);
        e.outer().tag("XYZ").raw(new byte[] {(byte) 0xab, (byte) 0xcd}).ok(true)
            .inner().a((short) 255).b(-1.5f);
        e.oU64(7).oColor(Color.Red).oChar("hi");
        e.oOuter().tag("Q").raw(new byte[] {1, 2}).ok(true).inner().a((short) 255).b(-1.5f);
        EverythingItemsEncoder items = e.itemsCount(2);
        items.next().id(1).note((short) -3);
        items.subCount(2).next().v(-1).blob(new byte[300]).next().v(2).blob(new byte[0]);
        items.label("é ✓");
        items.next().id(2);
        e.emptyCount(2).next().next();  // groups first, then variable-length fields
        e.text("text").data(new byte[] {1, 2, 3});
        return e.encodedLength();
    }

    @Test
    void theEncoderWritesEveryKindOfField() {
        ArrayBuffer buffer = ArrayBuffer.allocate(2048);
        int n = encodeEverything(buffer, 0);
        EverythingDecoder d = new EverythingDecoder().wrap(buffer, 0, n);
        assertEquals(n, d.encodedLength());
        assertTrue(d.b());
        assertEquals(255, d.u8v());
        assertEquals(65535, d.u16v());
        assertEquals(4294967295L, d.u32v());
        assertEquals(-1L, d.u64v());
        assertEquals(Byte.MIN_VALUE, d.i8v());
        assertEquals(Long.MIN_VALUE, d.i64v());
        assertEquals(3.5f, d.f32v());
        assertEquals("ABCDEF", d.name());
        assertArrayEquals(new byte[] {0, 1, (byte) 0xfe, (byte) 0xff}, d.raw());
        assertEquals(Color.Blue, d.color());
        assertEquals(300, d.colorRaw());
        assertEquals(Perm.READ | Perm.EXEC, d.perm());
        assertEquals(2147483649L, d.perm());
        assertEquals("XYZ", d.outer().tag());
        assertEquals(-1.5f, d.outer().inner().b());
        assertTrue(d.hasOU64());
        assertEquals(7, d.oU64());
        assertEquals(Color.Red, d.oColor());
        assertFalse(d.hasOF64());
        assertThrows(NoSuchElementException.class, d::oF64);
        assertEquals("Q", d.oOuter().tag());
        assertEquals("hi", d.oChar());
        EverythingItemsDecoder items = d.items();
        assertEquals(2, items.count());
        EverythingItemsDecoder first = items.next();
        assertEquals(1, first.id());
        assertEquals("é ✓", first.label());
        assertEquals(-3, first.note());
        EverythingItemsSubDecoder sub = first.sub();
        assertEquals(300, sub.next().blobLength());
        assertEquals(0, sub.next().blobLength());
        assertFalse(sub.hasNext());
        assertEquals(2, items.next().id());
        assertFalse(items.hasNext());
        assertEquals("text", d.text());
        assertArrayEquals(new byte[] {1, 2, 3}, d.data());
        assertEquals(2, d.empty().count());
        String json = d.toJson();
        assertTrue(json.startsWith("{\"b\":true,\"u8v\":255,\"u16v\":65535,\"u32v\":4294967295,"
                                   + "\"u64v\":18446744073709551615,\"i8v\":-128,"), json);
        assertTrue(json.contains("\"f32v\":3.5,\"f64v\":-0.25,\"name\":\"ABCDEF\",\"raw\":\"0001feff\","
                                 + "\"color\":\"Blue\",\"perm\":2147483649,\"outer\":{\"inner\":{\"a\":255,"
                                 + "\"b\":-1.5},\"tag\":\"XYZ\",\"raw\":\"abcd\",\"ok\":true},\"o_u64\":7,"
                                 + "\"o_color\":\"Red\""), json);
        assertTrue(json.endsWith("\"note\":null}],\"text\":\"text\",\"data\":\"010203\","
                                 + "\"empty\":[{},{}]}"), json);
        ArrayBuffer again = ArrayBuffer.allocate(2048);
        assertEquals(n, d.reencode(again, 0));
        assertArrayEquals(buffer.copyOf(0, n), again.copyOf(0, n));
    }
}
