package seqbus.node;

import java.nio.ByteBuffer;
import java.time.Duration;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.PriorityQueue;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import seqbus.codec.NioBuffer;

/**
 * The base class of Java application nodes, over the Rust node client (JNI, the node library).
 *
 * <p>A node is a deterministic state machine over the sequenced stream, as in Python
 * ({@code runtime/seqbus/node.py}): handlers run one at a time in stream order; inside one,
 * {@link #sequencerTime()} and {@link #sequence()} are those of the message being handled, so a
 * replay, a late joiner and every hot-hot instance of an account compute what the live run
 * computed; deterministic timers ({@link #setTimer}) fire between the same two messages
 * everywhere; {@link #post} keeps a node's commands in order under back-pressure, so hot-hot
 * instances send the same commands and the sequencer keeps the first copy. The protocol and the
 * walk over each batch with the node's clock run in Rust, the code Python's nodes run.
 *
 * <pre>{@code
 * class Printer extends Node {
 *     protected void onMessage(Message m) { ... m.buffer(), m.offset(), m.length() ... }
 * }
 * new Printer().run(new Options("bus.toml", "PRINTER").start(Start.rewind()));
 * }</pre>
 *
 * <p>Usually a node extends the typed base seqc generates for its schema
 * ({@code seqc generate --lang java --lang java-node}: {@code ExchangeNode} for package
 * {@code exchange}), which hands each message of the schema to its handler
 * ({@code onNewOrder(NewOrderDecoder, Message)}) as a decoder reading it in place, and sends
 * typed ({@code send(encodeNewOrder().orderId(1)...)}). A node is used by one thread;
 * {@link #stop()} may come from any.
 *
 * <p>Admin commands ({@code seqbus admin command ACCOUNT NAME ARGS...}, Python's
 * {@code @admin_command}): a node registers them in its constructor and the runtime answers every
 * AdminCommand of the node's account with an AdminReply it posts, byte for byte what a Python
 * instance of the account posts ({@code help} is built in):
 *
 * <pre>{@code
 * adminCommand("bump", "add AMOUNT to the total", args -> {
 *     total += args.integer(0) * (args.bool(1, false) ? 2 : 1);
 *     return "total " + total;
 * }).param("amount", AdminType.INTEGER).optional("double", AdminType.BOOLEAN);
 * }</pre>
 */
public abstract class Node implements AutoCloseable {
    /** Log levels of {@link #log}. */
    public static final int ERROR = 1;
    public static final int WARN = 2;
    public static final int INFO = 3;
    public static final int DEBUG = 4;

    private long handle;
    private String account = "";
    private int instance;
    private boolean rewinding;
    private boolean skipOnError;
    private volatile boolean stopping;
    private volatile boolean signalled;
    private final long[] event = new long[Native.EVENT_LONGS];
    private final Message message = new Message();
    private final NioBuffer batch = new NioBuffer(ByteBuffer.allocateDirect(0));
    private final Map<Long, Runnable> timers = new HashMap<>();
    private final PriorityQueue<LocalTimer> localTimers = new PriorityQueue<>();
    private long localOrder;
    private final NodeStats stats = new NodeStats();
    private final CountDownLatch finished = new CountDownLatch(1);
    private final Admin admin = new Admin();

    private record LocalTimer(long at, long order, Runnable callback) implements Comparable<LocalTimer> {
        @Override
        public int compareTo(LocalTimer o) {
            int c = Long.compare(at, o.at);
            return c != 0 ? c : Long.compare(order, o.order);
        }
    }

    protected Node() {
        message.buffer = batch;
    }

    // -- the application's hooks ---------------------------------------------------------------

    /** Once, before the first message, with blank state (the node may send). */
    protected void onOpened() {}

    /**
     * Every message of the node's topics, in stream order, that {@link #dispatchTyped} did not
     * take: with a generated node base, the messages of other schemas and unknown templates.
     */
    protected void onMessage(Message message) {}

    /**
     * Where a generated node base (seqc's {@code <Package>Node}, {@code --lang java-node}) hands a
     * message of its schema to the typed handler of its template and returns true; false (the
     * default) leaves the message to {@link #onMessage}.
     */
    protected boolean dispatchTyped(Message message) {
        return false;
    }

    /** A rewinding node has caught up with the live stream. */
    protected void onRewound() {}

    /** Once when {@link #run} stops cleanly, after the last batch; not after an error. */
    protected void onClosed() {}

    /** The message types to deliver; null: every application message. */
    protected List<Topic> topics() {
        return null;
    }

