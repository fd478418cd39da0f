package seqbus.node;

import static org.junit.jupiter.api.Assertions.assertArrayEquals;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertSame;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import org.junit.jupiter.api.Test;
import seqbus.bus.ClockTickEncoder;
import seqbus.codec.ArrayBuffer;
import seqbus.codec.NioBuffer;
import seqbus.examples.exchange.BookSide;
import seqbus.examples.exchange.BookUpdateDecoder;
import seqbus.examples.exchange.BookUpdateEncoder;
import seqbus.examples.exchange.BookUpdateLevelsDecoder;
import seqbus.examples.exchange.CancelOrderDecoder;
import seqbus.examples.exchange.CancelOrderEncoder;
import seqbus.examples.exchange.ExchangeNode;
import seqbus.examples.exchange.NewOrderDecoder;
import seqbus.examples.exchange.NewOrderEncoder;
import seqbus.examples.exchange.NewOrderLegsEncoder;
import seqbus.examples.exchange.OrderAcceptedDecoder;
import seqbus.examples.exchange.OrderAcceptedEncoder;
import seqbus.examples.exchange.OrderCancelledDecoder;
import seqbus.examples.exchange.OrderCancelledEncoder;
import seqbus.examples.exchange.OrderRejectedDecoder;
import seqbus.examples.exchange.OrderRejectedEncoder;
import seqbus.examples.exchange.Side;
import seqbus.examples.exchange.TradeDecoder;
import seqbus.examples.exchange.TradeEncoder;
import seqbus.examples.pingpong.PingEncoder;

/**
 * The node base seqc generates (generated/java-node: {@code ExchangeNode}): each message of its
 * schema reaches the handler of its template and no other, with the decoder over the message's
 * bytes and the record it came in; unknown templates and other schemas' messages reach
 * {@code onMessage} and no typed handler; typed send and post hand the node library exactly the
 * bytes the codec's encoder writes, and refuse an encoder that is not the one in the send buffer.
 * The last test runs it on a real bus (a seqbus-sequencer process, killed by PID).
 */
class TypedNodeTest {
    /** Records each handler's call as "handler key" and each onMessage as "onMessage schema/template". */
    static class Recorder extends ExchangeNode {
        final List<String> calls = new ArrayList<>();
        final List<Message> records = new ArrayList<>();

        private void saw(String handler, long key, Message record) {
            calls.add(handler + " " + key);
            records.add(record);
        }

        @Override
        protected void onNewOrder(NewOrderDecoder m, Message r) {
            saw("onNewOrder", m.orderId(), r);
        }

        @Override
        protected void onOrderAccepted(OrderAcceptedDecoder m, Message r) {
            saw("onOrderAccepted", m.orderId(), r);
        }

        @Override
        protected void onOrderRejected(OrderRejectedDecoder m, Message r) {
            saw("onOrderRejected", m.orderId(), r);
        }

        @Override
        protected void onCancelOrder(CancelOrderDecoder m, Message r) {
            saw("onCancelOrder", m.orderId(), r);
        }

        @Override
        protected void onOrderCancelled(OrderCancelledDecoder m, Message r) {
            saw("onOrderCancelled", m.orderId(), r);
        }

        @Override
        protected void onTrade(TradeDecoder m, Message r) {
            saw("onTrade", m.tradeId(), r);
        }

        @Override
        protected void onBookUpdate(BookUpdateDecoder m, Message r) {
            long total = 0;
            for (BookUpdateLevelsDecoder level : m.levels()) {
                total += level.quantity();
            }
            saw("onBookUpdate", total, r);
        }

        @Override
        protected void onMessage(Message m) {
            calls.add("onMessage " + m.schemaId() + "/" + m.templateId());
            records.add(m);
        }
    }

    /** What the loop does with a message (Node.deliver: package-private, not inherited here). */
    static void deliver(Node node, Message m) {
        node.deliver(m);
    }

