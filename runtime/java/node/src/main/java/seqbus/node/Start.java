package seqbus.node;

/** Where a node starts reading the stream. */
public final class Start {
    private static final Start LIVE = new Start(0);
    private static final Start REWIND = new Start(1);

    private final long value;

    private Start(long value) {
        this.value = value;
    }

    /** From the live stream. */
    public static Start live() {
        return LIVE;
    }

    /**
     * The whole session from its first message: a late joiner, or a hot backup started after
     * its primary (it recomputes the primary's state and sends the same commands).
     */
    public static Start rewind() {
        return REWIND;
    }

    /** From sequence {@code sequence} (1 or more). */
    public static Start from(long sequence) {
        if (sequence < 1) {
            throw new IllegalArgumentException("sequences start at 1, not " + sequence);
        }
        return new Start(sequence);
    }

    /** 0 live, 1 rewind, else the first sequence (the C ABI's start). */
    public long value() {
        return value;
    }

    @Override
    public String toString() {
        return value == 0 ? "live" : value == 1 ? "rewind" : "from " + value;
    }
}
