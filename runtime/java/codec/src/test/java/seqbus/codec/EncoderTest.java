package seqbus.codec;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;

import org.junit.jupiter.api.Test;
import seqbus.examples.exchange.BookSide;
import seqbus.examples.exchange.BookUpdateEncoder;
import seqbus.examples.exchange.ExecInst;
import seqbus.examples.exchange.NewOrderDecoder;
import seqbus.examples.exchange.NewOrderEncoder;
import seqbus.examples.exchange.NewOrderLegsEncoder;
import seqbus.examples.exchange.Side;

/** Encoders: the bytes of the vectors from the setters, and clear errors for bad values and misuse. */
class EncoderTest {
    static byte[] vector(String file) {
        for (Vectors.Vector v : Vectors.all()) {
            if (v.file.equals(file)) {
                return v.bytes;
            }
        }
        throw new AssertionError(file);
    }

    /** NewOrder.1 of tests/compiler/vectors.py, written with the setters. */
    static int newOrder(MutableBuffer buffer, int offset) {
        NewOrderEncoder e = new NewOrderEncoder().wrapAndApplyHeader(buffer, offset)
            .orderId(42).clientId(7).symbol("AAPL").side(Side.Buy).quantity(100).stopPrice(-1)
            .inst(ExecInst.POST_ONLY | ExecInst.HIDDEN).expireAt(1_700_000_000);
        e.price().mantissa(18_950).exponent((byte) -2);
        NewOrderLegsEncoder legs = e.legsCount(2);
        legs.next().symbol("MSFT").ratio(1).side(Side.Sell).fillsCount(2)
            .next().qty(5).price(Long.MIN_VALUE).next().qty(4294967295L).price(Long.MAX_VALUE);
        legs.next().symbol("GOOGL").ratio(3).side(Side.Buy);
        e.account("trader-1").memo(new byte[] {0, 1, (byte) 0xfe, (byte) 0xff});
        return e.encodedLength();
    }

    @Test
    void theSettersWriteTheVectorsBytes() {
        ArrayBuffer heap = ArrayBuffer.allocate(512);
        int n = newOrder(heap, 0);
        assertArrayEquals(vector("NewOrder.1.bin"), heap.copyOf(0, n));
        NioBuffer direct = NioBuffer.allocateDirect(512);
        int m = newOrder(direct, 100);
        byte[] bytes = new byte[m];
        direct.getBytes(100, bytes, 0, m);
        assertArrayEquals(vector("NewOrder.1.bin"), bytes);

        // groups and fields not written are written empty; the block is zeroed on wrapping
        ArrayBuffer dirty = ArrayBuffer.allocate(512);
        dirty.setMemory(0, 512, (byte) 0x5A);
        NewOrderEncoder e = new NewOrderEncoder().wrapAndApplyHeader(dirty, 0).side(Side.Sell)
            .inst(0);
        int k = e.encodedLength();
        assertArrayEquals(vector("NewOrder.2.bin"), dirty.copyOf(0, k));
    }

    @Test
    void badValuesAreRefusedNamingTheField() {
        NewOrderEncoder e = new NewOrderEncoder().wrapAndApplyHeader(ArrayBuffer.allocate(512), 0);
        assertEquals("cannot encode NewOrder.symbol: \"ABCDEFGHI\" is longer than 8 characters",
                     assertThrows(EncodeException.class, () -> e.symbol("ABCDEFGHI")).getMessage());
        assertEquals("cannot encode NewOrder.symbol: \"é\" is not ASCII",
                     assertThrows(EncodeException.class, () -> e.symbol("é")).getMessage());
        assertEquals("cannot encode NewOrder.symbol: \"AB \" ends in padding (a space or a NUL), which "
                     + "readers strip", assertThrows(EncodeException.class, () -> e.symbol("AB ")).getMessage());
        assertEquals("cannot encode NewOrder.client_id: -1 is out of range of u32 (0 to 4294967295)",
                     assertThrows(EncodeException.class, () -> e.clientId(-1)).getMessage());
        assertEquals("cannot encode NewOrder.inst: 65536 is out of range of u16 (0 to 65535)",
                     assertThrows(EncodeException.class, () -> e.inst(65536)).getMessage());
        assertThrows(EncodeException.class, () -> e.account("x\uD800"));
    }

