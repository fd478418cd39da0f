"""A sender that dies (or restarts) between the fragments of a body leaves them in the stream
without their last. Its account's next fragmented body starts with the first-fragment flag
(envelope flags 5): every reader of the archive — the tables, `archive cat`, offline replay,
verify — discards the abandoned fragments, hands the next body out whole, and verify names
the abandoned sequences as a warning, not as damage (docs/upstream.md "Fragments")."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from examples.exchange.messages import ExchangeNode, NewOrderView

from seqbus import _core
from seqbus.archive import Archive, ArchiveWriter, replay
from tests.archive import session as sess
from tests.archive.session import FIRST, LAST, MORE



class Orders(ExchangeNode):
    def __init__(self) -> None:
        super().__init__()
        self.orders: list[tuple[int, int, bytes]] = []

    def on_new_order(self, msg: NewOrderView, mine: bool) -> None:
        self.orders.append((self.sequence(), int(msg.order_id) - 1000, bytes(msg.memo)))


def order(i: int, memo: int) -> bytes:
    o = sess.new_order(i)
    o.memo = bytes((i + k) % 251 for k in range(memo))
    return bytes(o.encode())


def fragments(body: bytes, n: int) -> list[tuple[int, bytes]]:
    size = -(-len(body) // n)
    parts = [body[k * size:(k + 1) * size] for k in range(n)]
    return [(FIRST if k == 0 else LAST if k == n - 1 else MORE, p) for k, p in enumerate(parts)]


@dataclass
class Stream:
    records: list[bytes]
    #: sequences of the dead process's fragments, and of the next body's
    abandoned: list[int]
    chain: list[int]


@pytest.fixture(scope="module")
def stream() -> Stream:
    """GW sends a body in 4 fragments and dies after 2 of them; ME's messages go on; GW's
    next process sends another body in 3 fragments, interleaved with ME's, then a small one."""
    dead, second, small = order(1, 400), order(2, 300), order(3, 0)
    other = order(9, 0)
    records: list[bytes] = []
    cmd = {"GW": 0, "ME": 0}

    def put(account: str, flags: int, part: bytes, total: int) -> int:
        cmd[account] += 1
        env = sess.ENVELOPE.pack(sess.T0 + 1000 * len(records), cmd[account],
                                 account.encode().ljust(8, b"\0"), 1, 1, flags, total)
        records.append(env + part)
        return len(records)

    abandoned = [put("GW", f, p, len(dead)) for f, p in fragments(dead, 4)[:2]]
    cmd["GW"] += 2  # reserved by the dead process, never sequenced
    put("ME", 0, other, len(other))
    chain = []
    for f, p in fragments(second, 3):
        chain.append(put("GW", f, p, len(second)))
        put("ME", 0, other, len(other))
    put("GW", 0, small, len(small))
    return Stream(records, abandoned, chain)


@pytest.fixture(scope="module")
def path(tmp_path_factory: pytest.TempPathFactory, stream: Stream) -> Path:
    p = tmp_path_factory.mktemp("abandoned") / "a"
    with ArchiveWriter(p, "FRAG", sess.schemas(), segment_bytes=4096) as w:
        for i, m in enumerate(stream.records, 1):
            w.append(i, m)
    return p


def test_readers_hand_out_the_next_body_whole(path: Path, stream: Stream) -> None:
    a = Archive(path, on_problem="collect")
    t = a.table("NewOrder")
    gw = [(r["sequence"], int(r["order_id"]) - 1000, r["memo"]) for r in t.to_pylist()
          if int(r["order_id"]) != 1009]
    assert gw == [(stream.chain[-1], 2, bytes((2 + k) % 251 for k in range(300))),
                  (len(stream.records), 3, b"")]
    assert a.envelope_table().column("fragments").to_pylist().count(3) == 1
    assert a.problems == []
    cat = subprocess.run([sys.executable, "-m", "seqbus.cli", "archive", "cat", str(path)],
                         capture_output=True, text=True, timeout=120, check=False)
    assert cat.returncode == 0, cat.stderr


@pytest.mark.parametrize("start", ["all", "abandoned", "second"])
def test_offline_replay_agrees(path: Path, stream: Stream, start: str) -> None:
    """From the start, from the middle of the abandoned fragments, from the middle of the next
    body (the archive completes it): the body is handed out once, whole, at its last fragment."""
    lo = {"all": 1, "abandoned": stream.abandoned[1], "second": stream.chain[1]}[start]
    node = replay(Orders, Archive(path), account="AUDIT", seq_lo=lo)
    gw = [(s, i, m) for s, i, m in node.orders if i != 9]
    assert gw == [(stream.chain[-1], 2, bytes((2 + k) % 251 for k in range(300))),
                  (len(stream.records), 3, b"")]


def test_delivery_counts_the_abandoned_message(path: Path, stream: Stream) -> None:
    d = _core.Delivery("AUDIT", None)
    d.archive(str(path), 1, len(stream.records))
    s = d.stats()
    assert (s["abandoned"], s["abandoned_fragments"], s["malformed"]) == (1, 2, 0)


def test_verify_warns_and_names_the_sequences(path: Path, stream: Stream) -> None:
    abandoned, chain = stream.abandoned, stream.chain
    rep = Archive(path).verify()
    assert rep.ok, rep.problems
    assert (rep.abandoned_messages, rep.fragmented_messages) == (1, 1)
    [w] = rep.warnings
    assert w.sequence == abandoned[0]
    assert f"sequences {abandoned[0]}-{abandoned[1]}, 2 fragments" in w.message
    assert "account GW " in w.message and f"sequence {chain[0]} begins anew" in w.message
    cli = subprocess.run([sys.executable, "-m", "seqbus.cli", "archive", "verify", str(path)],
                         capture_output=True, text=True, timeout=120, check=False)
    assert cli.returncode == 0, cli.stdout + cli.stderr
    assert "warning:" in cli.stdout and "1 fragmented messages abandoned" in cli.stdout
