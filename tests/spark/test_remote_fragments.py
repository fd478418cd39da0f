"""A streaming query over SoupBinTCP (docs/spark.md, "A live bus on another host") and a sender
that stops between the fragments of a body. One sender (DEAD) sends two of a body's three
fragments and is never heard of again; another (SLOW) sends the first of two, and its last only
after the query has gone past it and been killed. The query must not wait for either: it goes
on through the messages after them, its offsets name the open messages' fragments, and after a
restart from its checkpoint it hands out SLOW's body whole, once, at its last fragment's
sequence — and never DEAD's.

The commands go up as raw upstream datagrams (docs/upstream.md), so which records are
fragments, and where, is exact."""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from examples.pingpong.messages import Ping

from tests.archive import session as sess
from tests.archive.session import FIRST, LAST, MORE
from tests.conftest import Processes, seqbus_cli
from tests.transports.harness import tcp_listening, udp_bound, wait_for, write_config

pytestmark = [pytest.mark.slow]

HEADER = struct.Struct("<2sBB10s8sHHH")  # the upstream packet header (28 bytes)
BLOCK = struct.Struct("<QIBBH")  # a command block's header (16 bytes)
LIVE = 40  # whole Pings before SLOW's last fragment, and as many after it
DEAD_ID, SLOW_ID = 999_999, 777_777


class Upstream:
    """Commands as a node sends them, each account numbering its own from 1; one socket, so
    the sequencer takes them in the order sent."""

    def __init__(self, port: int, session: str) -> None:
        self.addr = ("127.0.0.1", port)
        self.session = session.encode().ljust(10)
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.next: dict[str, int] = {}

    def send(self, account: str, body: bytes, parts: list[tuple[int, bytes]]) -> None:
        blocks = b""
        for flags, part in parts:
            seq = self.next.get(account, 1)
            self.next[account] = seq + 1
            blocks += BLOCK.pack(seq, len(body), flags, 0, len(part)) + part
        head = HEADER.pack(b"SU", 1, 1, self.session, account.encode().ljust(8, b"\0"), 1,
                           len(parts), 0)
        self.sock.sendto(head + blocks, self.addr)

    def whole(self, account: str, body: bytes) -> None:
        self.send(account, body, [(0, body)])


def sequenced(port: int, live: int, timeout: float = 60.0) -> list[tuple[int, bytes]]:
    """The session's messages with their sequences, read over SoupBinTCP (nasdaq-protocols'
    client) from its start until ``live`` of them are LIVE's (the control messages of the
    sequencer among them)."""
    from nasdaq_protocols import soup

    out: list[tuple[int, bytes]] = []
    session = soup.connect(("127.0.0.1", port), "other", "x", "", 1)
    try:
        deadline = time.monotonic() + timeout
        while len(pings_of(out, b"LIVE")) < live and time.monotonic() < deadline:
            msg = session.receive()  # the sequencer's clock ticks keep it coming
            if isinstance(msg, soup.SequencedData):
                out.append((len(out) + 1, bytes(msg.data)))
    finally:
        session.logout()
    assert len(pings_of(out, b"LIVE")) == live, f"not {live} of LIVE's within {timeout} s"
    return out


def pings_of(msgs: list[tuple[int, bytes]], account: bytes) -> list[int]:
    return [seq for seq, m in msgs if m[16:24].rstrip(b"\0") == account]


