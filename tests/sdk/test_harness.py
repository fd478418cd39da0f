"""Distributed scenarios on the deterministic harness (seqbus.testing): one thread, virtual
clock, the core's real state machines."""

from __future__ import annotations

import hashlib
import struct
import time

import pytest
from examples.pingpong.messages import Ping, PingpongNode, PingView, Pong, PongView

from seqbus import BackPressureError
from seqbus.testing import Harness

_PACK = struct.Struct("<QQQ")


class Client(PingpongNode):
    """Sends ``total`` Pings (orders), keeping the window full; counts the Pongs (acks)."""

    def __init__(self, total: int = 200) -> None:
        super().__init__()
        self.total = total
        self.sent = 0
        self.acks: dict[int, int] = {}

    def on_opened(self) -> None:
        self.pump()

    def pump(self) -> None:
        while self.sent < self.total:
            try:
                self.send(Ping(id=self.sent, sent_at_ns=0))
            except BackPressureError:
                return
            self.sent += 1

    def on_ping(self, msg: PingView, mine: bool) -> None:
        if mine:
            self.pump()

    def on_pong(self, msg: PongView, mine: bool) -> None:
        self.acks[msg.id] = self.acks.get(msg.id, 0) + 1


#: The engine's timer period: short enough that a run of a few hundred pings, however fast the
#: simulated network carries it, spans several periods of stream time.
TICK_NS = 100_000


class Engine(PingpongNode):
    """A deterministic state machine: answers each Ping, hashes what it saw, runs a timer."""

    def __init__(self) -> None:
        super().__init__()
        self.hash = hashlib.blake2b(digest_size=16)
        self.handled = 0
        self.timer_points: list[tuple[int, int]] = []

    def on_opened(self) -> None:
        self.set_timer_after(TICK_NS, self._tick)

    def _tick(self) -> None:
        self.timer_points.append((self.sequence(), self.sequencer_time()))
        self.hash.update(_PACK.pack(0, self.sequence(), self.sequencer_time()))
        if self.sequencer_time():
            self.set_timer(self.sequencer_time() + TICK_NS, self._tick)

    def on_ping(self, msg: PingView, mine: bool) -> None:
        self.handled += 1
        self.hash.update(_PACK.pack(msg.id, self.sequence(), self.sequencer_time()))
        self.post(Pong(id=msg.id, ping_sent_at_ns=self.sequencer_time()))

    def state_hash(self) -> str:
        return self.hash.hexdigest()


class WallClockEngine(Engine):
    """Uses the machine's clock in its state: not deterministic, and the test shows it."""

    def on_ping(self, msg: PingView, mine: bool) -> None:
        super().on_ping(msg, mine)
        self.hash.update(_PACK.pack(time.time_ns(), 0, 0))


def test_ping_pong_is_repeatable_for_a_seed() -> None:
    def scenario(seed: int) -> tuple[str, int, dict[int, int]]:
        bus = Harness(seed=seed)
        engine = bus.add(Engine, "ENGINE", 1, start="rewind")
        client = bus.add(Client(50), "CLIENT", 1)
        bus.run(until=lambda: len(client.acks) == 50, for_ns=5_000_000_000)
        return engine.state_hash(), bus.now_ns, client.acks

    first = scenario(3)
    assert first == scenario(3)
    assert first[2] == {i: 1 for i in range(50)}
    assert scenario(4)[0] != first[0]  # other delays, other timestamps


def test_hot_backup_takes_over_with_no_lost_order() -> None:
    bus = Harness(seed=11)
    primary = bus.add(Engine, "ENGINE", 1, start="rewind")
    backup = bus.add(Engine, "ENGINE", 2, start="rewind")
    client = bus.add(Client(400), "CLIENT", 1, window=16)
    bus.run(until=lambda: len(client.acks) >= 150, for_ns=10_000_000_000)
    bus.settle(primary, backup)
    assert primary.state_hash() == backup.state_hash()
    bus.kill(primary)
    bus.run(until=lambda: len(client.acks) == 400, for_ns=10_000_000_000)
    bus.run(for_ns=50_000_000)
    # every order answered exactly once: the twins' answers were deduplicated by the sequencer
    # while both lived, and the backup's own answers carry on once the primary is gone
    assert client.acks == {i: 1 for i in range(400)}
    assert backup.handled == 400


def test_late_joiner_rewinds_to_the_primarys_state() -> None:
    bus = Harness(seed=5)
    engine = bus.add(Engine, "ENGINE", 1, start="rewind")
    client = bus.add(Client(300), "CLIENT", 1)
    bus.run(until=lambda: len(client.acks) >= 120, for_ns=10_000_000_000)
    late = bus.add(Engine, "ENGINE", 2, start="rewind")
    assert late.handled == 0
    bus.run(until=lambda: len(client.acks) == 300, for_ns=10_000_000_000)
    bus.run(until=lambda: late.handled == 300 and not late.is_rewinding, for_ns=1_000_000_000)
    bus.settle(late, engine)
    assert late.state_hash() == engine.state_hash()
    # the deterministic timers fired at the same stream points, live and in replay
    assert late.timer_points == engine.timer_points
    # several firings at distinct stream points (how many depends on how the stream's time
    # is spread, which the simulated network's pacing decides)
    assert len({point for point, _ in engine.timer_points}) >= 3


def test_a_wall_clock_node_diverges_on_replay() -> None:
    bus = Harness(seed=5)
    engine = bus.add(WallClockEngine, "ENGINE", 1, start="rewind")
    client = bus.add(Client(50), "CLIENT", 1)
    bus.run(until=lambda: len(client.acks) == 50, for_ns=10_000_000_000)
    late = bus.add(WallClockEngine, "ENGINE", 2, start="rewind")
    bus.run(until=lambda: late.handled == 50, for_ns=1_000_000_000)
    assert late.state_hash() != engine.state_hash()


