"""A synthetic exchange session for archive and Spark tests: the SPEC §3 NewOrder with every
field kind (nested groups, optionals present and absent, flags, unsigned extremes) among the
other exchange messages and the sequencer's control messages, with known expected contents."""

from __future__ import annotations

import hashlib
import json
import struct
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scripts.generate import idl, python_module

ROOT = Path(__file__).resolve().parents[2]
SEQC = Path(sys.executable).parent / "seqc"
T0 = 1_763_780_000_000_000_000  # ns since the epoch
ENVELOPE = struct.Struct("<QQ8sHBBI")
#: Envelope flags of a fragmented body (docs/upstream.md, "Fragments"): its first fragment,
#: each middle one, its last.
FIRST, MORE, LAST = 5, 1, 2


def ir_json(schema: str) -> str:
    return subprocess.run(
        [str(SEQC), "ir", "--json", str(idl(schema))],
        check=True, capture_output=True, text=True, cwd=ROOT, timeout=60,
    ).stdout


def ir_files(folder: Path, names: tuple[str, ...] = ("bus", "pingpong")) -> list[str]:
    """Each schema's IR written to ``folder/NAME.ir.json`` (what a remote Spark stream's
    ``schemas`` option names); their paths."""
    out = []
    for name in names:
        p = folder / f"{name}.ir.json"
        p.write_text(ir_json(name))
        out.append(str(p))
    return out


def schemas() -> list[tuple[int, str, str]]:
    out = []
    for name in ("bus", "exchange"):
        text = ir_json(name)
        out.append((json.loads(text)["schema_id"], name, text))
    return out


def envelope(ts: int, cmd: int, account: str, instance: int, body: bytes, kind: int = 1) -> bytes:
    return ENVELOPE.pack(ts, cmd, account.encode().ljust(8, b"\0"), instance, kind, 0, len(body))


@dataclass
class Msg:
    sequence: int
    timestamp_ns: int
    account: str
    instance: int
    command_seq: int
    type: str  # "exchange.NewOrder"
    body: bytes

    @property
    def message(self) -> bytes:
        kind = 2 if self.type.startswith("bus.") else 1
        return envelope(self.timestamp_ns, self.command_seq, self.account, self.instance,
                        self.body, kind) + self.body


def new_order(i: int) -> Any:
    import examples.exchange.messages as x

    legs = [
        x.NewOrderLegs(symbol=f"L{i % 7}", ratio=(i * 7 + k) % 65536, side=x.Side.Buy if k % 2 else x.Side.Sell,
                       fills=[x.NewOrderLegsFills(qty=(1 << 32) - 1 - j, price=-(1 << 63) + j) for j in range(k)])
        for k in range(i % 4)
    ]
    return x.NewOrder(
        order_id=(1 << 64) - 1 - i if i % 5 == 0 else 1000 + i,
        client_id=(1 << 32) - 1 if i % 3 == 0 else i,
        symbol=["AAPL", "MSFT", "ABCDEFGH", ""][i % 4],
        side=x.Side.Buy if i % 2 else x.Side.Sell,
        price=x.Price(mantissa=(i * 1234567) - 10**9, exponent=-(i % 8)),
        quantity=i * 10 + 1,
        stop_price=None if i % 2 else (-(1 << 63) if i % 4 == 0 else (1 << 63) - 1),
        inst=[x.ExecInst(0), x.ExecInst.PostOnly, x.ExecInst.Hidden,
              x.ExecInst.PostOnly | x.ExecInst.Hidden][i % 4],
        expire_at=None if i % 3 == 1 else (1 << 64) - 1 - i,
        legs=legs,
        account="" if i % 6 == 0 else f"acct-{i}-é",
        memo=bytes(range(i % 9)),
    )