    /** A message as the node hands it: {@code bytes} at offset {@code at} of a direct batch. */
    static Message message(byte[] bytes, int at, long sequence) {
        ByteBuffer batch = ByteBuffer.allocateDirect(at + bytes.length + 7);
        batch.put(at, bytes);
        Message m = new Message();
        m.buffer = new NioBuffer(batch);
        m.offset = at;
        m.length = bytes.length;
        m.sequence = sequence;
        for (int i = 7; i >= 0; i--) {
            m.header = m.header << 8 | (bytes[i] & 0xFF);
        }
        return m;
    }

    /** A NewOrder with every kind of field: optional, struct, nested groups, var data. */
    static void newOrder(NewOrderEncoder e, long orderId) {
        e.orderId(orderId).clientId(7).symbol("AAPL").side(Side.Sell).quantity(300).stopPrice(-5).price()
                .mantissa(15_025).exponent((byte) -2);
        NewOrderLegsEncoder legs = e.legsCount(2);
        legs.next().symbol("MSFT").ratio(3).side(Side.Buy).fillsCount(1).next().qty(10).price(99);
        legs.next().symbol("GOOG").ratio(1).side(Side.Sell).fillsCount(0);
        e.account("ACME-1").memo(new byte[] {1, 2, 3});
    }

    static byte[] bytes(ArrayBuffer b, int length) {
        return b.copyOf(0, length);
    }

    /** One message of each of the schema's seven templates, each with its own key. */
    static List<byte[]> oneOfEach() {
        List<byte[]> out = new ArrayList<>();
        ArrayBuffer b = new ArrayBuffer(new byte[4096]);
        NewOrderEncoder no = new NewOrderEncoder();
        no.wrapAndApplyHeader(b, 0).orderId(101).symbol("AAPL").side(Side.Buy).quantity(5);
        out.add(bytes(b, no.encodedLength()));
        OrderAcceptedEncoder oa = new OrderAcceptedEncoder();
        oa.wrapAndApplyHeader(b, 0).orderId(102);
        out.add(bytes(b, oa.encodedLength()));
        OrderRejectedEncoder or = new OrderRejectedEncoder();
        or.wrapAndApplyHeader(b, 0).orderId(103);
        out.add(bytes(b, or.encodedLength()));
        CancelOrderEncoder co = new CancelOrderEncoder();
        co.wrapAndApplyHeader(b, 0).orderId(104);
        out.add(bytes(b, co.encodedLength()));
        OrderCancelledEncoder oc = new OrderCancelledEncoder();
        oc.wrapAndApplyHeader(b, 0).orderId(105);
        out.add(bytes(b, oc.encodedLength()));
        TradeEncoder tr = new TradeEncoder();
        tr.wrapAndApplyHeader(b, 0).tradeId(106);
        out.add(bytes(b, tr.encodedLength()));
        BookUpdateEncoder bu = new BookUpdateEncoder();
        bu.wrapAndApplyHeader(b, 0).symbol("AAPL").at(1);
        bu.levelsCount(2).next().side(BookSide.Bid).quantity(100).orders(1).next().side(BookSide.Ask).quantity(7)
                .orders(2);
        out.add(bytes(b, bu.encodedLength()));
        return out;
    }

    @Test
    void eachMessageReachesItsOwnHandlerOnly() {
        String[] handlers = {"onNewOrder 101", "onOrderAccepted 102", "onOrderRejected 103", "onCancelOrder 104",
            "onOrderCancelled 105", "onTrade 106", "onBookUpdate 107"};
        List<byte[]> messages = oneOfEach();
        for (int i = 0; i < messages.size(); i++) {
            Recorder node = new Recorder();
            Message m = message(messages.get(i), 13 + i, 1000 + i);
            deliver(node, m);
            assertEquals(List.of(handlers[i]), node.calls, "template " + (i + 1));
            assertSame(m, node.records.get(0), "the handler is handed the record the message came in");
        }
        // one node, all of them in turn: the decoders it reuses are re-pointed every time
        Recorder node = new Recorder();
        for (int round = 0; round < 2; round++) {
            for (int i = 0; i < messages.size(); i++) {
                deliver(node, message(messages.get(i), 3, i));
            }
        }
        List<String> twice = new ArrayList<>(List.of(handlers));
        twice.addAll(List.of(handlers));
        assertEquals(twice, node.calls);
    }