def test_lost_packets_are_filled_and_state_agrees() -> None:
    bus = Harness(seed=9)
    engine = bus.add(Engine, "ENGINE", 1, start="rewind")
    lossy = bus.add(Engine, "ENGINE", 2, start="rewind")
    client = bus.add(Client(300), "CLIENT", 1)
    bus.set_downstream_loss(lossy, 20.0)
    bus.run(until=lambda: len(client.acks) == 300, for_ns=20_000_000_000)
    bus.run(until=lambda: lossy.handled == 300, for_ns=5_000_000_000)
    bus.settle(lossy, engine)
    assert bus.client(lossy).stats()["gaps"] > 0
    assert lossy.state_hash() == engine.state_hash()


def test_back_pressure_is_visible_to_send() -> None:
    bus = Harness(seed=1)
    client = bus.add(Client(0), "CLIENT", 1, window=4)
    bus.run(until=lambda: bus.client(client).is_ready(), for_ns=1_000_000_000)
    bus.run(for_ns=1_000_000)
    for i in range(4):
        client.send(Ping(id=i, sent_at_ns=0))
    with pytest.raises(BackPressureError, match="window full"):
        client.send(Ping(id=4, sent_at_ns=0))
    bus.run(until=lambda: bus.client(client).stats()["in_flight"] == 0, for_ns=1_000_000_000)
    client.send(Ping(id=4, sent_at_ns=0))


def test_posted_commands_wait_for_the_window_in_order() -> None:
    bus = Harness(seed=1)
    client = bus.add(Client(0), "CLIENT", 1, window=2)
    engine = bus.add(Engine, "ENGINE", 1, start="rewind")
    bus.run(until=lambda: bus.client(client).is_ready(), for_ns=1_000_000_000)
    for i in range(10):
        client.post(Ping(id=i, sent_at_ns=0))
    assert client.posted == 8
    with pytest.raises(BackPressureError, match="posted commands wait"):
        client.send(Ping(id=99, sent_at_ns=0))
    bus.run(until=lambda: len(client.acks) == 10, for_ns=1_000_000_000)
    assert client.posted == 0
    assert engine.handled == 10
    assert sorted(client.acks) == list(range(10))


def test_topic_filter_keeps_the_clock_moving() -> None:
    class OnlyPongs(PingpongNode):
        def __init__(self) -> None:
            super().__init__()
            self.fired_at: list[int] = []

        def on_opened(self) -> None:
            self.set_timer_after(1, lambda: self.fired_at.append(self.sequence()))

        def on_pong(self, msg: PongView, mine: bool) -> None:
            pass

    assert OnlyPongs.topics() == [(2, 2)]
    bus = Harness(seed=2)
    watcher = bus.add(OnlyPongs, "WATCH", 1, start="rewind")
    client = bus.add(Client(20), "CLIENT", 1)
    bus.run(until=lambda: client.sent == 20, for_ns=1_000_000_000)
    bus.run(for_ns=50_000_000)
    stats = bus.client(watcher).stats()
    assert stats["filtered"] >= 20  # no Pong was ever sent: no message crossed into Python
    assert watcher.stats.messages == 0
    assert len(watcher.fired_at) == 1 and watcher.fired_at[0] > 0  # the timer still fired


def test_timers_fire_on_clock_ticks_while_the_stream_is_idle() -> None:
    # After the traffic stops, only the sequencer's ClockTick control messages move stream
    # time. A deterministic timer due then must fire at a tick, at the same point in a replay.
    bus = Harness(seed=3, clock_tick_ns=10_000_000)
    engine = bus.add(Engine, "ENGINE", 1, start="rewind")
    client = bus.add(Client(10), "CLIENT", 1)
    bus.run(until=lambda: len(client.acks) == 10, for_ns=5_000_000_000)
    busy_until = engine.sequencer_time()
    fired = len(engine.timer_points)
    sequenced = bus.sequenced
    bus.run(for_ns=200_000_000)
    assert bus.sequenced >= sequenced + 15  # ticks only: nothing else was sent
    assert engine.sequencer_time() >= busy_until + 150_000_000  # stream time moved on
    idle_points = engine.timer_points[fired:]
    assert len(idle_points) >= 15  # a 1 ms timer re-armed at every tick
    assert all(seq > sequenced for seq, _ in idle_points)
    late = bus.add(Engine, "ENGINE", 2, start="rewind")
    bus.run(until=lambda: not late.is_rewinding and late.sequence() >= engine.sequence(),
            for_ns=1_000_000_000)
    assert late.timer_points[: len(engine.timer_points)] == engine.timer_points


def test_a_simulated_bus_made_on_one_thread_runs_and_is_dropped_on_another() -> None:
    """The simulated bus is an ordinary object: a fixture may build it on one thread and the
    test use it and drop it on another (before, the class was bound to its thread: using it
    elsewhere failed and dropping it elsewhere warned)."""
    import gc
    import threading
    import warnings

    from seqbus import _core

    made: list[_core.SimBus] = []
    maker = threading.Thread(target=lambda: made.append(_core.SimBus(seed=3)))
    maker.start()
    maker.join(10)
    sim = made.pop()
    start = sim.now_ns
    moved = sim.advance(start + 1_000_000)  # virtual time moves on this thread
    assert start < moved <= start + 1_000_000
    assert sim.now_ns == moved
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        del sim
        gc.collect()
