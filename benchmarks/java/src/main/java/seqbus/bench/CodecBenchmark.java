package seqbus.bench;

import java.nio.charset.StandardCharsets;
import java.util.concurrent.TimeUnit;
import org.agrona.concurrent.UnsafeBuffer;
import org.openjdk.jmh.annotations.Benchmark;
import org.openjdk.jmh.annotations.BenchmarkMode;
import org.openjdk.jmh.annotations.Mode;
import org.openjdk.jmh.annotations.OutputTimeUnit;
import org.openjdk.jmh.annotations.Scope;
import org.openjdk.jmh.annotations.Setup;
import org.openjdk.jmh.annotations.State;
import seqbus.codec.ArrayBuffer;
import seqbus.examples.exchange.BookSide;
import seqbus.examples.exchange.BookUpdateDecoder;
import seqbus.examples.exchange.BookUpdateEncoder;
import seqbus.examples.exchange.BookUpdateLevelsDecoder;
import seqbus.examples.exchange.BookUpdateLevelsEncoder;
import seqbus.examples.exchange.ExecInst;
import seqbus.examples.exchange.NewOrderDecoder;
import seqbus.examples.exchange.NewOrderEncoder;
import seqbus.examples.exchange.NewOrderLegsDecoder;
import seqbus.examples.exchange.NewOrderLegsEncoder;
import seqbus.examples.exchange.NewOrderLegsFillsDecoder;
import seqbus.examples.exchange.Side;

/**
 * Encode and decode of the SPEC's NewOrder (the Python codec benchmark's message: 2 legs, 3
 * fills, stop_price absent, expire_at set, an account and a memo) and of a BookUpdate of 10
 * levels, with the seqc-generated codecs (seqbus.examples.exchange) and SBE's
 * (sbe.exchange, from src/main/sbe/exchange.xml), both over a heap byte[] with their bounds
 * checks on (SBE's Agrona default). Encode writes every field from Java values into a buffer;
 * decode wraps the bytes and reads every field, iterating the groups, text and bytes copied
 * into a scratch array (no String made on either side).
 */
@State(Scope.Thread)
@BenchmarkMode(Mode.AverageTime)
@OutputTimeUnit(TimeUnit.NANOSECONDS)
public class CodecBenchmark {
    static final byte[] ACCOUNT = "trader-0001".getBytes(StandardCharsets.UTF_8);
    static final byte[] MEMO = "client-tag-77".getBytes(StandardCharsets.UTF_8);
    static final int LEVELS = 10;

    // seqbus
    final ArrayBuffer seqOut = ArrayBuffer.allocate(1024);
    final ArrayBuffer seqOrder = ArrayBuffer.allocate(1024);
    final ArrayBuffer seqBook = ArrayBuffer.allocate(1024);
    int seqOrderLength;
    int seqBookLength;
    final NewOrderEncoder seqOrderEncoder = new NewOrderEncoder();
    final NewOrderDecoder seqOrderDecoder = new NewOrderDecoder();
    final BookUpdateEncoder seqBookEncoder = new BookUpdateEncoder();
    final BookUpdateDecoder seqBookDecoder = new BookUpdateDecoder();

    // SBE
    final UnsafeBuffer sbeOut = new UnsafeBuffer(new byte[1024]);
    final UnsafeBuffer sbeOrder = new UnsafeBuffer(new byte[1024]);
    final UnsafeBuffer sbeBook = new UnsafeBuffer(new byte[1024]);
    final sbe.exchange.MessageHeaderEncoder sbeHeaderEncoder = new sbe.exchange.MessageHeaderEncoder();
    final sbe.exchange.MessageHeaderDecoder sbeHeaderDecoder = new sbe.exchange.MessageHeaderDecoder();
    final sbe.exchange.NewOrderEncoder sbeOrderEncoder = new sbe.exchange.NewOrderEncoder();
    final sbe.exchange.NewOrderDecoder sbeOrderDecoder = new sbe.exchange.NewOrderDecoder();
    final sbe.exchange.BookUpdateEncoder sbeBookEncoder = new sbe.exchange.BookUpdateEncoder();
    final sbe.exchange.BookUpdateDecoder sbeBookDecoder = new sbe.exchange.BookUpdateDecoder();

