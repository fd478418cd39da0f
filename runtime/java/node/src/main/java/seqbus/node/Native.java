package seqbus.node;

import java.io.File;
import java.nio.ByteBuffer;

/**
 * The JNI functions of the node library (rust/crates/ffi/src/java.rs), loaded once from the path
 * in the system property {@value #LIBRARY_PROPERTY} or the environment variable
 * {@value #LIBRARY_ENV}; else from {@code ../../lib/libseqbus_ffi.so} beside the jar this class
 * was loaded from (the node SDK's layout, {@code share/java/} and {@code lib/}: the seqbus wheel's
 * {@code seqbus sdk classpath}); else as {@code seqbus_ffi} from {@code java.library.path}.
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
        File besideJar = besideJar();
        try {
            if (path != null && !path.isEmpty()) {
                File f = new File(path);
                if (!f.isFile()) {
                    throw new IllegalStateException(missing(from + " names " + path + ", which is not a file"));
                }
                System.load(f.getAbsolutePath());
            } else if (besideJar != null && besideJar.isFile()) {
                System.load(besideJar.getAbsolutePath());
            } else {
                System.loadLibrary("seqbus_ffi");
            }
        } catch (UnsatisfiedLinkError e) {
            String where = path != null && !path.isEmpty() ? from + " names " + path
                    : besideJar != null && besideJar.isFile() ? "beside its jar: " + besideJar
                    : "not set by -D" + LIBRARY_PROPERTY + " nor " + LIBRARY_ENV + ", not beside the jar ("
                            + (besideJar == null ? "not loaded from a jar" : besideJar + " is not a file")
                            + "), nor on java.library.path (" + System.getProperty("java.library.path") + ")";
            throw new IllegalStateException(missing(where + "; it cannot be loaded: " + e.getMessage()), e);
        }
        loaded = true;
    }

    /**
     * The library where the node SDK puts it, {@code lib/libseqbus_ffi.so} two directories above
     * the jar this class came from ({@code share/java/seqbus-node-*.jar}); null when this class
     * was not loaded from a jar file.
     */
    static File besideJar() {
        try {
            java.security.CodeSource source = Native.class.getProtectionDomain().getCodeSource();
            if (source == null || source.getLocation() == null) {
                return null;
            }
            File jar = new File(source.getLocation().toURI());
            if (!jar.isFile()) {
                return null;  // classes in a directory (a build's target/classes)
            }
            File dir = jar.getAbsoluteFile().getParentFile();
            return new File(dir, ".." + File.separator + ".." + File.separator + "lib" + File.separator
                    + "libseqbus_ffi.so").toPath().normalize().toFile();
        } catch (SecurityException | IllegalArgumentException | java.net.URISyntaxException e) {
            return null;
        }
    }

    static String missing(String why) {
        return "the seqbus node library (libseqbus_ffi.so) is not loaded: " + why + ". Name it with -D"
                + LIBRARY_PROPERTY + "=/path/to/libseqbus_ffi.so or " + LIBRARY_ENV
                + " (or put its directory on java.library.path); the seqbus wheel's jars find it by"
                + " themselves (`seqbus sdk classpath`, `seqbus sdk library`); in a checkout build it"
                + " with `cargo build --release -p seqbus-ffi` (make build-nodes)";
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