def test_a_sender_that_stops_between_fragments_does_not_stall_a_remote_stream(
    spark: Any, tmp_path: Path, processes: Processes
) -> None:
    # a ClockTick a second, not the harness's 20: the queries read 7 records a batch, and the
    # ticks sequenced while a loaded machine runs the first query would outrun the second
    bus = write_config(tmp_path, "tcp", clock_tick_ms=1000)
    seq = processes.start("sequencer", [*seqbus_cli(), "sequencer", "-c", str(bus.path)])
    assert wait_for(lambda: tcp_listening(bus.tcp) and udp_bound(bus.upstream), 30), processes.logs()
    up = Upstream(bus.upstream, "TRANSPORT")

    dead = bytes(Ping(id=DEAD_ID, sent_at_ns=1).encode())
    slow = bytes(Ping(id=SLOW_ID, sent_at_ns=2).encode())
    up.send("DEAD", dead, [(FIRST, dead[:10]), (MORE, dead[10:20])])  # its last never comes
    up.send("SLOW", slow, [(FIRST, slow[:12])])
    for i in range(1, LIVE + 1):
        up.whole("LIVE", bytes(Ping(id=i, sent_at_ns=i).encode()))
    before = sequenced(bus.tcp, LIVE)
    assert len(pings_of(before, b"DEAD")) == 2 and len(pings_of(before, b"SLOW")) == 1

    schemas = sess.ir_files(tmp_path)
    out, ckpt = tmp_path / "pings", tmp_path / "ckpt"
    config = tmp_path / "job.json"

    def job(total: int) -> list[str]:
        config.write_text(json.dumps({
            "server": f"127.0.0.1:{bus.tcp}", "username": "other", "password": "x",
            "schemas": schemas, "max_records": 7, "out": str(out), "checkpoint": str(ckpt),
            "total": total, "timeout": 240}))
        return [sys.executable, str(Path(__file__).with_name("remote_stream_job.py")), str(config)]

    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1")
    # the first query: every Ping after the open messages, then it stops on its own
    first = processes.start("stream-1", job(LIVE), env=env)
    try:
        assert first.wait(timeout=300) == 0, processes.logs()
    except Exception:
        pytest.fail(f"the query did not get past the open messages\n{processes.logs()}")
    offsets = [json.loads(f.read_text().splitlines()[-1])
               for f in sorted((ckpt / "offsets").glob("[0-9]*"), key=lambda f: int(f.name))]
    dead_seqs, slow_first = pings_of(before, b"DEAD"), pings_of(before, b"SLOW")
    # the last offset names both open messages' fragments, for the batch that ends them
    assert offsets[-1]["open"] == sorted([dead_seqs, slow_first]), offsets[-1]

    # SLOW finishes its body; more Pings; the query restarts from its checkpoint
    up.send("SLOW", slow, [(LAST, slow[12:])])
    for i in range(LIVE + 1, 2 * LIVE + 1):
        up.whole("LIVE", bytes(Ping(id=i, sent_at_ns=i).encode()))
    after = sequenced(bus.tcp, 2 * LIVE)
    slow_seqs = pings_of(after, b"SLOW")
    second = processes.start("stream-2", job(2 * LIVE + 1), env=env)
    try:
        assert second.wait(timeout=300) == 0, processes.logs()
    except Exception:
        pytest.fail(f"the restarted query did not finish\n{processes.logs()}")

    # DEAD's message never ends: every offset from the first query's last on names it (one
    # that did not, as when the restarted driver planned a batch before its login had read
    # the open fragments, loses SLOW's first fragment and with it SLOW's body)
    restarted = [json.loads(f.read_text().splitlines()[-1])
                 for f in sorted((ckpt / "offsets").glob("[0-9]*"), key=lambda f: int(f.name))]
    for o in restarted[len(offsets) - 1:]:
        assert dead_seqs in o.get("open", []), (o, restarted)
    rows = spark.read.parquet(str(out)).orderBy("sequence").collect()
    got = [(r["sequence"], int(r["id"])) for r in rows]
    live = [(s, i) for i, s in enumerate(pings_of(after, b"LIVE"), 1)]
    # every Ping once; SLOW's whole at its last fragment's sequence; nothing of DEAD's
    assert got == sorted([*live, (slow_seqs[-1], SLOW_ID)]), got
    up.sock.close()
    processes.kill(seq, signal.SIGTERM)