    @Test
    void unknownTemplatesAndOtherSchemasGoToOnMessage() {
        Recorder node = new Recorder();
        // an exchange header with a template this code does not know
        byte[] unknown = oneOfEach().get(0).clone();
        unknown[2] = 99;
        deliver(node, message(unknown, 0, 1));
        // the bus's own schema (a ClockTick) and another application schema (a Ping)
        ArrayBuffer b = new ArrayBuffer(new byte[256]);
        ClockTickEncoder tick = new ClockTickEncoder();
        tick.wrapAndApplyHeader(b, 0);
        deliver(node, message(bytes(b, tick.encodedLength()), 0, 2));
        PingEncoder ping = new PingEncoder();
        ping.wrapAndApplyHeader(b, 0);
        deliver(node, message(bytes(b, ping.encodedLength()), 0, 3));
        // a message of another schema whose template id is NewOrder's: still not a NewOrder
        byte[] foreign = oneOfEach().get(0).clone();
        foreign[4] = 9;
        deliver(node, message(foreign, 0, 4));
        assertEquals(List.of("onMessage 7/99", "onMessage " + seqbus.bus.BusMessages.SCHEMA_ID + "/1", "onMessage 2/1",
                "onMessage 9/1"), node.calls);
        assertEquals(ExchangeNode.SCHEMA_ID, 7);
        assertEquals(7, ExchangeNode.TOPICS.size());
        assertEquals(new Topic(7, 7), ExchangeNode.TOPICS.get(6));
    }

    @Test
    void aMessageThatDoesNotDecodeIsAnErrorOfItsHandlerNotAnotherHandlersCall() {
        Recorder node = new Recorder();
        byte[] cut = oneOfEach().get(6);  // a BookUpdate without its last level
        byte[] shorter = java.util.Arrays.copyOf(cut, cut.length - 5);
        assertThrows(seqbus.codec.DecodeException.class, () -> deliver(node, message(shorter, 0, 1)));
        assertEquals(List.of(), node.calls);
    }

    /** Captures what the node would hand the node library. */
    static final class Capture extends ExchangeNode {
        final List<String> how = new ArrayList<>();
        final List<byte[]> sent = new ArrayList<>();

        Capture(int capacity) {
            super(capacity);
        }

        private void take(String what, ByteBuffer direct, int offset, int length) {
            assertTrue(direct.isDirect(), "the node library reads a direct buffer in place");
            byte[] b = new byte[length];
            direct.get(offset, b);
            how.add(what);
            sent.add(b);
        }

        @Override
        public long send(ByteBuffer direct, int offset, int length) {
            take("send", direct, offset, length);
            return sent.size();
        }

        @Override
        public void post(ByteBuffer direct, int offset, int length) {
            take("post", direct, offset, length);
        }
    }

