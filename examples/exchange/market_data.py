"""The market data publisher: price levels rebuilt from the engine's output, published as
``BookUpdate`` messages for the levels that changed, every ``PUBLISH_NS`` of stream time.

A deterministic state machine like the engine: a replay publishes the same updates at the
same stream points.
"""

from __future__ import annotations

import hashlib
import struct

from .messages import (
    BookSide,
    BookUpdate,
    BookUpdateLevels,
    ExchangeNode,
    NewOrderView,
    OrderAcceptedView,
    OrderCancelledView,
    OrderRejectedView,
    Price,
    Side,
    TradeView,
)

from .engine import PRICE_EXPONENT, SYMBOLS

__all__ = ["MarketDataPublisher"]

PUBLISH_NS = 50_000_000

Level = tuple[str, BookSide, int]


class MarketDataPublisher(ExchangeNode):
    def __init__(self) -> None:
        super().__init__()
        # order id → (symbol, side, price, remaining); pending until accepted
        self.pending: dict[int, tuple[str, BookSide, int, int]] = {}
        self.resting: dict[int, tuple[str, BookSide, int, int]] = {}
        self.levels: dict[Level, list[int]] = {}  # → [quantity, orders]
        self.changed: set[Level] = set()
        self.published = 0

    def on_opened(self) -> None:
        self.set_timer_after(PUBLISH_NS, self._publish)

    def on_new_order(self, msg: NewOrderView, mine: bool) -> None:
        side = BookSide.Bid if msg.side == Side.Buy else BookSide.Ask
        self.pending[msg.order_id] = (msg.symbol.strip(), side, msg.price.mantissa, msg.quantity)

    def on_order_rejected(self, msg: OrderRejectedView, mine: bool) -> None:
        self.pending.pop(msg.order_id, None)

    def on_order_accepted(self, msg: OrderAcceptedView, mine: bool) -> None:
        entry = self.pending.pop(msg.order_id, None)
        if entry is None:
            return
        self.resting[msg.order_id] = entry
        symbol, side, price, qty = entry
        level = self.levels.setdefault((symbol, side, price), [0, 0])
        level[0] += qty
        level[1] += 1
        self.changed.add((symbol, side, price))

    def _reduce(self, order_id: int, qty: int) -> None:
        entry = self.resting.get(order_id)
        if entry is None:
            return
        symbol, side, price, remaining = entry
        key = (symbol, side, price)
        level = self.levels.setdefault(key, [0, 0])
        level[0] -= qty
        remaining -= qty
        if remaining <= 0:
            del self.resting[order_id]
            level[1] -= 1
        else:
            self.resting[order_id] = (symbol, side, price, remaining)
        self.changed.add(key)

    def on_trade(self, msg: TradeView, mine: bool) -> None:
        self._reduce(msg.buy_order_id, msg.quantity)
        self._reduce(msg.sell_order_id, msg.quantity)

    def on_order_cancelled(self, msg: OrderCancelledView, mine: bool) -> None:
        self._reduce(msg.order_id, msg.cancelled_quantity)

    def _publish(self) -> None:
        now = self.sequencer_time()
        by_symbol: dict[str, list[BookUpdateLevels]] = {}
        for key in sorted(self.changed):
            symbol, side, price = key
            qty, orders = self.levels.get(key, [0, 0])
            if orders <= 0:
                self.levels.pop(key, None)
            by_symbol.setdefault(symbol, []).append(
                BookUpdateLevels(
                    side=side,
                    price=Price(mantissa=price, exponent=PRICE_EXPONENT),
                    quantity=max(qty, 0),
                    orders=max(orders, 0),
                )
            )
        self.changed.clear()
        for symbol, levels in by_symbol.items():
            self.post(BookUpdate(symbol=symbol, at=now, levels=levels))
            self.published += 1
        self.set_timer(now + PUBLISH_NS, self._publish)

    def publish_book(self) -> None:
        """Publish the whole book now, one ``BookUpdate`` per symbol with every level it has
        (none for an empty book): a snapshot a late reader can start from."""
        now = self.sequencer_time()
        for symbol in SYMBOLS:
            levels = [
                BookUpdateLevels(
                    side=side,
                    price=Price(mantissa=price, exponent=PRICE_EXPONENT),
                    quantity=qty,
                    orders=orders,
                )
                for (sym, side, price), (qty, orders) in sorted(self.levels.items())
                if sym == symbol and orders > 0
            ]
            self.post(BookUpdate(symbol=symbol, at=now, levels=levels))
            self.published += 1

    def state_hash(self) -> str:
        h = hashlib.blake2b(digest_size=16)
        for (symbol, side, price), (qty, orders) in sorted(self.levels.items()):
            h.update(symbol.encode() + struct.pack("<BqqI", side, price, qty, orders))
        return h.hexdigest()
