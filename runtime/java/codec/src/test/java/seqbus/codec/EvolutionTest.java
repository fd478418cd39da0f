package seqbus.codec;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.ByteArrayOutputStream;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import org.junit.jupiter.api.Test;

/**
 * Schema evolution across three versions of one schema (tests/compiler/evolution, generated
 * by seqc at build time into seqbus.evolution.v1..v3), in both directions, as
 * tests/compiler/test_evolution.py checks the Python codecs: a reader of any version reads a
 * writer of any version, newer fields read as absent or zero, unknown fields, groups, entries'
 * fields and variable-length fields are skipped.
 */
class EvolutionTest {
    /** The richest Order each version can write. */
    static byte[] sample(int version) {
        ArrayBuffer b = ArrayBuffer.allocate(512);
        int n;
        if (version == 1) {
            var e = new seqbus.evolution.v1.OrderEncoder().wrapAndApplyHeader(b, 0).id(1).qty(2);
            e.legsCount(2).next().ratio(3).next().ratio(4);
            n = e.note("n").encodedLength();
        } else if (version == 2) {
            var e = new seqbus.evolution.v2.OrderEncoder().wrapAndApplyHeader(b, 0).id(1).qty(2)
                .price(-5).kind(seqbus.evolution.v2.Kind.Fancy);
            e.legsCount(2).next().ratio(3).side((short) 1).next().ratio(4).side((short) 2);
            e.tagsCount(1).next().tag(7);
            n = e.note("n").extra(new byte[] {'x'}).encodedLength();
        } else {
            var e = new seqbus.evolution.v3.OrderEncoder().wrapAndApplyHeader(b, 0).id(1).qty(2)
                .price(-5).kind(seqbus.evolution.v3.Kind.Fancy).venue("XNAS");
            var legs = e.legsCount(2);
            var fills = legs.next().ratio(3).side((short) 1).weight(0.5).fillsCount(2);
            fills.next().qty(9).note("f1");
            fills.next().qty(8);
            legs.next().ratio(4).side((short) 2).weight(1.5);
            e.tagsCount(1).next().tag(7).label("t");
            n = e.note("n").extra(new byte[] {'x'}).comment("c").encodedLength();
        }
        return b.copyOf(0, n);
    }

    static MessageDecoder read(int version, byte[] data) {
        ArrayBuffer b = new ArrayBuffer(data);
        switch (version) {
            case 1:
                return new seqbus.evolution.v1.OrderDecoder().wrap(b, 0, data.length);
            case 2:
                return new seqbus.evolution.v2.OrderDecoder().wrap(b, 0, data.length);
            default:
                return new seqbus.evolution.v3.OrderDecoder().wrap(b, 0, data.length);
        }
    }

    @ParameterizedTest(name = "writer {0}, reader {1}")
    @CsvSource({"1,1", "1,2", "1,3", "2,1", "2,2", "2,3", "3,1", "3,2", "3,3"})
    void aReaderOfAnyVersionReadsAWriterOfAnyVersion(int writer, int reader) {
        byte[] data = sample(writer);
        MessageDecoder m = read(reader, data);
        assertEquals(writer, m.writerVersion());
        assertEquals(data.length, m.encodedLength());
        String json = m.toJson();
        // what each reader sees (canonical JSON, keys in the reader's declaration order)
        String v1Legs = "\"legs\":[{\"ratio\":3},{\"ratio\":4}]";
        String expected;
        if (reader == 1) {
            expected = "{\"id\":1,\"qty\":2," + v1Legs + ",\"note\":\"n\"}";
        } else if (reader == 2) {
            String legs = writer >= 2 ? "[{\"ratio\":3,\"side\":1},{\"ratio\":4,\"side\":2}]"
                                      : "[{\"ratio\":3,\"side\":0},{\"ratio\":4,\"side\":0}]";
            expected = "{\"id\":1,\"qty\":2,"
                + (writer >= 2 ? "\"price\":-5,\"kind\":\"Fancy\"," : "\"price\":null,\"kind\":\"Plain\",")
                + "\"legs\":" + legs + ",\"tags\":" + (writer >= 2 ? "[{\"tag\":7}]" : "[]")
                + ",\"note\":\"n\",\"extra\":" + (writer >= 2 ? "\"78\"" : "\"\"") + "}";
        } else {
            String legs;
            if (writer == 3) {
                legs = "[{\"ratio\":3,\"side\":1,\"weight\":0.5,\"fills\":[{\"qty\":9,\"note\":\"f1\"},"
                    + "{\"qty\":8,\"note\":\"\"}]},{\"ratio\":4,\"side\":2,\"weight\":1.5,\"fills\":[]}]";
            } else if (writer == 2) {
                legs = "[{\"ratio\":3,\"side\":1,\"weight\":0.0,\"fills\":[]},"
                    + "{\"ratio\":4,\"side\":2,\"weight\":0.0,\"fills\":[]}]";
            } else {
                legs = "[{\"ratio\":3,\"side\":0,\"weight\":0.0,\"fills\":[]},"
                    + "{\"ratio\":4,\"side\":0,\"weight\":0.0,\"fills\":[]}]";
            }
            String tags = writer == 3 ? "[{\"tag\":7,\"label\":\"t\"}]"
                : writer == 2 ? "[{\"tag\":7,\"label\":\"\"}]" : "[]";
            expected = "{\"id\":1,\"qty\":2,"
                + (writer >= 2 ? "\"price\":-5,\"kind\":\"Fancy\"," : "\"price\":null,\"kind\":\"Plain\",")
                + "\"venue\":" + (writer >= 3 ? "\"XNAS\"" : "\"\"") + ",\"legs\":" + legs
                + ",\"tags\":" + tags + ",\"note\":\"n\",\"extra\":" + (writer >= 2 ? "\"78\"" : "\"\"")
                + ",\"comment\":" + (writer >= 3 ? "\"c\"" : "\"\"") + "}";
        }
        assertEquals(expected, json);
        // re-encoding writes the reader's version: the writer's bytes exactly when they match
        ArrayBuffer out = ArrayBuffer.allocate(1024);
        int n = m.reencode(out, 0);
        if (writer == reader) {
            assertArrayEquals(data, out.copyOf(0, n));
        } else {
            assertEquals(json, read(reader, out.copyOf(0, n)).toJson());
        }
    }

