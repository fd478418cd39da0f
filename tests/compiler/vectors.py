"""The shared test vectors in schemas/vectors/: messages encoded by the Python codecs, with
their canonical JSON, read by both pytest (test_vectors.py) and cargo test
(rust/crates/codecs/tests/vectors.rs).

Canonical JSON: compact, keys in declaration order, enums by name, flags as integers, bytes
and byte[N] as lowercase hex, absent optionals as null. Regenerate after a deliberate change
with ``python -m tests.compiler.vectors`` (from the repository root).
"""

from __future__ import annotations

import enum
import json
import math
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent.parent
VECTORS = ROOT / "schemas" / "vectors"


def canonical(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: canonical(v) for k, v in value.items()}
    if isinstance(value, list):
        return [canonical(v) for v in value]
    if isinstance(value, enum.IntFlag):
        return int(value)
    if isinstance(value, enum.IntEnum):
        return value.name
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def canonical_json(d: dict[str, Any]) -> str:
    return json.dumps(canonical(d), ensure_ascii=False, separators=(",", ":"))


def samples() -> dict[str, list[Any]]:
    """package → messages, in the order their files are numbered."""
    from seqbus import bus
    import examples.exchange.messages as x
    import examples.pingpong.messages as pingpong

    px = x.Price
    return {
        "bus": [bus.ClockTick(), bus.SessionStart(session="2026-11-22"),
                bus.SenderState(next_command_seq=77, account="ME", instance=2, term=5, leader=3),
                bus.Epoch(term=5, leader=3, previous_leader=1)],
        "pingpong": [pingpong.Ping(id=1, sent_at_ns=1_700_000_000_000_000_000),
                     pingpong.Pong(id=2**64 - 1, ping_sent_at_ns=0)],
        "exchange": [
            x.NewOrder(
                order_id=42, client_id=7, symbol="AAPL", side=x.Side.Buy,
                price=px(mantissa=18_950, exponent=-2), quantity=100, stop_price=-1,
                inst=x.ExecInst.PostOnly | x.ExecInst.Hidden, expire_at=1_700_000_000,
                legs=[x.NewOrderLegs(symbol="MSFT", ratio=1, side=x.Side.Sell, fills=[
                    x.NewOrderLegsFills(qty=5, price=-(2**63)),
                    x.NewOrderLegsFills(qty=2**32 - 1, price=2**63 - 1)]),
                      x.NewOrderLegs(symbol="GOOGL", ratio=3, side=x.Side.Buy)],
                account="trader-1", memo=b"\x00\x01\xfe\xff"),
            x.NewOrder(order_id=0, client_id=0, symbol="", side=x.Side.Sell,
                       price=px(mantissa=0, exponent=0), quantity=0, inst=x.ExecInst(0)),
            x.NewOrder(order_id=1, client_id=2, symbol="A B", side=x.Side.Buy,
                       price=px(mantissa=-5, exponent=127), quantity=3, stop_price=0,
                       inst=x.ExecInst.Hidden, account='é"\\\n\t\x01 ✓', memo=b""),
            x.OrderAccepted(order_id=42, at=1_700_000_000_123_456_789),
            x.OrderRejected(order_id=43, at=5, reason=x.RejectReason.BadPrice,
                            text="price \"0\" is not allowed"),
            x.CancelOrder(order_id=42, client_id=7),
            x.OrderCancelled(order_id=42, at=6, cancelled_quantity=60),
            x.Trade(trade_id=9, symbol="AAPL", price=px(mantissa=18_950, exponent=-2),
                    quantity=40, buy_order_id=42, sell_order_id=41, aggressor=x.Side.Buy, at=7),
            x.BookUpdate(symbol="AAPL", at=8, levels=[
                x.BookUpdateLevels(side=x.BookSide.Bid, price=px(mantissa=18_950, exponent=-2),
                                   quantity=60, orders=1),
                x.BookUpdateLevels(side=x.BookSide.Ask, price=px(mantissa=18_951, exponent=-2),
                                   quantity=0, orders=0)]),
        ],
    }


def render() -> dict[str, bytes]:
    """Relative path under schemas/vectors → file content."""
    out: dict[str, bytes] = {}
    for package, messages in samples().items():
        counts: dict[str, int] = {}
        for msg in messages:
            name = type(msg).__name__
            counts[name] = counts.get(name, 0) + 1
            stem = f"{package}/{name}.{counts[name]}"
            data = msg.encode()
            out[f"{stem}.bin"] = data
            view = type(msg).decode(data)
            out[f"{stem}.json"] = (canonical_json(view.to_dict()) + "\n").encode()
    return out


def main() -> int:
    for rel, content in render().items():
        path = VECTORS / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)
        print(f"wrote schemas/vectors/{rel}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