    @Test
    void groupsAndVariableLengthFieldsGoInOrderWithTheirCounts() {
        NewOrderEncoder e = new NewOrderEncoder().wrapAndApplyHeader(ArrayBuffer.allocate(512), 0);
        e.account("a");
        assertEquals("cannot encode NewOrder.legs: written after a later group or variable-length field, "
                     + "or twice (each is written once: groups first, then variable-length fields, "
                     + "each in declaration order)",
                     assertThrows(EncodeException.class, () -> e.legsCount(1)).getMessage());
        assertThrows(EncodeException.class, () -> e.account("again"));

        NewOrderEncoder f = new NewOrderEncoder().wrapAndApplyHeader(ArrayBuffer.allocate(512), 0);
        NewOrderLegsEncoder legs = f.legsCount(2);
        legs.next();
        assertEquals("cannot encode NewOrder.legs: 1 of its 2 entries written",
                     assertThrows(EncodeException.class, () -> f.account("a")).getMessage());
        NewOrderEncoder g = new NewOrderEncoder().wrapAndApplyHeader(ArrayBuffer.allocate(512), 0);
        NewOrderLegsEncoder one = g.legsCount(1);
        one.next();
        assertEquals("cannot encode NewOrder.legs: more entries than its count, 1",
                     assertThrows(EncodeException.class, one::next).getMessage());
        assertThrows(EncodeException.class, () -> g.legsCount(-1));
    }

    @Test
    void aBufferTooSmallIsAnEncodeException() {
        // header 8 + block 54 + section header 2 = 64, then legs' header 8 = 72
        NewOrderEncoder e = new NewOrderEncoder().wrapAndApplyHeader(ArrayBuffer.allocate(76), 0);
        assertEquals("cannot encode NewOrder.account: the buffer is too small (76 bytes, 78 needed)",
                     assertThrows(EncodeException.class, () -> e.account("ab")).getMessage());
        NewOrderEncoder f = new NewOrderEncoder().wrapAndApplyHeader(ArrayBuffer.allocate(70), 0);
        assertEquals("cannot encode NewOrder.legs: the buffer is too small (70 bytes, 72 needed)",
                     assertThrows(EncodeException.class, () -> f.legsCount(0)).getMessage());
        assertThrows(EncodeException.class,
                     () -> new BookUpdateEncoder().wrapAndApplyHeader(ArrayBuffer.allocate(20), 0));
        assertThrows(EncodeException.class,
                     () -> new BookUpdateEncoder().wrapAndApplyHeader(ArrayBuffer.allocate(100), 90, 20));
    }

    @Test
    void optionalsCanBeClearedAndStructsSet() {
        ArrayBuffer b = ArrayBuffer.allocate(512);
        NewOrderEncoder e = new NewOrderEncoder().wrapAndApplyHeader(b, 0).side(Side.Buy)
            .stopPrice(5).clearStopPrice();
        e.price().mantissa(-7).exponent((byte) 3);
        int n = e.encodedLength();
        NewOrderDecoder d = new NewOrderDecoder().wrap(b, 0, n);
        assertEquals(false, d.hasStopPrice());
        assertEquals(-7, d.price().mantissa());
        assertEquals(3, d.price().exponent());
        BookUpdateEncoder u = new BookUpdateEncoder().wrapAndApplyHeader(b, 0).symbol("X").at(1);
        u.levelsCount(1).next().side(BookSide.Ask).quantity(5).orders(2).price().mantissa(1);
        assertEquals(8 + 16 + 2 + 8 + 22, u.encodedLength());
    }
}