    final byte[] scratch = new byte[64];

    @Setup
    public void setup() {
        seqOrderLength = encodeOrder(seqOrder);
        seqBookLength = encodeBook(seqBook);
        encodeOrder(sbeOrder);
        encodeBook(sbeBook);
        if (decodeNewOrderSeqbus() != decodeNewOrderSbe()
                || decodeBookUpdateSeqbus() != decodeBookUpdateSbe()) {
            throw new IllegalStateException("the two codecs read different values");
        }
    }

    // ---- NewOrder --------------------------------------------------------------------------

    int encodeOrder(ArrayBuffer buffer) {
        NewOrderEncoder e = seqOrderEncoder.wrapAndApplyHeader(buffer, 0)
            .orderId(1_234_567_890L).clientId(42).symbol("AAPL").side(Side.Buy).quantity(100)
            .inst(ExecInst.POST_ONLY).expireAt(1_700_000_000_000_000_000L);
        e.price().mantissa(18_950).exponent((byte) -2);
        NewOrderLegsEncoder legs = e.legsCount(2);
        legs.next().symbol("MSFT").ratio(1).side(Side.Sell).fillsCount(2)
            .next().qty(10).price(41_500).next().qty(5).price(41_510);
        legs.next().symbol("GOOG").ratio(2).side(Side.Buy).fillsCount(1).next().qty(7).price(17_320);
        e.account(ACCOUNT, 0, ACCOUNT.length).memo(MEMO, 0, MEMO.length);
        return e.encodedLength();
    }

    int encodeOrder(UnsafeBuffer buffer) {
        sbe.exchange.NewOrderEncoder e = sbeOrderEncoder.wrapAndApplyHeader(buffer, 0, sbeHeaderEncoder)
            .orderId(1_234_567_890L).clientId(42).symbol("AAPL").side(sbe.exchange.Side.Buy)
            .quantity(100).stopPrice(sbe.exchange.NewOrderEncoder.stopPriceNullValue())
            .expireAt(1_700_000_000_000_000_000L);
        e.price().mantissa(18_950).exponent((byte) -2);
        e.inst().clear().postOnly(true);
        sbe.exchange.NewOrderEncoder.LegsEncoder legs = e.legsCount(2);
        legs.next().symbol("MSFT").ratio(1).side(sbe.exchange.Side.Sell).fillsCount(2)
            .next().qty(10).price(41_500).next().qty(5).price(41_510);
        legs.next().symbol("GOOG").ratio(2).side(sbe.exchange.Side.Buy).fillsCount(1)
            .next().qty(7).price(17_320);
        e.putAccount(ACCOUNT, 0, ACCOUNT.length).putMemo(MEMO, 0, MEMO.length);
        return sbe.exchange.MessageHeaderEncoder.ENCODED_LENGTH + e.encodedLength();
    }

    @Benchmark
    public int encodeNewOrderSeqbus() {
        return encodeOrder(seqOut);
    }

    @Benchmark
    public int encodeNewOrderSbe() {
        return encodeOrder(sbeOut);
    }

    @Benchmark
    public long decodeNewOrderSeqbus() {
        NewOrderDecoder d = seqOrderDecoder.wrap(seqOrder, 0, seqOrderLength);
        d.getSymbol(scratch, 0, 8);
        long s = d.orderId() + d.clientId() + scratch[0] + d.side().value()
            + d.price().mantissa() + d.price().exponent() + d.quantity()
            + (d.hasStopPrice() ? d.stopPrice() : 0) + d.inst() + (d.hasExpireAt() ? d.expireAt() : 0);
        for (NewOrderLegsDecoder leg : d.legs()) {
            leg.getSymbol(scratch, 0, 8);
            s += scratch[3] + leg.ratio() + leg.side().value();
            for (NewOrderLegsFillsDecoder fill : leg.fills()) {
                s += fill.qty() + fill.price();
            }
        }
        return s + d.getAccount(scratch, 0, scratch.length) + d.getMemo(scratch, 0, scratch.length);
    }