def build(n_orders: int = 200) -> list[Msg]:
    """The session's messages in sequence order, starting at sequence 1."""
    from seqbus import bus
    import examples.exchange.messages as x

    out: list[Msg] = []
    ts = T0
    cmd = {"GW": 0, "ME": 0, "MD": 0}

    def add(account: str, instance: int, typ: str, body: bytes, control: bool = False) -> None:
        nonlocal ts
        ts += 1000 + len(out) % 7
        c = 0
        if not control:
            cmd[account] += 1
            c = cmd[account]
        out.append(Msg(len(out) + 1, ts, "SEQUENCR" if control else account,
                       0 if control else instance, c, typ, body))

    add("", 0, "bus.SessionStart", bus.SessionStart(session="TEST").encode(), control=True)
    for i in range(n_orders):
        add("GW", 1 + i % 2, "exchange.NewOrder", new_order(i).encode())
        oid = new_order(i).order_id
        if i % 10 == 9:
            add("ME", 1, "exchange.OrderRejected", x.OrderRejected(
                order_id=oid, at=ts, reason=x.RejectReason.BadPrice, text="price band").encode())
            continue
        add("ME", 1, "exchange.OrderAccepted", x.OrderAccepted(order_id=oid, at=ts).encode())
        if i % 3 == 0:
            add("ME", 1, "exchange.Trade", x.Trade(
                trade_id=i, symbol="AAPL", price=x.Price(mantissa=i, exponent=-2), quantity=5,
                buy_order_id=oid, sell_order_id=oid ^ 1, aggressor=x.Side.Buy, at=ts).encode())
            add("MD", 1, "exchange.BookUpdate", x.BookUpdate(symbol="AAPL", at=ts, levels=[
                x.BookUpdateLevels(side=x.BookSide.Bid, price=x.Price(mantissa=i, exponent=-2),
                                   quantity=(1 << 64) - 1, orders=3)]).encode())
        if i % 25 == 0:
            add("", 0, "bus.ClockTick", bus.ClockTick().encode(), control=True)
    return out


def write(path: Path, msgs: list[Msg], segment_bytes: int = 16384) -> Path:
    from seqbus.archive import ArchiveWriter

    with ArchiveWriter(path, "TEST", schemas(), segment_bytes=segment_bytes) as w:
        for m in msgs:
            w.append(m.sequence, m.message)
    return path


def plain(v: Any) -> Any:
    """A decoded value as plain data comparable with a row of a typed table."""
    import enum
    from decimal import Decimal

    if isinstance(v, enum.IntFlag):
        return [f.name for f in type(v) if f & v and f.name]  # bit order
    if isinstance(v, enum.IntEnum):
        return v.name
    if isinstance(v, dict):
        return {k: plain(w) for k, w in v.items()}
    if isinstance(v, (list, tuple)):
        return [plain(w) for w in v]
    if isinstance(v, memoryview):
        return bytes(v)
    if isinstance(v, Decimal):
        return int(v)
    return v


def expected_rows(msgs: list[Msg], typ: str) -> Iterator[dict[str, Any]]:
    """What the generated codec (the nodes' own decoder) reads from each message of ``typ``."""
    import importlib

    pkg, name = typ.split(".")
    mod = importlib.import_module(python_module(pkg))
    cls = getattr(mod, name)
    for m in msgs:
        if m.type == typ:
            yield plain(cls.decode(m.body).to_dict())


def row_hash(rows: list[dict[str, Any]]) -> str:
    h = hashlib.sha256()
    for r in rows:
        h.update(repr(sorted(r.items())).encode())
    return h.hexdigest()


@dataclass
class Fragmented:
    """A session whose large messages are sent in fragments, as seqbus-core sends them: the
    records as stored (sequence, message) and the messages the nodes receive (one per whole
    message, at its last fragment's sequence and time)."""

    records: list[tuple[int, bytes]]
    messages: list[Msg]
    #: fragments per message, by the message's sequence
    fragments: dict[int, int]