    /** What a throwing handler does unless the configuration or the options say: "stop" or "skip". */
    protected String defaultOnError() {
        return "stop";
    }

    /**
     * The sender accounts allowed to send this node admin commands (Python's ADMIN_SENDERS); null
     * (the default): any. Others get a Denied reply.
     */
    protected Set<String> adminSenders() {
        return null;
    }

    // -- admin commands ----------------------------------------------------------------------------

    /**
     * Registers admin command {@code name} (1-64 letters, digits, '_', '.' or '-'; not "help",
     * which is built in), listed by help with {@code help}; add its parameters to what this
     * returns. Call it from the constructor, so that every instance of the account has the same
     * commands from the first message on. The handler runs in stream order like any other (it
     * must be deterministic: every instance runs the command at the same point); it returns the
     * reply's text, throws {@link AdminError} to refuse (Failed), and anything else it throws
     * becomes a Failed reply (logged, counted in {@link NodeStats#adminErrors()}) without
     * stopping the node.
     */
    protected final AdminCommand adminCommand(String name, String help, AdminHandler handler) {
        return admin.register(name, help, handler);
    }

    /** The admin commands this node registered, by name (help, built in, is not listed). */
    public final Map<String, AdminCommand> adminCommands() {
        return java.util.Collections.unmodifiableMap(admin.commands);
    }

    /** What the built-in help answers. */
    public final String adminHelp() {
        return admin.helpText();
    }

    // -- running it ------------------------------------------------------------------------------

    /**
     * Connects, opens ({@link #onOpened}), handles the stream until {@link #stop()}, drains what it
     * sent, calls {@link #onClosed} and closes. A handler error under "stop" is thrown here after
     * the node is closed ({@link NodeStats#failure()} names the message).
     */
    public void run(Options options) {
        try {
            open(options);
            while (!stopping) {
                pollOnce(Duration.ofMillis(50));
            }
            drain(options.drainTimeout);
            onClosed();
            log(INFO, who() + ": stopped at sequence " + sequence() + " (" + (signalled ? "a signal" : "stop()")
                    + "): " + stats.messages + " messages handled, " + busStats().get("commands_sent")
                    + " commands sent");
        } finally {
            try {
                close();
            } finally {
                finished.countDown();
            }
        }
    }

    /**
     * Connects to the bus, waits until the node may send (what arrives meanwhile is handled
     * right after) and calls {@link #onOpened}. For a loop of one's own: {@link #pollOnce},
     * {@link #drain}, {@link #close}.
     */
    public void open(Options options) {
        if (handle != 0) {
            throw new IllegalStateException("the node is open already");
        }
        Native.load();
        account = options.account;
        instance = options.instance;
        List<Topic> t = topics();
        int[] ts = null;
        if (t != null) {
            ts = new int[t.size()];
            for (int i = 0; i < ts.length; i++) {
                ts[i] = t.get(i).schemaId() << 16 | t.get(i).templateId();
            }
        }
        handle = Native.open(options.config, options.account, options.instance, options.start.value(), ts,
                options.listen);
        try {
            String policy = options.onError;
            if (policy == null) {
                int c = Native.onError(handle);
                policy = c == Native.ON_ERROR_SKIP ? "skip" : c == Native.ON_ERROR_STOP ? "stop" : defaultOnError();
            }
            if (!policy.equals("stop") && !policy.equals("skip")) {
                throw new IllegalArgumentException("onError must be \"stop\" or \"skip\", not \"" + policy + "\"");
            }
            skipOnError = policy.equals("skip");
            Native.waitReady(handle, options.readyTimeout.toNanos());
            rewinding = Native.isRewinding(handle);
            log(INFO, who() + ": opened");
            onOpened();
        } catch (RuntimeException | Error e) {
            close();
            throw e;
        }
    }

    /** Polls once (waiting at most {@code timeout}) and handles what came; the number of events. */
    public int pollOnce(Duration timeout) {
        long h = handle();
        long wait = timeout.toNanos();
        if (!localTimers.isEmpty()) {
            wait = Math.max(0, Math.min(wait, localTimers.peek().at() - System.nanoTime()));
        }
        long polled = Native.poll(h, 4096, wait);
        if ((polled & Native.BUFFER_MOVED) != 0) {
            batch.wrap(Native.buffer(h));
        }
        int events = 0;
        int kind;
        while ((kind = Native.next(h, event)) != 0) {
            events++;
            handle(kind);
        }
        if (events > 0) {
            stats.batches++;
        }
        fireLocalTimers();
        return events;
    }

