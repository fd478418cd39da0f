"""The quoter: one process joined to two buses, a market-data bus (where a feed publishes
``BookUpdate``) and an order bus (where the matching engine answers orders). On every book
update it joins the best bid with one lot on the order bus, and it counts the engine's answers
to its own orders.

Both buses carry the exchange schema here; each side is its own ``ExchangeNode`` subclass with
the handlers of its bus. They run on one thread (``seqbus.run_cross``), so they share the
quoter's state without locks. With ``merge="time"`` the two streams are interleaved by sequencer
time, deterministically: a hot backup of the quoter (same account, another instance) decides
exactly as the primary does, and the order bus's sequencer keeps the first copy of each order.

Run it: ``python -m examples.crossconnect.quoter md.toml orders.toml --account QUOTER``.
"""

from __future__ import annotations

import argparse
import hashlib
import struct
from collections.abc import Sequence

from seqbus import BusSpec, run_cross
from seqbus.runner import Start

from examples.exchange.messages import (
    BookSide,
    BookUpdateView,
    ExchangeNode,
    ExecInst,
    NewOrder,
    OrderAcceptedView,
    OrderRejectedView,
    Price,
    Side,
)

__all__ = ["MarketDataSide", "OrderSide", "Quoter", "main"]

CLIENT_ID = 77
_DECISION = struct.Struct("<QQq")


class MarketDataSide(ExchangeNode):
    """The quoter's node on the market-data bus."""

    def __init__(self, quoter: Quoter) -> None:
        super().__init__()
        self.quoter = quoter

    def on_book_update(self, msg: BookUpdateView, mine: bool) -> None:
        bids = [lvl.price.mantissa for lvl in msg.levels if lvl.side == BookSide.Bid]
        if bids:
            self.quoter.quote(msg.symbol.strip(), max(bids), msg.levels[0].price.exponent)


class OrderSide(ExchangeNode):
    """The quoter's node on the order bus."""

    def __init__(self, quoter: Quoter) -> None:
        super().__init__()
        self.quoter = quoter

    def on_order_accepted(self, msg: OrderAcceptedView, mine: bool) -> None:
        self.quoter.answered(msg.order_id, True)

    def on_order_rejected(self, msg: OrderRejectedView, mine: bool) -> None:
        self.quoter.answered(msg.order_id, False)


class Quoter:
    """The state both sides share, and what the quoter decides."""

    def __init__(self) -> None:
        self.md = MarketDataSide(self)
        self.orders = OrderSide(self)
        self.next_order_id = 1
        self.open: set[int] = set()
        self.accepted = 0
        self.rejected = 0
        #: a digest of every decision: (market-data sequence, order id, price)
        self.digest = hashlib.blake2b(digest_size=16)

    def quote(self, symbol: str, price: int, exponent: int) -> None:
        order_id = self.next_order_id
        self.next_order_id += 1
        self.open.add(order_id)
        self.digest.update(_DECISION.pack(self.md.sequence(), order_id, price))
        # sent on the other bus: the order side's client, in order, even under back-pressure
        self.orders.post(
            NewOrder(
                order_id=order_id,
                client_id=CLIENT_ID,
                symbol=symbol,
                side=Side.Buy,
                price=Price(mantissa=price, exponent=exponent),
                quantity=1,
                inst=ExecInst(0),
                account="quoter",
            )
        )

    def answered(self, order_id: int, accepted: bool) -> None:
        if order_id not in self.open:
            return  # another client's order
        self.open.discard(order_id)
        if accepted:
            self.accepted += 1
        else:
            self.rejected += 1

    def specs(
        self,
        md_config: str,
        orders_config: str,
        account: str,
        instance: int = 1,
        start: Start = "rewind",
    ) -> list[BusSpec]:
        return [
            BusSpec(self.md, md_config, account, instance, start),
            BusSpec(self.orders, orders_config, account, instance, start),
        ]


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("md_config", help="the market-data bus's configuration")
    p.add_argument("orders_config", help="the order bus's configuration")
    p.add_argument("--account", default="QUOTER")
    p.add_argument("--instance", type=int, default=1)
    args = p.parse_args(argv)
    q = Quoter()
    run_cross(
        q.specs(args.md_config, args.orders_config, args.account, args.instance), merge="time"
    )
    print(f"quotes {q.next_order_id - 1}, accepted {q.accepted}, rejected {q.rejected}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
