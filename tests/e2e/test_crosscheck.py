"""The delivery cross-check (issue 19): one recorded stream handed to four consumers with the
same account, topics and timers must give the same records, and every timer must fire at the
same sequence.

The stream is recorded over real processes and UDP multicast: a sequencer (idle clock ticks
every 2 ms), two gateways sending NewOrders — some large enough to be fragmented, interleaved
with the other gateway's messages — and OrderAccepteds, an operator sending admin commands to
the consumers' account and to another, and idle stretches. Half way through, the consumers
start from the session's first message (a rewind, then live):

1. a Rust node (``rust/crates/net/examples/delivery_node.rs``: ``seqbus-net``'s NodeClient and
   the core's clock), a process of its own;
2. a Python node (``seqbus.Node`` over ``seqbus._core.NodeClient``) over the same sockets;

and, from the recorded session afterwards,

3. the simulated bus (``seqbus.testing.Harness`` started from the session's journal; 10% loss
   with duplication and reordering on every link, replayer answers of one Ethernet frame), a
   node rewinding it;
4. offline replay of the session's archive (``seqbus.archive.replay``).

Every node sets, on each NewOrder it handles at sequence ``s``, a timer ``DELAY_NS * (1 + s %
3)`` after the message's time. What is compared: every message and time record (type,
sequence, envelope, body) up to the end marker's sequence, and every timer fired by then (set
at, deadline, fired at).
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from examples.exchange import messages as x
from examples.exchange.messages import ExchangeNode, NewOrderView

from seqbus import _core, bus
from seqbus.archive import Archive, JournalArchiver, replay
from seqbus.batch import RECORD_HEADER, RECORD_MESSAGE, RECORD_REWOUND, RECORD_TIME
from seqbus.testing import Harness
from tests.archive import session as sess
from tests.conftest import ROOT, Processes, free_udp_port, seqbus_cli
from tests.e2e.busconfig import wait_udp_bound

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("multicast")]

ACCOUNT = "AUDIT"
DELAY_NS = 1_500_000
END_ORDER_ID = 999_999
#: How far past the end marker the live consumers run (every timer set before it is due).
MARGIN_NS = 20_000_000
TARGET = ROOT / "rust" / "target"
RUST_NODE = TARGET / "release" / "examples" / "delivery_node"

#: (type, sequence, envelope, body) of a message or time record.
Rec = tuple[int, int, bytes, bytes]
#: (sequence set at, deadline, sequence fired at)
Fired = tuple[int, int, int]


def parse(batch: bytes) -> tuple[list[Rec], list[int]]:
    """The message and time records of a batch, and the sequences of caught-up records."""
    recs: list[Rec] = []
    caught_up: list[int] = []
    at = 0
    while at < len(batch):
        length, kind, seq = RECORD_HEADER.unpack_from(batch, at)[:3]
        if kind in (RECORD_MESSAGE, RECORD_TIME):
            recs.append((kind, seq, batch[at + 16 : at + 48], batch[at + 48 : at + length]))
        elif kind == RECORD_REWOUND:
            caught_up.append(seq)
        at += length
    return recs, caught_up


class CrossNode(ExchangeNode):
    """Handles NewOrders only (admin commands reach it by its account); keeps what it was
    handed and when its timers fired."""

    def __init__(self) -> None:
        super().__init__()
        self.records: list[Rec] = []
        self.caught_up: list[int] = []
        self.fired: list[Fired] = []
        self.end_ns: int | None = None

    def on_batch(self, batch: bytes) -> None:
        recs, caught_up = parse(batch)
        self.records += recs
        self.caught_up += caught_up

    def on_new_order(self, msg: NewOrderView, mine: bool) -> None:
        seq = self.sequence()
        at = self.sequencer_time() + DELAY_NS * (1 + seq % 3)
        self.set_timer(at, lambda: self.fired.append((seq, at, self.sequence())))
        if msg.order_id == END_ORDER_ID:
            self.end_ns = self.sequencer_time()

    def past_the_end(self) -> bool:
        return self.end_ns is not None and self.sequencer_time() >= self.end_ns + MARGIN_NS


@dataclass
class Outcome:
    records: list[Rec] = field(default_factory=list)
    fired: list[Fired] = field(default_factory=list)
    caught_up: list[int] = field(default_factory=list)

    def upto(self, last: int) -> tuple[list[Rec], list[Fired]]:
        return (
            [r for r in self.records if r[1] <= last],
            sorted(f for f in self.fired if f[2] <= last),
        )


def rust_node_program() -> Path:
    """The Rust node, built with cargo (shared target directory) unless SEQBUS_DELIVERY_NODE
    names a built one."""
    prebuilt = os.environ.get("SEQBUS_DELIVERY_NODE")
    if prebuilt:
        return Path(prebuilt)
    proc = subprocess.run(
        ["cargo", "build", "--release", "-q", "-p", "seqbus-net", "--example", "delivery_node"],
        cwd=ROOT / "rust",
        env=dict(os.environ, CARGO_TARGET_DIR=str(TARGET)),
        capture_output=True,
        text=True,
        timeout=1500,
    )
    assert proc.returncode == 0, f"cargo build failed:\n{proc.stderr[-4000:]}"
    return RUST_NODE


def read_rust_node(path: Path) -> Outcome:
    o = Outcome()
    for line in path.read_text().splitlines():
        kind, *f = line.split(" ")  # a time record's body is empty
        if kind == "R":
            o.records.append((int(f[0]), int(f[1]), bytes.fromhex(f[2]), bytes.fromhex(f[3])))
        elif kind == "T":
            o.fired.append((int(f[0]), int(f[1]), int(f[2])))
        elif kind == "C":
            o.caught_up.append(int(f[0]))
    return o


def write_config(workdir: Path) -> tuple[Path, int]:
    """The bus's configuration, and its sequencer's upstream port."""
    upstream, downstream, replayer = free_udp_port(), free_udp_port(), free_udp_port()
    path = workdir / "bus.toml"
    path.write_text(f"""\