    /**
     * Keeps reading the stream until every command the node sent or posted is sequenced, at most
     * {@code timeout} (handlers keep running: the node's state follows the stream to there).
     */
    public void drain(Duration timeout) {
        long h = handle();
        long deadline = System.nanoTime() + timeout.toNanos();
        while (Native.posted(h) > 0 || Native.inFlight(h) > 0) {
            if (System.nanoTime() > deadline) {
                log(WARN, who() + " closes with " + Native.inFlight(h) + " commands in flight and "
                        + Native.posted(h) + " queued, not confirmed by the stream in time");
                return;
            }
            pollOnce(Duration.ofMillis(50));
        }
    }

    /** Flushes what is queued and closes the node's sockets (again: nothing). */
    @Override
    public void close() {
        if (handle == 0) {
            return;
        }
        long h = handle;
        handle = 0;
        Native.close(h);
    }

    /** Asks the loop to return after the current batch (from any thread). */
    public void stop() {
        stopping = true;
    }

    public boolean stopped() {
        return stopping;
    }

    /**
     * SIGINT and SIGTERM (the JVM's shutdown) stop this node: {@link #run} returns after the
     * current batch, drains and calls {@link #onClosed}, and the JVM exits once it has.
     */
    public void stopOnSignals(Duration wait) {
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            signalled = true;
            stop();
            try {
                finished.await(wait.toMillis(), TimeUnit.MILLISECONDS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }, "seqbus-node-stop"));
    }

    // -- what handlers may call -------------------------------------------------------------------

    /** The sequencer's timestamp (ns since the epoch) of the message being handled. */
    public long sequencerTime() {
        return Native.timeNs(handle());
    }

    /** The sequence of the message being handled (0 before the first). */
    public long sequence() {
        return handle == 0 ? 0 : Native.sequence(handle);
    }

    /** True while the node replays history, until {@link #onRewound}. */
    public boolean isRewinding() {
        return rewinding;
    }

    /**
     * Sends a command (a whole IDL message, header included); this node's command sequence for
     * it. {@link BackPressureException} when the window is full or posted commands wait.
     */
    public long send(byte[] body, int offset, int length) {
        return Native.send(handle(), body, offset, length);
    }

    public long send(byte[] body) {
        return send(body, 0, body.length);
    }

    /** {@link #send(byte[], int, int)} from a direct ByteBuffer, read in place. */
    public long send(ByteBuffer direct, int offset, int length) {
        return Native.sendBuffer(handle(), direct, offset, length);
    }

    /**
     * Sends a command, or queues a copy when the window is full; queued commands leave in order as
     * the window drains. What a deterministic node sends then depends only on the stream.
     */
    public void post(byte[] body, int offset, int length) {
        Native.post(handle(), body, offset, length);
    }

    public void post(byte[] body) {
        post(body, 0, body.length);
    }

    /** {@link #post(byte[], int, int)} from a direct ByteBuffer. */
    public void post(ByteBuffer direct, int offset, int length) {
        Native.postBuffer(handle(), direct, offset, length);
    }

    /** Posted commands waiting for the window. */
    public int posted() {
        return Native.posted(handle());
    }

    /** Command fragments sent and not yet seen in the stream. */
    public int inFlight() {
        return Native.inFlight(handle());
    }

    /**
     * Runs {@code callback} at the first point of the stream whose time is at or after
     * {@code atNanos} (deterministic: between the same two messages in every instance and replay;
     * during it {@link #sequencerTime()} is the time of the record that made it due). Its id.
     */
    public long setTimer(long atNanos, Runnable callback) {
        long id = Native.setTimer(handle(), atNanos);
        timers.put(id, callback);
        return id;
    }

    /** {@code setTimer(sequencerTime() + delayNanos, callback)}. */
    public long setTimerAfter(long delayNanos, Runnable callback) {
        return setTimer(sequencerTime() + delayNanos, callback);
    }

    /** Cancels a deterministic timer; false if it fired or was cancelled already. */
    public boolean cancelTimer(long id) {
        timers.remove(id);
        return Native.cancelTimer(handle(), id);
    }

    /**
     * Runs {@code callback} after {@code delay} of this machine's clock: NOT deterministic (a
     * replay or a hot backup will not run it at the same point of the stream); for housekeeping
     * that does not change the node's state.
     */
    public void setLocalTimer(Duration delay, Runnable callback) {
        localTimers.add(new LocalTimer(System.nanoTime() + delay.toNanos(), localOrder++, callback));
    }

    public String account() {
        return account;
    }

    public int instance() {
        return instance;
    }

    /** What crossed to the application. */
    public NodeStats stats() {
        return stats;
    }

    /** The protocol's counters and the library's (received, gaps, retransmits, in_flight...). */
    public Map<String, Long> busStats() {
        long[] values = Native.stats(handle());
        String[] names = Native.statNames();
        Map<String, Long> m = new LinkedHashMap<>();
        for (int i = 0; i < names.length; i++) {
            m.put(names[i], values[i]);
        }
        return m;
    }

    /** One line among the node library's (stderr: {@code PROGRAM: LEVEL: text}). */
    public static void log(int level, String text) {
        Native.load();
        Native.log(level, text);
    }

    /**
     * Where the library's lines and {@link #log}'s go: stderr as {@code program: LEVEL: text},
     * {@code level} and above (0: the SEQBUS_LOG environment variable's, info when unset). Call it
     * before the first node opens; the first call holds for the process.
     */
    public static void logToStderr(String program, int level) {
        Native.load();
        Native.logToStderr(program, level);
    }

    // -- internals --------------------------------------------------------------------------------

    private long handle() {
        if (handle == 0) {
            throw new IllegalStateException("the node is not open (run() or open() it)");
        }
        return handle;
    }

    private String who() {
        return "node " + account + "/" + instance;
    }

    private void handle(int kind) {
        switch (kind) {
            case Native.EVENT_MESSAGE: {
                Message m = message;
                m.flags = (int) event[1];
                m.sequence = event[2];
                m.timeNs = event[3];
                m.offset = (int) event[4];
                m.length = (int) event[5];
                m.header = event[6];
                m.sender = event[7];
                m.senderBits = event[8];
                m.commandSeq = event[9];
                stats.messages++;
                try {
                    if (m.schemaId() == ADMIN_SCHEMA && m.templateId() == ADMIN_COMMAND) {
                        runAdminCommand(m);
                        dispatchTyped(m); // a generated bus base's onAdminCommand, as Python's BusNode
                        break;
                    }
                    deliver(m);
                } catch (RuntimeException e) {
                    failed(e, m.sequence, "schema " + m.schemaId() + " template " + m.templateId(), "onMessage");
                    stats.skippedSequences.add(m.sequence);
                }
                break;
            }
            case Native.EVENT_TIMER: {
                Runnable callback = timers.remove(event[10]);
                if (callback == null) {
                    break;
                }
                stats.timersFired++;
                try {
                    callback.run();
                } catch (RuntimeException e) {
                    failed(e, event[2], "timer", "timer");
                }
                break;
            }
            case Native.EVENT_REWOUND:
                rewinding = false;
                onRewound();
                break;
            default:
                break;
        }
    }

    /** Names the node without opening it (for tests of what runs admin commands, without a bus). */
    void setAccountForTest(String account, int instance) {
        this.account = account;
        this.instance = instance;
    }

    /** Schema bus (schemas/bus.idl) and its AdminCommand's template. */
    private static final int ADMIN_SCHEMA = 1;
    private static final int ADMIN_COMMAND = 4;

    /** Runs the AdminCommand {@code m} if it is for this node's account, and posts the reply. */
    void runAdminCommand(Message m) {
        byte[] reply = adminReply(m.buffer(), m.offset(), m.length(), m.sequence(), Admin.account(m.sender));
        if (reply != null) {
            post(reply);
        }
    }

    /**
     * The AdminReply this node posts for the AdminCommand at {@code offset} (standing at
     * {@code sequence}, sent by {@code sender}): the whole message; null when it is for another
     * account or corrupt. Runs the command's handler.
     */
    byte[] adminReply(seqbus.codec.ReadBuffer buffer, int offset, int length, long sequence, String sender) {
        return admin.run(this, buffer, offset, length, sequence, sender);
    }

    /** A message to its handler: the typed one of a generated base, else {@link #onMessage}. */
    void deliver(Message m) {
        if (!dispatchTyped(m)) {
            onMessage(m);
        }
    }

    /** Records a handler error; under "stop" the node stops and it is thrown on, under "skip" counted. */
    private void failed(RuntimeException e, long sequence, String type, String handler) {
        HandlerFailure f = new HandlerFailure(sequence, type, handler, e.toString(), skipOnError ? "skipped" : "stopped");
        stats.lastError = f;
        if (skipOnError) {
            stats.skipped++;
            log(WARN, who() + ": " + f.describe());
            return;
        }
        stats.failure = f;
        stop();
        log(ERROR, who() + ": " + f.describe());
        throw e;
    }

    private void fireLocalTimers() {
        long now = System.nanoTime();
        while (!localTimers.isEmpty() && localTimers.peek().at() - now <= 0) {
            localTimers.poll().callback().run();
        }
    }
}
