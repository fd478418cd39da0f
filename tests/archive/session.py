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


def ir_json(schema: str) -> str:
    return subprocess.run(
        [str(SEQC), "ir", "--json", str(idl(schema))],
        check=True, capture_output=True, text=True, cwd=ROOT, timeout=60,
    ).stdout


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
