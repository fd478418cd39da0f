package seqbus.node;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.Test;

/**
 * Java nodes on a real bus: a seqbus-sequencer process on a udp-unicast bus, nodes of this JVM
 * polled in turn.
 * <ul>
 *   <li>two nodes see the same messages with the same clock, and their deterministic timers fire
 *       at the same records; posts leave in order through a window of 4 commands;
 *   <li>a late joiner rewinds the session: the same stream and timers, onRewound once;
 *   <li>a hot backup (the same account, instance 2, rewinding) sends its primary's commands
 *       again and the sequencer keeps one copy of each;
 *   <li>a handler that throws stops the node ("stop") or is skipped ("skip"); the configuration's
 *       skip keeps a message from the handlers.
 * </ul>
 * Every wait is bounded by time; the sequencer is killed by PID.
 */
class NodeOnABusTest {
    static boolean pollUntil(List<Node> nodes, Duration limit, BooleanSupplier done) {
        long deadline = System.nanoTime() + limit.toNanos();
        while (!done.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                return false;
            }
            for (Node n : nodes) {
                n.pollOnce(Duration.ofMillis(5));
            }
        }
        return true;
    }

    static boolean all(Probe p) {
        return p.count(1) == 30 && p.count(2) == 20 && p.fired.size() == 5;
    }

    @Test
    void nodesShareTheStreamTimersRewindAndAHotBackupSendsOnce() throws Exception {
        try (Bus bus = new Bus("");
                Probe a = new Probe(1, 30);
                Probe b = new Probe(2, 20);
                Probe late = new Probe(3, 0);
                Probe backup = new Probe(1, 30)) {
            a.open(bus.options("A", 1, Start.rewind(), 0));
            b.open(bus.options("B", 1, Start.rewind(), 1));
            assertTrue(pollUntil(List.of(a, b), Duration.ofSeconds(30), () -> all(a) && all(b)),
                    () -> "A " + a.count(1) + "+" + a.count(2) + " timers " + a.fired.size() + "; B " + b.count(1)
                            + "+" + b.count(2) + " timers " + b.fired.size());
            assertEquals(a.seen, b.seen);
            assertEquals(a.fired, b.fired);
            int nextA = 0;
            int nextB = 0;
            for (Probe.Seen s : a.seen) {
                if (s.sender().equals("A")) {
                    assertEquals(nextA++, s.payload());
                    assertEquals(s.payload() + 1, s.commandSeq());
                } else {
                    assertEquals("B", s.sender());
                    assertEquals(nextB++, s.payload());
                }
            }
            assertEquals(1, a.rewound);
            assertEquals(30L, a.busStats().get("commands_sent"));

            late.open(bus.options("LATE", 1, Start.rewind(), 2));
            assertTrue(late.isRewinding());
            assertTrue(pollUntil(List.of(late, a, b), Duration.ofSeconds(30), () -> all(late) && late.rewound == 1));
            assertTrue(late.rewindingAtFirst);
            assertFalse(late.isRewinding());
            assertEquals(a.seen, late.seen.subList(0, a.seen.size()));
            assertEquals(a.fired, late.fired);

            backup.open(bus.options("A", 2, Start.rewind(), 3));
            assertTrue(pollUntil(List.of(backup, a, b, late), Duration.ofSeconds(30),
                    () -> backup.rewound == 1 && backup.count(1) >= 30 && backup.posted() == 0
                            && backup.inFlight() == 0));
            // a marker from B after every command of the backup was confirmed: none of them was
            // sequenced again before it
            b.post(Probe.body(2, 999));
            assertTrue(pollUntil(List.of(a, b, backup), Duration.ofSeconds(20), () -> a.count(2) == 21));
            assertEquals(30, a.count(1), "the backup's commands were sequenced again");
            assertEquals(30, backup.count(1));
        }
    }

    @Test
    void aThrowingHandlerStopsTheNodeOrIsSkipped() throws Exception {
        try (Bus bus = new Bus("");
                Probe sender = new Probe(2, 10);
                Probe skipper = new Probe(3, 0);
                Probe stopper = new Probe(3, 0)) {
            sender.open(bus.options("S", 1, Start.rewind(), 0));
            skipper.throwAt = 4;
            stopper.throwAt = 4;
            skipper.open(bus.options("SKIP", 1, Start.rewind(), 1).onError("skip"));
            stopper.open(bus.options("STOP", 1, Start.rewind(), 2));
            assertTrue(pollUntil(List.of(sender, skipper), Duration.ofSeconds(20), () -> skipper.count(2) == 9));
            assertEquals(1, skipper.stats().skipped());
            assertEquals("skipped", skipper.stats().lastError().action());
            assertFalse(skipper.stopped());

            IllegalStateException e = assertThrows(IllegalStateException.class,
                    () -> pollUntil(List.of(stopper), Duration.ofSeconds(20), () -> false));
            assertEquals("a bad message", e.getMessage());
            assertTrue(stopper.stopped());
            assertNotNull(stopper.stats().failure());
            assertEquals("onMessage", stopper.stats().failure().handler());
            assertEquals(4, stopper.count(2));
        }
    }

    @Test
    void theConfigurationsSkipListKeepsAMessageFromTheHandlers() throws Exception {
        try (Bus bus = new Bus("");
                Probe sender = new Probe(2, 6);
                Probe reader = new Probe(3, 0)) {
            sender.open(bus.options("S", 1, Start.rewind(), 0));
            assertTrue(pollUntil(List.of(sender), Duration.ofSeconds(20), () -> sender.count(2) == 6));
            long third = sender.seen.get(2).sequence();
            Options o = new Options(bus.variant("reader.toml", "[node.accounts.READER]\nskip = [" + third + "]\n"),
                    "READER").start(Start.rewind()).listen(bus.options("READER", 1, Start.rewind(), 1).listen);
            reader.open(o);
            assertTrue(pollUntil(List.of(reader, sender), Duration.ofSeconds(20),
                    () -> reader.rewound == 1 && reader.count(2) == 5));
            for (Probe.Seen s : reader.seen) {
                assertNotEquals(third, s.sequence());
            }
            assertEquals(1L, reader.busStats().get("skipped"));
        }
    }
}