    @Test
    void fieldsNewerThanTheWriterReadAsAbsentOrZero() {
        var d = new seqbus.evolution.v3.OrderDecoder();
        byte[] v1 = sample(1);
        d.wrap(new ArrayBuffer(v1), 0, v1.length);
        assertFalse(d.hasPrice());
        assertEquals(seqbus.evolution.v3.Kind.Plain, d.kind());
        assertEquals("", d.venue());
        assertEquals(0, d.venueLength());
        var legs = d.legs();
        assertEquals(0.0, legs.next().weight());
        assertEquals(0, legs.fills().count());
        assertEquals(0, d.tags().count());
        assertEquals(0, d.extraLength());
        assertEquals("", d.comment());
    }

    @Test
    void anOldReaderSkipsUnknownGroupsBeforeItsStrings() {
        byte[] data = sample(3);
        var d = new seqbus.evolution.v1.OrderDecoder().wrap(new ArrayBuffer(data), 0, data.length);
        assertEquals("n", d.note());
        assertEquals(data.length, d.encodedLength());
        ArrayBuffer out = ArrayBuffer.allocate(512);
        int n = d.reencode(out, 0);
        assertNotEquals(data.length, n);  // only what v1 knows survives
    }

    @Test
    void aNewReaderRejectsABlockShorterThanVersionOne() {
        byte[] data = sample(1);
        data[0] = 4;
        DecodeException e = assertThrows(DecodeException.class, () -> read(3, data));
        assertEquals("cannot decode Order.header at offset 0: block length 4 is shorter than 12",
                     e.getMessage());
    }

    static byte[] group(int bl, int ng, int nv, long count) {
        return new byte[] {(byte) bl, (byte) (bl >> 8), (byte) ng, (byte) nv, (byte) count,
                           (byte) (count >> 8), (byte) (count >> 16), (byte) (count >> 24)};
    }

    /** An Order header and v1 block whose tail holds the known legs (empty), then
     *  {@code tail} (unknown groups), then the note. */
    static byte[] orderWithUnknownTail(byte[] tail, int ng) {
        ByteArrayOutputStream o = new ByteArrayOutputStream();
        o.writeBytes(new byte[] {12, 0, 1, 0, 60, 0, 9, 0});
        o.writeBytes(new byte[] {1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0});
        o.writeBytes(new byte[] {(byte) ng, 1});
        o.writeBytes(group(2, 0, 0, 0));
        o.writeBytes(tail);
        o.writeBytes(new byte[] {1, 0, 0, 0, 'n'});
        return o.toByteArray();
    }

    static byte[] concat(byte[]... parts) {
        ByteArrayOutputStream o = new ByteArrayOutputStream();
        for (byte[] p : parts) {
            o.writeBytes(p);
        }
        return o.toByteArray();
    }

    @Test
    void unknownGroupsFromANewerWriterAreSkipped() {
        byte[] unknown = concat(group(3, 1, 1, 2), "abc".getBytes(), group(1, 0, 0, 1), "z".getBytes(),
                                new byte[] {2, 0, 0, 0}, "hi".getBytes(), "def".getBytes(),
                                group(1, 0, 0, 0), new byte[] {0, 0, 0, 0});
        byte[] data = orderWithUnknownTail(unknown, 2);
        var d = new seqbus.evolution.v1.OrderDecoder().wrap(new ArrayBuffer(data), 0, data.length);
        assertEquals("n", d.note());
        assertEquals(9, d.writerVersion());
        assertEquals("{\"id\":1,\"qty\":2,\"legs\":[],\"note\":\"n\"}", d.toJson());
    }

    @Test
    void unknownGroupsNestedTooDeepAreRefused() {
        byte[][] parts = new byte[41][];
        for (int i = 0; i < 40; i++) {
            parts[i] = group(0, 1, 0, 1);
        }
        parts[40] = group(0, 0, 0, 0);
        byte[] data = orderWithUnknownTail(concat(parts), 2);
        DecodeException e = assertThrows(DecodeException.class, () -> read(1, data).toJson());
        assertTrue(e.getMessage().contains("nested too deep"), e.getMessage());
    }

    @Test
    void zeroLengthEntriesCannotExhaustMemory() {
        byte[] data = sample(1);
        System.arraycopy(group(0, 0, 0, 0xFFFFFFFFL), 0, data, 8 + 12 + 2, 8);
        assertThrows(DecodeException.class, () -> read(1, data).toJson());
        byte[] claimed = orderWithUnknownTail(group(0, 0, 0, 100_000), 2);
        DecodeException e = assertThrows(DecodeException.class, () -> read(1, claimed).toJson());
        assertTrue(e.getMessage().contains("100000 zero-length entries"), e.getMessage());
        byte[] fair = orderWithUnknownTail(group(0, 0, 0, 16), 2);
        assertEquals("n", new seqbus.evolution.v1.OrderDecoder()
            .wrap(new ArrayBuffer(fair), 0, fair.length).note());
    }
}
