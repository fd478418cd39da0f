package exchange.marketdata;

import exchange.BookSide;
import exchange.BookUpdateDecoder;
import exchange.BookUpdateEncoder;
import exchange.BookUpdateLevelsDecoder;
import exchange.BookUpdateLevelsEncoder;
import exchange.CancelOrderDecoder;
import exchange.ExchangeNode;
import exchange.NewOrderDecoder;
import exchange.OrderAcceptedDecoder;
import exchange.OrderCancelledDecoder;
import exchange.OrderRejectedDecoder;
import exchange.Side;
import exchange.TradeDecoder;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;
import seqbus.node.Message;
import seqbus.node.Node;
import seqbus.node.Options;
import seqbus.node.Start;
import seqbus.node.Topic;

/**
 * The exchange demo's market-data node in Java: the same deterministic state machine as the
 * Python DemoMarketData (examples/exchange/market_data.py and demo_nodes.py), so it can run as a
 * hot-hot instance of the Python node's account.
 * <ul>
 *   <li>price levels rebuilt from the engine's output, a BookUpdate per symbol for the levels
 *       that changed every 50 ms of stream time (a deterministic timer), the whole book at the
 *       end-of-run marker (a CancelOrder of order 0);
 *   <li>per exchange message type, a count and a BLAKE2b-16 digest of (sequence, sequencer time,
 *       key field) in stream order;
 *   <li>once every BookUpdate it published is back in the stream after the marker, the report
 *       EXCHANGE_REPORT_DIR/ACCOUNT-INSTANCE.json (updates, last_sequence, seen, and the book's
 *       state hash as MarketDataPublisher.state_hash() computes it), and it stops.
 * </ul>
 *
 * <pre>
 * java -Dseqbus.node.library=.../libseqbus_ffi.so -cp ... exchange.marketdata.MarketData \
 *     -c bus.toml --account MD --instance 3 --rewind
 * </pre>
 */
public final class MarketData extends ExchangeNode {
    static final long PUBLISH_NS = 50_000_000L;
    static final byte PRICE_EXPONENT = -2;
    static final long END_MARKER = 0;
    static final String[] SYMBOLS = {"AAPL", "MSFT", "GOOG", "AMZN"};

    /** A price level, ordered as Python sorts its (symbol, side, price) tuples. */
    record Level(String symbol, int side, long price) {}

    static final Comparator<Level> ORDER = Comparator.comparing(Level::symbol)
            .thenComparingInt(Level::side)
            .thenComparingLong(Level::price);

    static final class Entry {
        final String symbol;
        final int side;
        final long price;
        long remaining;

        Entry(String symbol, int side, long price, long remaining) {
            this.symbol = symbol;
            this.side = side;
            this.price = price;
            this.remaining = remaining;
        }
    }

    /** A message type's count and digest. */
    static final class Seen {
        long count;
        final Blake2b digest = new Blake2b(16);
    }

    private final Map<Long, Entry> pending = new HashMap<>();
    private final Map<Long, Entry> resting = new HashMap<>();
    /** level → {quantity, orders} */
    private final TreeMap<Level, long[]> levels = new TreeMap<>(ORDER);
    private final TreeSet<Level> changed = new TreeSet<>(ORDER);
    private final Map<String, Seen> seen = new LinkedHashMap<>();
    private final byte[] record = new byte[24];
    private long published;
    private long ownUpdates;
    private boolean ending;

    /** Every exchange message (the Python node's handlers): the same records, so the same timers. */
    @Override
    protected List<Topic> topics() {
        return TOPICS;
    }

    @Override
    protected void onOpened() {
        setTimerAfter(PUBLISH_NS, this::publish);
    }

    // -- MarketDataPublisher ------------------------------------------------------------------

    @Override
    protected void onNewOrder(NewOrderDecoder v, Message m) {
        int side = (v.side() == Side.Buy ? BookSide.Bid : BookSide.Ask).value();
        pending.put(v.orderId(), new Entry(v.symbol().strip(), side, v.price().mantissa(), v.quantity()));
        saw("exchange.NewOrder", v.orderId());
    }