[bus]
session = "XCHECK0001"

[sequencer]
upstream = "127.0.0.1:{upstream}"
journal_dir = "{workdir / 'journal'}"
clock_tick_ms = 2

[downstream]
transport = "udp-multicast"
group = "239.7.7.8:{downstream}"
interface = "127.0.0.1"

[replayer]
listen = "127.0.0.1:{replayer}"

[node]
replayers = ["127.0.0.1:{replayer}"]
""")
    return path, upstream


def order(order_id: int, memo: int) -> bytes:
    return x.NewOrder(order_id=order_id, client_id=1, symbol="AAPL", side=x.Side.Buy,
                      price=x.Price(mantissa=100 + order_id % 7, exponent=-2), quantity=1,
                      inst=x.ExecInst(0), account="acct", memo=bytes([order_id % 251]) * memo).encode()


def accepted(order_id: int) -> bytes:
    return x.OrderAccepted(order_id=order_id, at=0).encode()


def admin(target: str, request_id: int) -> bytes:
    return bus.AdminCommand(target=target, request_id=request_id, name="help", args=[]).encode()


class Live:
    """The producers and the Python consumer over real sockets, driven from this thread."""

    def __init__(self, config: Path) -> None:
        self.config = str(config)
        self.senders = {a: _core.NodeClient(self.config, a, 1) for a in ("GW1", "GW2", "OPS")}
        self.python: CrossNode | None = None
        self.turn()
        deadline = time.monotonic() + 30
        while not all(c.is_ready() for c in self.senders.values()):
            assert time.monotonic() < deadline, "the senders never got their SenderState"
            self.turn()

    def turn(self) -> None:
        for c in self.senders.values():
            c.poll(4096, 0.0)
        if self.python is not None:
            self.python.poll_once(0.001)

    def send(self, account: str, body: bytes) -> None:
        c = self.senders[account]
        deadline = time.monotonic() + 10
        while True:
            try:
                c.send(body)
                return
            except Exception:  # BackPressureError: the window drains as we poll
                assert time.monotonic() < deadline, "a sender's window never drained"
                self.turn()

    def idle(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.turn()
            time.sleep(0.001)

    def start_python(self) -> None:
        node = CrossNode()
        client = _core.NodeClient(self.config, ACCOUNT, 1, start="rewind", topics=node.topics())
        node.attach(client, ACCOUNT, 1, rewinding=True)
        self.python = node


def produce(live: Live, first: int, count: int) -> None:
    """NewOrders from GW1 (every 5th large: fragmented) and GW2, OrderAccepteds between them,
    admin commands to AUDIT and OTHER, and idle stretches where only clock ticks run."""
    for i in range(first, first + count):
        live.send("GW1", order(i, 3000 + 500 * (i % 3) if i % 5 == 0 else 10))
        live.send("GW2", order(10_000 + i, 5))
        live.send("GW2", accepted(i))
        if i % 7 == 3:
            live.send("OPS", admin(ACCOUNT, i))
            live.send("OPS", admin("OTHER", i))
        live.turn()
        if i % 10 == 9:
            live.idle(0.02)


def test_four_consumers_are_handed_the_same_records_and_fire_the_same_timers(
    tmp_path: Path, processes: Processes
) -> None:
    config, upstream = write_config(tmp_path)
    program = rust_node_program()
    cli = seqbus_cli()
    sequencer = processes.start("sequencer", [*cli, "sequencer", "-c", str(config)])
    assert wait_udp_bound(upstream, 30.0), processes.logs()
    live = Live(config)
    produce(live, 1, 40)

    # half way: the consumers join from the session's first message
    out = tmp_path / "rust_node.txt"
    topics = ",".join(f"{s}:{t}" for s, t in CrossNode.topics())
    rust = processes.start("rust_node", [
        str(program), str(config), ACCOUNT, "2", topics, str(x.SCHEMA_ID), str(DELAY_NS),
        str(END_ORDER_ID), str(MARGIN_NS), str(out)])
    live.start_python()
    produce(live, 40, 40)
    live.send("GW1", order(END_ORDER_ID, 10))
    python = live.python
    assert python is not None
    deadline = time.monotonic() + 60
    while not python.past_the_end() or rust.poll() is None:
        assert time.monotonic() < deadline, f"the live consumers did not get past the end\n{processes.logs()}"
        assert rust.poll() in (None, 0), processes.logs()
        live.turn()
    assert rust.returncode == 0, processes.logs()
    sequencer.send_signal(signal.SIGTERM)
    assert processes.wait(sequencer, 10) == 0, processes.logs()

    # the recorded session: its archive, and the simulated bus started from its journal
    archive = tmp_path / "session.archive"
    archiver = JournalArchiver(tmp_path / "journal", archive, sess.schemas())
    archiver.catch_up()
    archiver.seal()
    offline = replay(CrossNode, Archive(archive), account=ACCOUNT)

    sim = Harness(seed=19, journal=tmp_path / "journal", loss_pct=10.0, dup_pct=2.0,
                  min_delay_ns=20_000, max_delay_ns=400_000, clock_tick_ns=2_000_000,
                  replay_packet=1472)
    simulated = sim.add(CrossNode, ACCOUNT, 1, start="rewind")
    sim.run(until=simulated.past_the_end, for_ns=10_000_000_000)
    assert sim.sim.net_stats()["dropped"] > 0, "the rewind went through a lossy network"
    assert sim.client(simulated).stats()["requests"] > 1

    ends = [r[1] for r in python.records if r[0] == RECORD_MESSAGE and r[3][2:6] == bytes(
        [x.NewOrder.TEMPLATE_ID, 0, x.SCHEMA_ID, 0]) and x.NewOrder.decode(r[3]).order_id == END_ORDER_ID]
    assert len(ends) == 1
    last = ends[0]
    consumers = {
        "rust node": read_rust_node(out),
        "python node": Outcome(python.records, python.fired, python.caught_up),
        "simulated bus": Outcome(simulated.records, simulated.fired, simulated.caught_up),
        "offline replay": Outcome(offline.records, offline.fired, offline.caught_up),
    }
    records, fired = consumers["python node"].upto(last)

    # the stream is what the check needs: fragments, admin commands for two accounts, idle
    # clock ticks, and consumers that rewound before going live
    journal = _core.verify_journal(str(tmp_path / "journal"))
    assert int(str(journal["next_sequence"])) > last
    big = [r for r in records if r[0] == RECORD_MESSAGE and len(r[3]) > 1472]
    assert len(big) >= 10, "fragmented messages handed out whole"
    admins = [bus.AdminCommand.decode(r[3]).target for r in records
              if r[0] == RECORD_MESSAGE and r[3][2:6] == bytes([bus.AdminCommand.TEMPLATE_ID, 0, 1, 0])]
    assert admins and set(admins) == {ACCOUNT}, "admin commands of its own account only"
    ticks = [r for r in records if r[0] == RECORD_TIME and r[2][26] == 2]
    assert len(ticks) >= 10, "idle clock ticks move time"
    assert any(f[2] in {t[1] for t in ticks} for f in fired), "timers fire on idle ticks"
    for name in ("rust node", "python node"):
        assert consumers[name].caught_up and min(consumers[name].caught_up) > 40, name

    for name, outcome in consumers.items():
        got_records, got_fired = outcome.upto(last)
        assert len(got_records) == len(records), name
        for a, b in zip(got_records, records):
            assert a == b, f"{name}: record {a[:2]} differs from the Python node's {b[:2]}"
        assert got_fired == fired, name
    assert len(fired) >= 50
