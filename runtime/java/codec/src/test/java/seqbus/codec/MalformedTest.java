package seqbus.codec;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.SplittableRandom;
import org.junit.jupiter.api.Test;
import seqbus.codec.tool.Packages;
import seqbus.examples.exchange.ExchangeMessages;
import seqbus.examples.exchange.NewOrderDecoder;

/**
 * Malformed buffers: every way of cutting a message short, corrupt counts, lengths, ids and
 * values, and random damage give a DecodeException naming field and offset, never another
 * exception or a read outside the message.
 */
class MalformedTest {
    /** NewOrder.1: 2 legs (2 fills, 0 fills), an account and a memo. */
    static byte[] newOrder() {
        for (Vectors.Vector v : Vectors.all()) {
            if (v.file.equals("NewOrder.1.bin")) {
                return v.bytes.clone();
            }
        }
        throw new AssertionError("no NewOrder.1.bin");
    }

    static DecodeException refused(byte[] data) {
        return assertThrows(DecodeException.class, () -> {
            MessageDecoder m = new ExchangeMessages().decode(new ArrayBuffer(data), 0, data.length);
            m.toJson();
        });
    }

    @Test
    void everyTruncationOfEveryMessageIsRefused() {
        List<byte[]> messages = new ArrayList<>();
        List<String> packages = new ArrayList<>();
        for (Vectors.Vector v : Vectors.all()) {
            messages.add(v.bytes);
            packages.add(v.pkg);
        }
        ArrayBuffer b = ArrayBuffer.allocate(2048);
        messages.add(Arrays.copyOf(b.array(), AllTypesTest.encodeEverything(b, 0)));
        packages.add("alltypes");
        int cuts = 0;
        for (int i = 0; i < messages.size(); i++) {
            byte[] full = messages.get(i);
            PackageDecoder codecs = Packages.of(packages.get(i));
            for (int len = 0; len < full.length; len++) {
                // the whole buffer is there; the message's length says where it ends
                final int n = len;
                // encodedLength() walks every frame of the message
                DecodeException e = assertThrows(DecodeException.class,
                    () -> codecs.decode(new ArrayBuffer(full), 0, n).encodedLength(),
                    packages.get(i) + " cut at " + n);
                assertTrue(e.offset() >= 0 && e.offset() <= n, e.getMessage());
                assertTrue(e.getMessage().contains("runs past the end of the buffer"), e.getMessage());
                // and a buffer that really ends there
                byte[] cut = Arrays.copyOf(full, n);
                assertThrows(DecodeException.class, () -> codecs.decode(new ArrayBuffer(cut), 0, n).toJson());
                cuts++;
            }
        }
        assertTrue(cuts > 1000, cuts + " cuts");
    }

    @Test
    void theHeaderIsChecked() {
        byte[] data = newOrder();
        data[4] = 99;
        assertEquals("cannot decode NewOrder.header at offset 4: schema id 99, expected 7",
                     assertThrows(DecodeException.class,
                                  () -> new NewOrderDecoder().wrap(new ArrayBuffer(data), 0, data.length))
                         .getMessage());
        byte[] other = newOrder();
        other[2] = 99;
        assertEquals("cannot decode exchange.header at offset 2: unknown template id 99",
                     refused(other).getMessage());
        assertEquals("cannot decode NewOrder.header at offset 2: template id 99, expected 1",
                     assertThrows(DecodeException.class,
                                  () -> new NewOrderDecoder().wrap(new ArrayBuffer(other), 0, other.length))
                         .getMessage());
        byte[] shortBlock = newOrder();
        shortBlock[0] = 44;
        assertEquals("cannot decode NewOrder.header at offset 0: block length 44 is shorter than 45",
                     refused(shortBlock).getMessage());
        byte[] longBlock = newOrder();
        longBlock[0] = (byte) 0xFF;
        longBlock[1] = 0x7F;
        assertEquals("cannot decode NewOrder.header at offset 0: block of 32767 bytes runs past the "
                     + "end of the buffer", refused(longBlock).getMessage());
    }

    @Test
    void theWindowMustLieInTheBuffer() {
        byte[] data = newOrder();
        ArrayBuffer b = new ArrayBuffer(data);
        ExchangeMessages codecs = new ExchangeMessages();
        assertEquals("cannot decode exchange at offset -1: offset outside a buffer of " + data.length
                     + " bytes", assertThrows(DecodeException.class,
                                              () -> codecs.decode(b, -1, 10)).getMessage());
        assertThrows(DecodeException.class, () -> codecs.decode(b, 0, data.length + 1));
        assertThrows(DecodeException.class, () -> codecs.decode(b, 5, data.length));
        assertThrows(DecodeException.class, () -> codecs.decode(b, data.length + 1, 0));
        assertThrows(DecodeException.class, () -> codecs.decode(b, 0, -5));
    }

    // NewOrder.1's layout: header 0..8, block 8..62, section header 62..64, then legs at 64
    static final int LEGS = 64;

