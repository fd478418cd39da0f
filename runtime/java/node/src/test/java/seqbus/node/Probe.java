package seqbus.node;

import java.util.ArrayList;
import java.util.List;

/**
 * A node that records what it sees: posts {@code count} messages of {@code template} when opened,
 * and sets five timers 20 ms of stream time apart, the first at the first message of template 1.
 */
class Probe extends Node {
    /** (sequence, sequencer time, sender, command seq, template, payload). */
    record Seen(long sequence, long time, String sender, long commandSeq, int template, int payload) {}

    /** (sequence, time) of a timer that fired. */
    record Fired(long sequence, long time) {}

    final List<Seen> seen = new ArrayList<>();
    final List<Fired> fired = new ArrayList<>();
    int rewound;
    boolean rewindingAtFirst;
    int throwAt;
    private final int template;
    private final int count;
    private int timers;

    Probe(int template, int count) {
        this.template = template;
        this.count = count;
    }

    static byte[] body(int template, int n) {
        return new byte[] {4, 0, (byte) template, 0, 9, 0, 1, 0, (byte) n, (byte) (n >>> 8), (byte) (n >>> 16),
            (byte) (n >>> 24)};
    }

    @Override
    protected void onOpened() {
        for (int i = 0; i < count; i++) {
            post(body(template, i));
        }
    }

    @Override
    protected void onMessage(Message m) {
        if (seen.isEmpty()) {
            rewindingAtFirst = isRewinding();
        }
        if (sequence() != m.sequence() || sequencerTime() != m.timeNs()) {
            throw new AssertionError("the clock does not stand at the message");
        }
        int payload = m.buffer().getInt(m.offset() + 8);
        if (throwAt != 0 && m.templateId() == 2 && payload == throwAt) {
            throw new IllegalStateException("a bad message");
        }
        seen.add(new Seen(m.sequence(), m.timeNs(), m.sender(), m.commandSeq(), m.templateId(), payload));
        if (m.templateId() == 1 && timers == 0) {
            arm();
        }
    }

    @Override
    protected void onRewound() {
        rewound++;
    }

    long count(int t) {
        return seen.stream().filter(s -> s.template() == t).count();
    }

    private void arm() {
        timers++;
        setTimerAfter(20_000_000L, () -> {
            fired.add(new Fired(sequence(), sequencerTime()));
            if (timers < 5) {
                arm();
            }
        });
    }
}