    @Override
    protected void onOrderRejected(OrderRejectedDecoder v, Message m) {
        pending.remove(v.orderId());
        saw("exchange.OrderRejected", v.orderId());
    }

    @Override
    protected void onOrderAccepted(OrderAcceptedDecoder v, Message m) {
        Entry e = pending.remove(v.orderId());
        if (e != null) {
            resting.put(v.orderId(), e);
            Level key = new Level(e.symbol, e.side, e.price);
            long[] level = levels.computeIfAbsent(key, k -> new long[2]);
            level[0] += e.remaining;
            level[1] += 1;
            changed.add(key);
        }
        saw("exchange.OrderAccepted", v.orderId());
    }

    @Override
    protected void onTrade(TradeDecoder v, Message m) {
        reduce(v.buyOrderId(), v.quantity());
        reduce(v.sellOrderId(), v.quantity());
        saw("exchange.Trade", v.tradeId());
    }

    @Override
    protected void onOrderCancelled(OrderCancelledDecoder v, Message m) {
        reduce(v.orderId(), v.cancelledQuantity());
        saw("exchange.OrderCancelled", v.orderId());
    }

    @Override
    protected void onBookUpdate(BookUpdateDecoder v, Message m) {
        long total = 0;
        for (BookUpdateLevelsDecoder level : v.levels()) {
            total += level.quantity();
        }
        saw("exchange.BookUpdate", total);
        if (m.mine()) {
            ownUpdates++;
            maybeFinish();
        }
    }

    @Override
    protected void onCancelOrder(CancelOrderDecoder v, Message m) {
        saw("exchange.CancelOrder", v.orderId());
        if (v.orderId() == END_MARKER) {
            // the final book, then the report once every update this node published is back
            ending = true;
            publishBook();
            maybeFinish();
        }
    }

    private void reduce(long orderId, long qty) {
        Entry e = resting.get(orderId);
        if (e == null) {
            return;
        }
        Level key = new Level(e.symbol, e.side, e.price);
        long[] level = levels.computeIfAbsent(key, k -> new long[2]);
        level[0] -= qty;
        e.remaining -= qty;
        if (e.remaining <= 0) {
            resting.remove(orderId);
            level[1] -= 1;
        }
        changed.add(key);
    }

    /** Every PUBLISH_NS of stream time: a BookUpdate per symbol for the levels that changed. */
    private void publish() {
        long now = sequencerTime();
        Map<String, List<long[]>> bySymbol = new TreeMap<>();
        for (Level key : changed) {
            long[] level = levels.get(key);
            long qty = level == null ? 0 : level[0];
            long orders = level == null ? 0 : level[1];
            if (orders <= 0 && level != null) {
                levels.remove(key);
            }
            bySymbol.computeIfAbsent(key.symbol(), s -> new ArrayList<>())
                    .add(new long[] {key.side(), key.price(), Math.max(qty, 0), Math.max(orders, 0)});
        }
        changed.clear();
        for (Map.Entry<String, List<long[]>> e : bySymbol.entrySet()) {
            postUpdate(e.getKey(), now, e.getValue());
        }
        setTimer(now + PUBLISH_NS, this::publish);
    }

    /** The whole book now, one BookUpdate per symbol (none for an empty book). */
    private void publishBook() {
        long now = sequencerTime();
        for (String symbol : SYMBOLS) {
            List<long[]> book = new ArrayList<>();
            for (Map.Entry<Level, long[]> e : levels.entrySet()) {
                if (e.getKey().symbol().equals(symbol) && e.getValue()[1] > 0) {
                    book.add(new long[] {e.getKey().side(), e.getKey().price(), e.getValue()[0], e.getValue()[1]});
                }
            }
            postUpdate(symbol, now, book);
        }
    }

    private void postUpdate(String symbol, long at, List<long[]> entries) {
        BookUpdateEncoder encoder = encodeBookUpdate().symbol(symbol).at(at);
        BookUpdateLevelsEncoder group = encoder.levelsCount(entries.size());
        for (long[] e : entries) {
            group.next()
                    .side(BookSide.get((short) e[0]))
                    .quantity(e[2])
                    .orders(e[3])
                    .price()
                    .mantissa(e[1])
                    .exponent(PRICE_EXPONENT);
        }
        post(encoder);
        published++;
    }

