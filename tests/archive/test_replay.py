"""Offline replay: handlers, clock, deterministic timers and `mine` as live."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

from examples.exchange.messages import ExchangeNode, NewOrderView, OrderAcceptedView

from seqbus.archive import Archive, replay
from tests.archive import session as sess


class Auditor(ExchangeNode):
    """Counts orders, notes the sequencer time of each, and fires a timer 5 µs after each
    accept: timers must fire at stream points, in replay as live."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[int, int, int, bool]] = []
        self.fired: list[tuple[int, int]] = []
        self.rewound_at: int | None = None

    def on_new_order(self, msg: NewOrderView, mine: bool) -> None:
        self.seen.append((self.sequence(), self.sequencer_time(), int(msg.order_id), mine))

    def on_order_accepted(self, msg: OrderAcceptedView, mine: bool) -> None:
        due = self.sequencer_time() + 5000
        self.set_timer(due, lambda due=due: self.fired.append((due, self.sequencer_time())))

    def on_rewound(self) -> None:
        self.rewound_at = len(self.seen)


def test_replay_runs_handlers_clock_and_timers(archive_path: Path, messages: list[sess.Msg]) -> None:
    node = replay(Auditor, Archive(archive_path), account="GW", instance=1)
    orders = [m for m in messages if m.type == "exchange.NewOrder"]
    assert [(s, t) for s, t, _, _ in node.seen] == [(m.sequence, m.timestamp_ns) for m in orders]
    assert [mine for *_, mine in node.seen] == [True] * len(orders)  # GW sent them all
    # What a live node of this class sees (docs/sdk.md, "Topic filtering"): the messages it
    # handles, and of the others each one whose time enters a new millisecond since the
    # previous message — its timers fire before the first of those at or past their deadline.
    seen: list[int] = []
    last_ms = -1
    for m in messages:
        ms = m.timestamp_ns // 1_000_000
        if m.type in ("exchange.NewOrder", "exchange.OrderAccepted") or ms > last_ms:
            seen.append(m.timestamp_ns)
        last_ms = max(last_ms, ms)
    accepts = [m for m in messages if m.type == "exchange.OrderAccepted"]
    due = [m.timestamp_ns + 5000 for m in accepts if m.timestamp_ns + 5000 <= seen[-1]]
    assert len(due) == len(accepts) - 1  # the stream ends before the last one is due
    assert [d for d, _ in node.fired] == due
    for due, at in node.fired:
        assert at == min(t for t in seen if t >= due)
    assert node.rewound_at == len(orders)


def test_replay_is_deterministic_and_bounded(archive_path: Path) -> None:
    a = replay(Auditor, Archive(archive_path), seq_hi=200)
    b = replay(Auditor, Archive(archive_path), seq_hi=200)
    assert a.seen == b.seen and a.fired == b.fired
    assert all(s <= 200 for s, *_ in a.seen) and not any(m for *_, m in a.seen)


def test_cli_cat_verify_export(archive_path: Path, capsys: Any, tmp_path: Path) -> None:
    import json

    from seqbus.cli import main

    assert main(["archive", "cat", str(archive_path), "--type", "OrderRejected", "--json"]) == 0
    lines = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert len(lines) == 20 and all(x["type"] == "exchange.OrderRejected" for x in lines)
    assert lines[0]["fields"]["reason"] == "BadPrice"
    assert main(["archive", "cat", str(archive_path), "--node", "GW:2", "--from", "1", "--to", "40"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out and all(" GW:2 " in x and "exchange.NewOrder order_id=" in x for x in out)
    assert main(["archive", "verify", str(archive_path)]) == 0
    assert capsys.readouterr().out.startswith("OK:")
    assert main(["archive", "export", str(archive_path), str(tmp_path / "pq")]) == 0
    import pyarrow.parquet as pq

    assert pq.read_table(tmp_path / "pq" / "exchange.NewOrder").num_rows == 200
    assert main(["archive", "ls", str(archive_path.parent)]) == 0
    assert "sealed" in capsys.readouterr().out
    # a segment's index gone: ls names it and exits 1 (it raised FileNotFoundError)
    from seqbus.archive import Archive

    idx = Path(Archive(archive_path).segments()[0].idx)
    idx.unlink()
    assert main(["archive", "ls", str(archive_path.parent)]) == 1
    assert f"MISSING {idx.name}" in capsys.readouterr().out


def test_replay_routes_admin_commands_as_live(tmp_path: Path) -> None:
    """An engine replayed under its account runs the operator's halt at its stream point (its
    topics do not list AdminCommand: it is routed by account, as live); another account's
    command never reaches it."""
    from seqbus import bus
    import examples.exchange.messages as x

    from examples.exchange.engine import MatchingEngine

    msgs: list[sess.Msg] = []

    def add(account: str, typ: str, body: bytes) -> None:
        n = len(msgs) + 1
        msgs.append(sess.Msg(n, sess.T0 + n * 1000, account, 1, n, typ, body))

    def order(i: int) -> bytes:
        return x.NewOrder(order_id=i, client_id=1, symbol="AAPL", side=x.Side.Buy,
                          price=x.Price(mantissa=100, exponent=-2), quantity=1,
                          inst=x.ExecInst(0), account="a").encode()

    def admin(target: str, name: str, *args: str) -> bytes:
        return bus.AdminCommand(target=target, request_id=len(msgs), name=name,
                                args=[bus.AdminCommandArgs(value=a) for a in args]).encode()

    add("GW", "exchange.NewOrder", order(1))
    add("OPS", "bus.AdminCommand", admin("MD", "halt"))  # another account's: not for it
    add("GW", "exchange.NewOrder", order(2))
    add("OPS", "bus.AdminCommand", admin("ME", "halt", "AAPL", "news pending"))
    add("GW", "exchange.NewOrder", order(3))
    path = tmp_path / "admin.archive"
    from seqbus.archive import ArchiveWriter

    with ArchiveWriter(path, "TEST", sess.schemas()) as w:
        for m in msgs:
            envelope = sess.envelope(m.timestamp_ns, m.command_seq, m.account, 1, m.body, 1)
            w.append(m.sequence, envelope + m.body)
    engine = replay(MatchingEngine, Archive(path), account="ME", instance=1)
    assert engine.halted == {"AAPL": "news pending"}
    assert engine.stats.admin_commands == 1
    sent = engine._client.sent  # type: ignore[union-attr]
    ids = [struct.unpack_from("<HH", b, 2) for b in sent]  # (template, schema)
    reply = (bus.AdminReply.TEMPLATE_ID, 1)
    accepted = (x.OrderAccepted.TEMPLATE_ID, x.OrderAccepted.SCHEMA_ID)
    rejected = (x.OrderRejected.TEMPLATE_ID, x.OrderRejected.SCHEMA_ID)
    # orders 1 and 2 accepted, the halt answered, order 3 rejected: market closed
    assert ids == [accepted, accepted, reply, rejected]
    assert x.decode(sent[3]).reason == x.RejectReason.MarketClosed
