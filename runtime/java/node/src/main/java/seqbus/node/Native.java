package seqbus.node;

import java.io.File;
import java.nio.ByteBuffer;

/**
 * The JNI functions of the node library (rust/crates/ffi/src/java.rs), loaded once from the path
 * in the system property {@value #LIBRARY_PROPERTY} or the environment variable
 * {@value #LIBRARY_ENV}, else as {@code seqbus_ffi} from {@code java.library.path}.
 */
final class Native {
    static final String LIBRARY_PROPERTY = "seqbus.node.library";
    static final String LIBRARY_ENV = "SEQBUS_NODE_LIBRARY";
    /** Longs an event fills ({@link #next}). */
    static final int EVENT_LONGS = 12;
    /** {@link #poll}'s bit: the batch's memory moved, wrap it again ({@link #buffer}). */
    static final long BUFFER_MOVED = 1L << 32;

    static final int EVENT_MESSAGE = 1;
    static final int EVENT_TIMER = 2;
    static final int EVENT_REWOUND = 3;
    static final int FLAG_MINE = 1;
    static final int ON_ERROR_STOP = 0;
    static final int ON_ERROR_SKIP = 1;

    private static boolean loaded;

    private Native() {}

    /** Loads the library, or says where it was looked for and how to build it. */
    static synchronized void load() {
        if (loaded) {
            return;
        }
        String path = System.getProperty(LIBRARY_PROPERTY);
        String from = "-D" + LIBRARY_PROPERTY;
        if (path == null || path.isEmpty()) {
            path = System.getenv(LIBRARY_ENV);
            from = LIBRARY_ENV;
        }
        try {
            if (path != null && !path.isEmpty()) {
                File f = new File(path);
                if (!f.isFile()) {
                    throw new IllegalStateException(missing(from + " names " + path + ", which is not a file"));
                }
                System.load(f.getAbsolutePath());
            } else {
                System.loadLibrary("seqbus_ffi");
            }
        } catch (UnsatisfiedLinkError e) {
            throw new IllegalStateException(missing("it cannot be loaded: " + e.getMessage()), e);
        }
        loaded = true;
    }

    static String missing(String why) {
        return "the seqbus node library (libseqbus_ffi.so) is not loaded: " + why + ". Name it with -D"
                + LIBRARY_PROPERTY + "=/path/to/libseqbus_ffi.so or " + LIBRARY_ENV
                + " (or put its directory on java.library.path); build it with `cargo build --release"
                + " -p seqbus-ffi` (make build-nodes)";
    }

    static native long open(String config, String account, int instance, long start, int[] topics, String listen);

    static native void waitReady(long node, long timeoutNanos);

    static native long poll(long node, int maxRecords, long timeoutNanos);

    static native ByteBuffer buffer(long node);

    static native int next(long node, long[] event);

    static native long send(long node, byte[] body, int offset, int length);

    static native long sendBuffer(long node, ByteBuffer body, int offset, int length);

    static native void post(long node, byte[] body, int offset, int length);

    static native void postBuffer(long node, ByteBuffer body, int offset, int length);

    static native void flush(long node);

    static native int posted(long node);

    static native int inFlight(long node);

    static native long setTimer(long node, long atNanos);

    static native boolean cancelTimer(long node, long id);

    static native long sequence(long node);

    static native long timeNs(long node);

    static native boolean isRewinding(long node);

    static native boolean isReady(long node);

    static native int onError(long node);

    static native long[] stats(long node);

    static native String[] statNames();

    static native void close(long node);

    static native void log(int level, String message);

    static native void logToStderr(String program, int level);
}