    /**
     * MarketDataPublisher.state_hash(): BLAKE2b-16 over the levels in order, each the symbol's
     * bytes and "&lt;BqqI" (side, price, quantity, orders).
     */
    String stateHash() {
        Blake2b h = new Blake2b(16);
        byte[] rec = new byte[21];
        for (Map.Entry<Level, long[]> e : levels.entrySet()) {
            byte[] symbol = e.getKey().symbol().getBytes(StandardCharsets.US_ASCII);
            rec[0] = (byte) e.getKey().side();
            put(rec, 1, e.getKey().price(), 8);
            put(rec, 9, e.getValue()[0], 8);
            put(rec, 17, e.getValue()[1], 4);
            h.update(symbol, 0, symbol.length);
            h.update(rec, 0, rec.length);
        }
        return h.hexdigest();
    }

    // -- DemoMarketData -------------------------------------------------------------------------

    private static void put(byte[] b, int at, long v, int n) {
        for (int i = 0; i < n; i++) {
            b[at + i] = (byte) (v >>> (8 * i));
        }
    }

    /** One message of {@code name} seen: its count and the digest of (sequence, time, key). */
    private void saw(String name, long key) {
        Seen s = seen.computeIfAbsent(name, n -> new Seen());
        s.count++;
        put(record, 0, sequence(), 8);
        put(record, 8, sequencerTime(), 8);
        put(record, 16, key, 8);
        s.digest.update(record, 0, record.length);
    }

    private void maybeFinish() {
        if (!ending || ownUpdates < published) {
            return;
        }
        String dir = System.getenv("EXCHANGE_REPORT_DIR");
        if (dir == null) {
            throw new IllegalStateException("EXCHANGE_REPORT_DIR is not set: where the report goes");
        }
        StringBuilder json = new StringBuilder("{\"updates\": ").append(published)
                .append(", \"last_sequence\": ").append(sequence()).append(", \"seen\": {");
        String sep = "";
        for (Map.Entry<String, Seen> e : seen.entrySet()) {
            json.append(sep).append('"').append(e.getKey()).append("\": {\"count\": ").append(e.getValue().count)
                    .append(", \"digest\": \"").append(e.getValue().digest.clone().hexdigest()).append("\"}");
            sep = ", ";
        }
        json.append("}, \"state_hash\": \"").append(stateHash()).append("\", \"language\": \"java\"}");
        String name = account() + "-" + instance() + ".json";
        try {
            Path tmp = Path.of(dir, "." + name + ".tmp");
            Files.writeString(tmp, json);
            Files.move(tmp, Path.of(dir, name), StandardCopyOption.REPLACE_EXISTING, StandardCopyOption.ATOMIC_MOVE);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot write the report " + name + " in " + dir, e);
        }
        log(INFO, "node " + account() + "/" + instance() + ": report " + name + " written at #" + sequence());
        stop();
    }

    private static void usage(String why) {
        System.err.println("exchange.marketdata.MarketData: " + why + "\nusage: MarketData -c CONFIG --account NAME "
                + "[--instance N] [--rewind | --from SEQ] [--listen HOST:PORT]");
        System.exit(2);
    }

    public static void main(String[] args) {
        Node.logToStderr("exchange-market-data-java", 0);
        String config = null;
        String account = null;
        int instance = 1;
        Start start = Start.live();
        String listen = null;
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            if (i + 1 >= args.length && !a.equals("--rewind")) {
                usage(a + " needs a value");
            }
            switch (a) {
                case "-c", "--config" -> config = args[++i];
                case "--account" -> account = args[++i];
                case "--instance" -> instance = Integer.parseInt(args[++i]);
                case "--rewind" -> start = Start.rewind();
                case "--from" -> start = Start.from(Long.parseLong(args[++i]));
                case "--listen" -> listen = args[++i];
                default -> usage("unknown argument " + a);
            }
        }
        if (config == null || account == null) {
            usage("-c CONFIG and --account NAME are needed");
        }
        MarketData node = new MarketData();
        node.stopOnSignals(Duration.ofSeconds(10));
        node.run(new Options(config, account).instance(instance).start(start).listen(listen));
    }
}