    @Test
    void corruptCountsAndLengthsAreRefusedWhenReached() {
        byte[] count = newOrder();
        count[LEGS + 7] = 0x7F;  // 2 legs → 2,130,706,434
        DecodeException e = refused(count);
        assertEquals("legs", e.field());
        assertTrue(e.getMessage().contains("runs past the end of the buffer"), e.getMessage());

        byte[] fills = newOrder();
        fills[LEGS + 8 + 11 + 4] = (byte) 0xFF;  // the first leg's fills count
        assertTrue(refused(fills).getMessage().contains("runs past the end of the buffer"));

        byte[] account = newOrder();
        int at = account.length - 4 - 4 - 4 - 8;  // the account's length: "trader-1", then memo
        assertEquals(8, account[at]);
        account[at] = 100;
        assertEquals("cannot decode NewOrder.account at offset " + at + ": variable-length field of "
                     + "100 bytes runs past the end of the buffer", refused(account).getMessage());

        byte[] tooMany = newOrder();
        tooMany[62] = 3;  // three groups: the bytes after legs do not frame a group
        refused(tooMany);
    }

    @Test
    void corruptValuesAreRefusedWhenRead() {
        byte[] presence = newOrder();
        presence[8 + 34] = 2;
        NewOrderDecoder d = new NewOrderDecoder().wrap(new ArrayBuffer(presence), 0, presence.length);
        assertEquals("cannot decode NewOrder.stop_price at offset 42: presence byte is 2, not 0 or 1",
                     assertThrows(DecodeException.class, d::hasStopPrice).getMessage());
        assertEquals(presence.length, d.encodedLength());  // the frame is fine

        byte[] side = newOrder();
        side[8 + 20] = 9;
        assertEquals("cannot decode NewOrder.side at offset 28: 9 is not a value of Side",
                     refused(side).getMessage());

        byte[] symbol = newOrder();
        symbol[8 + 13] = (byte) 0xC3;
        assertEquals("cannot decode NewOrder.symbol at offset 21: char field holds a non-ASCII byte",
                     refused(symbol).getMessage());

        byte[] legSide = newOrder();
        legSide[LEGS + 8 + 10] = 7;
        assertEquals("cannot decode NewOrder.legs.side at offset " + (LEGS + 18)
                     + ": 7 is not a value of Side", refused(legSide).getMessage());

        byte[] account = newOrder();
        int at = account.length - 4 - 4 - 8;  // the account's first byte
        account[at + 2] = (byte) 0xFF;
        assertEquals("cannot decode NewOrder.account at offset " + (at + 2)
                     + ": string is not valid UTF-8", refused(account).getMessage());

        byte[] entry = newOrder();
        entry[LEGS] = 10;  // legs' entries of 10 bytes, shorter than the 11 every writer writes
        DecodeException e = refused(entry);
        assertEquals("legs", e.field());
        assertTrue(e.getMessage().contains("entry block length 10 is shorter than 11")
                   || e.getMessage().contains("runs past"), e.getMessage());
    }

    @Test
    void randomDamageGivesAValueOrADecodeExceptionAndNothingElse() {
        List<byte[]> messages = new ArrayList<>();
        List<String> packages = new ArrayList<>();
        for (Vectors.Vector v : Vectors.all()) {
            messages.add(v.bytes);
            packages.add(v.pkg);
        }
        ArrayBuffer b = ArrayBuffer.allocate(2048);
        messages.add(Arrays.copyOf(b.array(), AllTypesTest.encodeEverything(b, 0)));
        packages.add("alltypes");
        SplittableRandom rnd = new SplittableRandom(31);
        ArrayBuffer out = ArrayBuffer.allocate(1 << 16);
        int decoded = 0;
        int refused = 0;
        long deadline = System.nanoTime() + 30_000_000_000L;
        for (int round = 0; round < 50_000 && System.nanoTime() < deadline; round++) {
            int i = rnd.nextInt(messages.size());
            byte[] data = messages.get(i).clone();
            int changes = rnd.nextInt(1, 5);
            for (int k = 0; k < changes; k++) {
                int pick = rnd.nextInt(3);
                int at = rnd.nextInt(data.length);
                data[at] = (byte) (pick == 0 ? rnd.nextInt(256) : pick == 1 ? data[at] ^ (1 << rnd.nextInt(8))
                                   : rnd.nextBoolean() ? 0 : 0xFF);
            }
            if (rnd.nextInt(4) == 0) {
                data = Arrays.copyOf(data, rnd.nextInt(data.length + 8));  // cut, or zeros added
            }
            PackageDecoder codecs = Packages.of(packages.get(i));
            try {
                MessageDecoder m = codecs.decode(new ArrayBuffer(data), 0, data.length);
                String json = m.toJson();
                int n = m.reencode(out, 0);
                // what re-encoding wrote reads back as the same value
                assertEquals(json, codecs.decode(out, 0, n).toJson());
                decoded++;
            } catch (DecodeException e) {
                assertTrue(e.offset() >= 0 && e.offset() <= data.length, e.getMessage());
                refused++;
            } catch (RuntimeException e) {
                fail("damaged " + packages.get(i) + " message " + VectorsTest.hex(data) + ": " + e, e);
            }
        }
        assertTrue(decoded > 1000 && refused > 1000, decoded + " decoded, " + refused + " refused");
    }
}