    @Test
    void typedSendAndPostHandOverExactlyTheCodecsBytes() {
        ArrayBuffer ref = new ArrayBuffer(new byte[4096]);
        NewOrderEncoder expected = new NewOrderEncoder();
        newOrder(expected.wrapAndApplyHeader(ref, 0), 42);
        byte[] newOrderBytes = bytes(ref, expected.encodedLength());
        BookUpdateEncoder bu = new BookUpdateEncoder();
        bu.wrapAndApplyHeader(ref, 0).symbol("MSFT").at(5);
        bu.levelsCount(1).next().side(BookSide.Ask).quantity(9).orders(3).price().mantissa(1).exponent((byte) -2);
        byte[] bookBytes = bytes(ref, bu.encodedLength());

        Capture node = new Capture(4096);
        // a long message first, then a shorter one: what follows it in the buffer is not sent
        NewOrderEncoder e = node.encodeNewOrder();
        newOrder(e, 42);
        assertEquals(1L, node.send(e));
        BookUpdateEncoder b = node.encodeBookUpdate();
        b.symbol("MSFT").at(5);
        b.levelsCount(1).next().side(BookSide.Ask).quantity(9).orders(3).price().mantissa(1).exponent((byte) -2);
        node.post(b);
        node.send(node.encodeCancelOrder().orderId(8));
        assertEquals(List.of("send", "post", "send"), node.how);
        assertArrayEquals(newOrderBytes, node.sent.get(0));
        assertArrayEquals(bookBytes, node.sent.get(1));
        CancelOrderEncoder c = new CancelOrderEncoder();
        c.wrapAndApplyHeader(ref, 0).orderId(8);
        assertArrayEquals(bytes(ref, c.encodedLength()), node.sent.get(2));

        // the same message sent twice is the same bytes twice
        node.send(node.encodeCancelOrder().orderId(8));
        assertArrayEquals(node.sent.get(2), node.sent.get(3));
    }

    @Test
    void typedSendRefusesAnEncoderNotInTheSendBuffer() {
        Capture node = new Capture(1024);
        NewOrderEncoder mine = node.encodeNewOrder().orderId(1);
        node.encodeCancelOrder().orderId(2);  // the buffer holds a CancelOrder now
        IllegalStateException late = assertThrows(IllegalStateException.class, () -> node.send(mine));
        assertTrue(late.getMessage().contains("another message was started after it"), late.getMessage());
        NewOrderEncoder foreign = new NewOrderEncoder();
        foreign.wrapAndApplyHeader(new ArrayBuffer(new byte[256]), 0);
        IllegalArgumentException other = assertThrows(IllegalArgumentException.class, () -> node.post(foreign));
        assertTrue(other.getMessage().contains("encodeNewOrder()"), other.getMessage());
        assertEquals(List.of(), node.sent);
        assertThrows(IllegalArgumentException.class, () -> new Capture(4));
    }

    /** On a real bus: typed sends come back to their handlers as the codec's bytes; a Probe's
     * messages (schema 9) reach onMessage. */
    @Test
    void onABusTypedSendsComeBackToTheirHandlers() throws Exception {
        final class Trader extends Recorder {
            final List<byte[]> mine = new ArrayList<>();

            @Override
            protected void onOpened() {
                NewOrderEncoder order = encodeNewOrder();
                newOrder(order, 42);
                post(order);
                for (int i = 1; i <= 3; i++) {
                    post(encodeCancelOrder().orderId(i));
                }
            }

            @Override
            protected void onNewOrder(NewOrderDecoder m, Message r) {
                super.onNewOrder(m, r);
                if (r.mine()) {
                    mine.add(r.toByteArray());
                }
            }
        }
        ArrayBuffer ref = new ArrayBuffer(new byte[4096]);
        NewOrderEncoder expected = new NewOrderEncoder();
        newOrder(expected.wrapAndApplyHeader(ref, 0), 42);
        byte[] newOrderBytes = bytes(ref, expected.encodedLength());
        try (Bus bus = new Bus("");
                Trader trader = new Trader();
                Probe other = new Probe(1, 2)) {
            trader.open(bus.options("TRADER", 1, Start.rewind(), 0));
            other.open(bus.options("OTHER", 1, Start.rewind(), 1));
            assertTrue(NodeOnABusTest.pollUntil(List.of(trader, other), Duration.ofSeconds(30),
                    () -> trader.calls.size() == 6), () -> "the trader saw " + trader.calls);
            assertEquals(1, trader.mine.size());
            assertArrayEquals(newOrderBytes, trader.mine.get(0));
            List<String> typed = trader.calls.stream().filter(c -> !c.startsWith("onMessage")).toList();
            assertEquals(List.of("onNewOrder 42", "onCancelOrder 1", "onCancelOrder 2", "onCancelOrder 3"), typed);
            assertEquals(2, trader.calls.stream().filter(c -> c.equals("onMessage 9/1")).count());
        }
    }
}