def build_fragmented(n: int = 300, max_fragment: int = 96, seed: int = 5) -> Fragmented:
    """``n`` rounds in which a gateway sends NewOrders (some with a large memo), market data
    sends BookUpdates (some with many levels) and the engine answers, the fragments of the
    gateway's and market data's large messages interleaved with each other and with the
    engine's; a control message now and then. Bodies above ``max_fragment`` bytes go out in
    fragments of at most that size (envelope flags 1 = more follow, 2 = last; every fragment
    carries the whole body's length and its own command sequence)."""
    import random

    import examples.exchange.messages as x
    from seqbus import bus

    rnd = random.Random(seed)
    records: list[tuple[int, bytes]] = []
    messages: list[Msg] = []
    fragments: dict[int, int] = {}
    ts = T0
    cmd = {"GW": 0, "MD": 0, "ME": 0}
    #: per sender, the records still to send of the message it is sending
    queue: dict[str, list[tuple[int, bytes, str, bytes, int]]] = {"GW": [], "MD": [], "ME": []}

    def emit(account: str, instance: int, typ: str, body: bytes) -> None:
        parts = [body[i:i + max_fragment] for i in range(0, len(body), max_fragment)] or [b""]
        for k, part in enumerate(parts):
            cmd[account] += 1
            flags = 0 if len(parts) == 1 else (2 if k == len(parts) - 1 else 1)
            queue[account].append((flags, part, typ, body, instance))

    def sequence_one(account: str) -> None:
        nonlocal ts
        flags, part, typ, body, instance = queue[account].pop(0)
        ts += 1000 + len(records) % 5
        seq = len(records) + 1
        c = cmd[account] - len(queue[account])
        env = ENVELOPE.pack(ts, c, account.encode().ljust(8, b"\0"), instance, 1, flags, len(body))
        records.append((seq, env + part))
        if flags == 1:
            pending[account] = pending.get(account, 0) + 1
        else:
            messages.append(Msg(seq, ts, account, instance, c, typ, body))
            fragments[seq] = pending.pop(account, 0) + 1

    def control(body: bytes, typ: str) -> None:
        nonlocal ts
        ts += 1000
        seq = len(records) + 1
        records.append((seq, envelope(ts, 0, "SEQUENCR", 0, body, kind=2) + body))
        messages.append(Msg(seq, ts, "SEQUENCR", 0, 0, typ, body))
        fragments[seq] = 1

    pending: dict[str, int] = {}
    control(bus.SessionStart(session="FRAG").encode(), "bus.SessionStart")
    for i in range(n):
        order = new_order(i)
        if i % 3 == 0:
            order.memo = bytes(rnd.randrange(256) for _ in range(rnd.randrange(150, 700)))
        emit("GW", 1, "exchange.NewOrder", order.encode())
        levels = [x.BookUpdateLevels(side=x.BookSide.Bid if k % 2 else x.BookSide.Ask,
                                     price=x.Price(mantissa=i * 10 + k, exponent=-2),
                                     quantity=k + 1, orders=k % 7)
                  for k in range(rnd.choice([1, 2, 9, 20, 40]))]
        emit("MD", 1, "exchange.BookUpdate",
             x.BookUpdate(symbol="AAPL", at=ts, levels=levels).encode())
        emit("ME", 1, "exchange.OrderAccepted",
             x.OrderAccepted(order_id=order.order_id, at=ts).encode())
        # the sequencer interleaves whatever the senders have in flight
        while any(queue.values()):
            account = rnd.choice([a for a, q in queue.items() if q])
            sequence_one(account)
        if i % 50 == 49:
            control(bus.ClockTick().encode(), "bus.ClockTick")
    return Fragmented(records, messages, fragments)


def write_records(path: Path, records: list[tuple[int, bytes]], segment_bytes: int,
                  schemas_: list[tuple[int, str, str]] | None = None) -> Path:
    from seqbus.archive import ArchiveWriter

    with ArchiveWriter(path, "FRAG", schemas() if schemas_ is None else schemas_,
                       segment_bytes=segment_bytes) as w:
        for seq, m in records:
            w.append(seq, m)
    return path


def crossing(path: Path, records: list[tuple[int, bytes]] | None = None) -> int:
    """Fragmented messages of the archive at ``path`` whose fragments lie in more than one
    segment (from ``records`` as written, or from the archive's raw table)."""
    import bisect
    import json as _json

    manifest = _json.loads((path / "archive.json").read_text())
    starts = sorted(s["first_sequence"] for s in manifest["segments"])
    if records is not None:
        items = [(seq, m[27], m[16:24]) for seq, m in records]
    else:
        from seqbus.archive import Archive

        t = Archive(path).raw_table().select(["sequence", "flags", "account"])
        items = list(zip(t.column("sequence").to_pylist(), t.column("flags").to_pylist(),
                         t.column("account").to_pylist(), strict=True))
    first: dict[Any, int] = {}
    n = 0
    for seq, flags, account in items:
        if flags & MORE:  # a first fragment (FIRST | MORE) or a middle one
            first.setdefault(account, seq)
        elif flags & LAST:
            if bisect.bisect_right(starts, first.pop(account, seq)) != bisect.bisect_right(starts, seq):
                n += 1
    return n
