"""seqbus.aio: a node inside an asyncio event loop, against a real sequencer (in this process,
on a Rust thread) over TCP (the client's socket wakes it) and the in-process ring (a futex).

The asyncio node and a blocking node (``seqbus.run`` on a thread) run the same class over the
same stream: the handlers of the asyncio node run on the loop's thread, its deterministic
timers fire between the same two messages as the blocking node's, and its awaitable send
waits for room in a window of 2 commands, losing and reordering nothing.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path

import pytest

from examples.pingpong.messages import Ping, PingpongNode, PingView
from seqbus import _core, aio, run
from seqbus.errors import SeqbusError
from tests.transports.harness import write_config

PINGS = 200
#: Each Ping sets a deterministic timer this far into stream time.
TIMER_NS = 5_000_000
LIMIT_S = 60.0


class Probe(PingpongNode):
    """Records every Ping and every timer firing with the stream position it happened at."""

    def __init__(self) -> None:
        super().__init__()
        self.pings: list[tuple[int, int, int]] = []  # (sequence, time, id)
        self.fired: list[tuple[int, int, int]] = []  # (id, sequence, time) at firing
        self.threads: set[int] = set()
        self.rewound = 0
        self.closed = 0

    def on_ping(self, msg: PingView, mine: bool) -> None:
        self.threads.add(threading.get_ident())
        ping_id = msg.id
        self.pings.append((self.sequence(), self.sequencer_time(), ping_id))
        self.set_timer_after(TIMER_NS, lambda: self._fire(ping_id))

    def _fire(self, ping_id: int) -> None:
        self.threads.add(threading.get_ident())
        self.fired.append((ping_id, self.sequence(), self.sequencer_time()))

    def on_rewound(self) -> None:
        self.rewound += 1

    def on_closed(self) -> None:
        self.closed += 1


class Failing(PingpongNode):
    def on_ping(self, msg: PingView, mine: bool) -> None:
        raise ValueError(f"handler failed at ping {msg.id}")


def _thread_cpu_s(name: str) -> float:
    """CPU time (user + system) of this process's thread called ``name``."""
    for tid in os.listdir("/proc/self/task"):
        base = f"/proc/self/task/{tid}"
        with open(f"{base}/comm") as f:
            if f.read().strip() != name[:15]:
                continue
        with open(f"{base}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    raise AssertionError(f"no thread {name!r}")


async def _until(check: object, what: str) -> None:
    """Wait (bounded) on the loop until ``check()`` holds; the loop keeps delivering."""
    assert callable(check)
    deadline = time.monotonic() + LIMIT_S
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.01)


@pytest.mark.parametrize("transport", ["tcp", "memory"])
def test_an_asyncio_node_sees_what_a_blocking_node_sees(tmp_path: Path, transport: str) -> None:
    bus = write_config(tmp_path, transport, session="AIO", clock_tick_ms=20)
    config = str(bus.path)
    sequencer = _core.Sequencer(config)
    stop = threading.Event()
    blocking = Probe()
    errors: list[BaseException] = []

    def run_blocking() -> None:
        try:
            run(blocking, config, "SYNC", start="rewind", stop=stop)
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run_blocking, name="blocking-node")
    thread.start()
    try:
        node, seqs, waits, idle_cpu, idle_signals = asyncio.run(_drive(config, blocking))
    finally:
        stop.set()
        thread.join(30)
        sequencer.stop()
        sequencer.join(30)
    assert not errors, errors
    assert not thread.is_alive()

    # every Ping once, in the order the awaitable sends were made
    assert [p[2] for p in node.pings] == list(range(PINGS))
    assert seqs == sorted(seqs) and len(set(seqs)) == PINGS
    assert waits > 0, "a window of 2 must have made some sends wait"
    # handlers, timers and on_rewound on the loop's thread, on_rewound once
    assert node.threads == {threading.get_ident()}
    assert node.rewound == 1 and node.closed == 1
    # the same messages at the same stream positions, and every timer fired between the same
    # two messages with the same stream time as in the blocking node
    assert node.pings == blocking.pings
    assert len(node.fired) == PINGS
    assert node.fired == blocking.fired
    for (ping_id, seq, at), (_, ping_at, _) in zip(node.fired, blocking.pings, strict=True):
        assert at >= ping_at + TIMER_NS and seq > 0, (ping_id, seq, at)
    # idle, the loop is woken only for what the client hands it, and its thread sleeps
    assert idle_cpu < 0.25, f"the client's thread used {idle_cpu:.2f} s of CPU in 1 s idle"
    assert idle_signals < 200, f"{idle_signals} wake-ups of the loop in 1 s idle"


async def _drive(config: str, blocking: Probe) -> tuple[Probe, list[int], int, float, int]:
    async with aio.connect(Probe, config, "AIO", start="rewind", window=2) as conn:
        await conn.rewound()
        node = conn.node
        sends = [asyncio.ensure_future(conn.send(Ping(id=i, sent_at_ns=0))) for i in range(PINGS)]
        seqs = list(await asyncio.gather(*sends))
        await _until(lambda: len(node.fired) == PINGS, "every timer")
        await _until(lambda: len(blocking.fired) == PINGS, "every timer of the blocking node")
        before_cpu = _thread_cpu_s("seqbus-AIO-1")
        before = conn.stats()["loop_signals"]
        began = time.monotonic()
        await asyncio.sleep(1.0)
        # per second of the idle time as it passed (a loaded host oversleeps)
        elapsed = time.monotonic() - began
        idle_cpu = (_thread_cpu_s("seqbus-AIO-1") - before_cpu) / elapsed
        idle_signals = round((conn.stats()["loop_signals"] - before) / elapsed)
        waits = conn.send_waits
    assert conn.closed
    return node, seqs, waits, idle_cpu, idle_signals


