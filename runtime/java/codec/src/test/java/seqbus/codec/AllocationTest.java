package seqbus.codec;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.management.ManagementFactory;
import org.junit.jupiter.api.Test;
import seqbus.examples.exchange.BookUpdateDecoder;
import seqbus.examples.exchange.BookUpdateEncoder;
import seqbus.examples.exchange.BookUpdateLevelsDecoder;
import seqbus.examples.exchange.BookSide;
import seqbus.examples.exchange.NewOrderDecoder;
import seqbus.examples.exchange.NewOrderLegsDecoder;
import seqbus.examples.exchange.NewOrderLegsFillsDecoder;

/**
 * Reading allocates nothing: wrapping, every fixed field, groups iterated, variable-length
 * fields copied into the caller's arrays; encoding neither. Measured with the thread's
 * allocation counter (HotSpot's com.sun.management.ThreadMXBean).
 */
class AllocationTest {
    private static long allocated() {
        return ((com.sun.management.ThreadMXBean) ManagementFactory.getThreadMXBean())
            .getThreadAllocatedBytes(Thread.currentThread().getId());
    }

    private long sink;

    private void readNewOrder(NewOrderDecoder d, ArrayBuffer b, int n, byte[] scratch) {
        d.wrap(b, 0, n);
        long s = d.orderId() + d.clientId() + d.symbolLength() + d.side().value() + d.price().mantissa()
            + d.price().exponent() + d.quantity() + (d.hasStopPrice() ? d.stopPrice() : 0) + d.inst()
            + (d.hasExpireAt() ? d.expireAt() : 0);
        d.getSymbol(scratch, 0, 8);
        for (NewOrderLegsDecoder leg : d.legs()) {
            s += leg.ratio() + leg.side().value() + leg.getSymbol(scratch, 0, 8);
            for (NewOrderLegsFillsDecoder fill : leg.fills()) {
                s += fill.qty() + fill.price();
            }
        }
        s += d.getAccount(scratch, 0, scratch.length) + d.getMemo(scratch, 0, scratch.length);
        sink += s;
    }

    @Test
    void readingAndWritingAllocateNothing() {
        ArrayBuffer b = ArrayBuffer.allocate(512);
        int n = EncoderTest.newOrder(b, 0);
        NewOrderDecoder d = new NewOrderDecoder();
        byte[] scratch = new byte[64];
        ArrayBuffer u = ArrayBuffer.allocate(256);
        BookUpdateEncoder e = new BookUpdateEncoder();
        BookUpdateDecoder bd = new BookUpdateDecoder();
        for (int warm = 0; warm < 20_000; warm++) {
            readNewOrder(d, b, n, scratch);
            writeAndReadBook(e, bd, u);
        }
        long before = allocated();
        for (int i = 0; i < 100_000; i++) {
            readNewOrder(d, b, n, scratch);
            writeAndReadBook(e, bd, u);
        }
        long bytes = allocated() - before;
        // allocated() itself may take a few bytes; 100,000 rounds of anything would take megabytes
        assertTrue(bytes < 4096, bytes + " bytes allocated in 100,000 rounds");
        assertEquals(true, sink != 0);
    }

    private void writeAndReadBook(BookUpdateEncoder e, BookUpdateDecoder d, ArrayBuffer u) {
        e.wrapAndApplyHeader(u, 0).symbol("AAPL").at(8);
        var levels = e.levelsCount(2);
        levels.next().side(BookSide.Bid).quantity(60).orders(1).price().mantissa(18_950).exponent((byte) -2);
        levels.next().side(BookSide.Ask).quantity(0).orders(0).price().mantissa(18_951).exponent((byte) -2);
        int n = e.encodedLength();
        d.wrap(u, 0, n);
        long s = d.at() + d.symbolLength();
        for (BookUpdateLevelsDecoder l : d.levels()) {
            s += l.side().value() + l.price().mantissa() + l.quantity() + l.orders();
        }
        sink += s;
    }
}
