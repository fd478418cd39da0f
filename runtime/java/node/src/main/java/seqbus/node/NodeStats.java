package seqbus.node;

import java.util.ArrayList;
import java.util.List;

/** Counters a node keeps about what crossed to the application (Python's NodeStats). */
public final class NodeStats {
    long messages;
    long batches;
    long timersFired;
    long skipped;
    long adminCommands;
    long adminErrors;
    final List<Long> skippedSequences = new ArrayList<>();
    HandlerFailure lastError;
    HandlerFailure failure;

    /** Messages handed to {@link Node#onMessage}. */
    public long messages() {
        return messages;
    }

    /** Non-empty batches polled. */
    public long batches() {
        return batches;
    }

    public long timersFired() {
        return timersFired;
    }

    /** Messages whose handler threw under "skip" (the configuration's skip: {@link Node#busStats}). */
    public long skipped() {
        return skipped;
    }

    /** Admin commands of this node's account it ran (help and refused ones included). */
    public long adminCommands() {
        return adminCommands;
    }

    /** Admin commands whose handler threw (other than {@link AdminError}) or that were corrupt. */
    public long adminErrors() {
        return adminErrors;
    }

    public List<Long> skippedSequences() {
        return List.copyOf(skippedSequences);
    }

    /** The last handler error, skipped or not; null if none. */
    public HandlerFailure lastError() {
        return lastError;
    }

    /** The handler error that stopped the node (fail-stop); null while it runs. */
    public HandlerFailure failure() {
        return failure;
    }
}