def test_a_handler_error_closes_the_connection_and_is_raised(tmp_path: Path) -> None:
    bus = write_config(tmp_path, "tcp", session="AIOERR")
    config = str(bus.path)
    sequencer = _core.Sequencer(config)

    async def drive() -> None:
        # fail-stop (the default policy): the error closes the connection, named in the status
        conn = await aio.connect(Failing, config, "AIO")
        seq = await conn.send(Ping(id=7, sent_at_ns=0))
        with pytest.raises(ValueError, match="handler failed at ping 7"):
            await conn.wait_closed()
        assert conn.closed and seq > 0
        failure = conn.node.stats.failure
        assert failure is not None and failure.handler.endswith("on_ping")
        with pytest.raises(ValueError, match="ping 7"):
            await conn.send(Ping(id=8, sent_at_ns=0))

        # on_error="skip", as seqbus.run takes it: counted, skipped, the node runs on
        async with aio.connect(Failing, config, "SKIP", on_error="skip") as skipping:
            for i in range(3):
                await skipping.send(Ping(id=i, sent_at_ns=0))
            await _until(lambda: skipping.node.stats.skipped == 3, "three skipped pings")
            assert not skipping.closed and skipping.node.stats.failure is None

    try:
        asyncio.run(asyncio.wait_for(drive(), LIMIT_S))
    finally:
        sequencer.stop()
        sequencer.join(30)


def test_a_node_that_stops_ends_run(tmp_path: Path) -> None:
    bus = write_config(tmp_path, "tcp", session="AIORUN")
    config = str(bus.path)
    sequencer = _core.Sequencer(config)

    class StopAtThree(Probe):
        def on_opened(self) -> None:
            for i in range(3):
                self.post(Ping(id=i, sent_at_ns=0))

        def on_ping(self, msg: PingView, mine: bool) -> None:
            super().on_ping(msg, mine)
            if len(self.pings) == 3:
                self.stop()

    try:
        node = asyncio.run(asyncio.wait_for(aio.run(StopAtThree, config, "AIO"), LIMIT_S))
    finally:
        sequencer.stop()
        sequencer.join(30)
    assert [p[2] for p in node.pings] == [0, 1, 2]
    assert node.closed == 1


def test_a_node_that_stops_at_once_drains_what_it_posted_first(tmp_path: Path) -> None:
    """As under ``seqbus.run``: 40 commands posted behind a window of 4 and a stop in
    ``on_opened``; the node keeps delivering until every one is sequenced and handed to it."""
    bus = write_config(tmp_path, "tcp", session="AIODRAIN")
    config = str(bus.path)
    sequencer = _core.Sequencer(config)

    class PostAndStop(Probe):
        def on_opened(self) -> None:
            for i in range(40):
                self.post(Ping(id=i, sent_at_ns=0))
            self.stop()

        def on_closed(self) -> None:
            super().on_closed()
            self.at_close = (self.posted, len(self.pings))

    try:
        node = asyncio.run(asyncio.wait_for(aio.run(PostAndStop, config, "AIO", window=4), LIMIT_S))
    finally:
        sequencer.stop()
        sequencer.join(30)
    assert node.at_close == (0, 40)
    assert [p[2] for p in node.pings] == list(range(40))


def test_a_loop_client_serves_a_blocking_poll_too(tmp_path: Path) -> None:
    """``LoopClient.poll`` waits on the same handoff (``Node.poll_once`` drives it)."""
    bus = write_config(tmp_path, "tcp", session="AIOPOLL")
    config = str(bus.path)
    sequencer = _core.Sequencer(config)
    client = _core.LoopClient(config, "POLL", topics=Probe.topics())
    node = Probe()
    try:
        deadline = time.monotonic() + LIMIT_S
        early = []
        while not client.is_ready():
            assert time.monotonic() < deadline, "never ready"
            early.append(client.poll(4096, 0.05))
        node.attach(client, "POLL", 1)
        for batch in early:
            node.handle_batch(batch)
        for i in range(5):
            node.post(Ping(id=i, sent_at_ns=0))
        while len(node.pings) < 5:
            assert time.monotonic() < deadline, f"{len(node.pings)} of 5 pings"
            node.poll_once(0.05)
        assert [p[2] for p in node.pings] == list(range(5))
    finally:
        client.close()
        sequencer.stop()
        sequencer.join(30)


def test_connect_refuses_a_bad_start(tmp_path: Path) -> None:
    bus = write_config(tmp_path, "tcp", session="AIOBAD")

    async def drive() -> None:
        await aio.connect(Probe, str(bus.path), "AIO", start=0)

    with pytest.raises(SeqbusError, match="start sequence must be 1 or more"):
        asyncio.run(drive())