    @Benchmark
    public long decodeNewOrderSbe() {
        sbe.exchange.NewOrderDecoder d = sbeOrderDecoder.wrapAndApplyHeader(sbeOrder, 0, sbeHeaderDecoder);
        long stop = d.stopPrice();
        long expire = d.expireAt();
        d.getSymbol(scratch, 0);
        long s = d.orderId() + d.clientId() + scratch[0] + d.side().value()
            + d.price().mantissa() + d.price().exponent() + d.quantity()
            + (stop != sbe.exchange.NewOrderDecoder.stopPriceNullValue() ? stop : 0) + d.inst().getRaw()
            + (expire != sbe.exchange.NewOrderDecoder.expireAtNullValue() ? expire : 0);
        for (sbe.exchange.NewOrderDecoder.LegsDecoder leg : d.legs()) {
            leg.getSymbol(scratch, 0);
            s += scratch[3] + leg.ratio() + leg.side().value();
            for (sbe.exchange.NewOrderDecoder.LegsDecoder.FillsDecoder fill : leg.fills()) {
                s += fill.qty() + fill.price();
            }
        }
        return s + d.getAccount(scratch, 0, scratch.length) + d.getMemo(scratch, 0, scratch.length);
    }

    // ---- BookUpdate --------------------------------------------------------------------------

    int encodeBook(ArrayBuffer buffer) {
        BookUpdateEncoder e = seqBookEncoder.wrapAndApplyHeader(buffer, 0).symbol("AAPL").at(8);
        BookUpdateLevelsEncoder levels = e.levelsCount(LEVELS);
        for (int i = 0; i < LEVELS; i++) {
            levels.next().side(i % 2 == 0 ? BookSide.Bid : BookSide.Ask).quantity(100 + i).orders(i)
                .price().mantissa(18_950 + i).exponent((byte) -2);
        }
        return e.encodedLength();
    }

    int encodeBook(UnsafeBuffer buffer) {
        sbe.exchange.BookUpdateEncoder e = sbeBookEncoder.wrapAndApplyHeader(buffer, 0, sbeHeaderEncoder)
            .symbol("AAPL").at(8);
        sbe.exchange.BookUpdateEncoder.LevelsEncoder levels = e.levelsCount(LEVELS);
        for (int i = 0; i < LEVELS; i++) {
            levels.next().side(i % 2 == 0 ? sbe.exchange.BookSide.Bid : sbe.exchange.BookSide.Ask)
                .quantity(100 + i).orders(i).price().mantissa(18_950 + i).exponent((byte) -2);
        }
        return sbe.exchange.MessageHeaderEncoder.ENCODED_LENGTH + e.encodedLength();
    }

    @Benchmark
    public int encodeBookUpdateSeqbus() {
        return encodeBook(seqOut);
    }

    @Benchmark
    public int encodeBookUpdateSbe() {
        return encodeBook(sbeOut);
    }

    @Benchmark
    public long decodeBookUpdateSeqbus() {
        BookUpdateDecoder d = seqBookDecoder.wrap(seqBook, 0, seqBookLength);
        d.getSymbol(scratch, 0, 8);
        long s = scratch[0] + d.at();
        for (BookUpdateLevelsDecoder l : d.levels()) {
            s += l.side().value() + l.price().mantissa() + l.price().exponent() + l.quantity() + l.orders();
        }
        return s;
    }

    @Benchmark
    public long decodeBookUpdateSbe() {
        sbe.exchange.BookUpdateDecoder d = sbeBookDecoder.wrapAndApplyHeader(sbeBook, 0, sbeHeaderDecoder);
        d.getSymbol(scratch, 0);
        long s = scratch[0] + d.at();
        for (sbe.exchange.BookUpdateDecoder.LevelsDecoder l : d.levels()) {
            s += l.side().value() + l.price().mantissa() + l.price().exponent() + l.quantity() + l.orders();
        }
        return s;
    }
}
