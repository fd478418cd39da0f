"""The matching engine: one limit order book per symbol, price-time priority.

Deterministic: the engine's state and output depend only on the messages of the stream, their
order and their sequencer timestamps. It never reads the machine's clock; orders with
``expire_at`` are cancelled by a deterministic timer, which fires at the same stream point in
every replay. Everything it sends goes through ``post`` so its commands keep their order under
back-pressure; a hot backup sends the same commands and the sequencer keeps the first copy.

Admin commands (``seqbus admin command ME halt AAPL "news pending"``): ``halt`` and ``resume``
trading of one symbol or the whole market (``*``), ``book`` shows a symbol's top of book. They
are sequenced like orders, so every instance halts at the same point of the stream; while
halted, new orders are rejected with ``MarketClosed`` and the reason (cancels still work).
"""

from __future__ import annotations

import hashlib
import struct
from bisect import bisect_left, insort
from collections import deque
from dataclasses import dataclass

from seqbus import AdminError, admin_command

from .messages import (
    CancelOrderView,
    ExchangeNode,
    ExecInst,
    NewOrderView,
    OrderAccepted,
    OrderCancelled,
    OrderRejected,
    Price,
    RejectReason,
    Side,
    Trade,
)

__all__ = ["ALL_SYMBOLS", "PRICE_EXPONENT", "SYMBOLS", "Book", "MatchingEngine", "Order"]

#: Instruments the engine trades.
SYMBOLS = ("AAPL", "MSFT", "GOOG", "AMZN")
#: Prices are integers of 10**PRICE_EXPONENT (cents).
PRICE_EXPONENT = -2
#: What ``halt``/``resume`` take for the whole market.
ALL_SYMBOLS = "*"

_STATE = struct.Struct("<QIBqI")


@dataclass
class Order:
    order_id: int
    client_id: int
    side: Side
    price: int
    remaining: int


class Book:
    """One symbol's resting orders: price levels in price order, FIFO within a level."""

    def __init__(self) -> None:
        self.levels: dict[Side, dict[int, deque[Order]]] = {Side.Buy: {}, Side.Sell: {}}
        # ascending prices; the best bid is the last, the best ask the first
        self.prices: dict[Side, list[int]] = {Side.Buy: [], Side.Sell: []}

    def best(self, side: Side) -> int | None:
        prices = self.prices[side]
        if not prices:
            return None
        return prices[-1] if side == Side.Buy else prices[0]

    def add(self, order: Order) -> None:
        level = self.levels[order.side].get(order.price)
        if level is None:
            level = self.levels[order.side][order.price] = deque()
            insort(self.prices[order.side], order.price)
        level.append(order)

    def remove(self, order: Order) -> None:
        level = self.levels[order.side][order.price]
        level.remove(order)
        if not level:
            self._drop_level(order.side, order.price)

    def _drop_level(self, side: Side, price: int) -> None:
        del self.levels[side][price]
        prices = self.prices[side]
        del prices[bisect_left(prices, price)]

    def pop_filled(self, side: Side, price: int) -> None:
        level = self.levels[side][price]
        level.popleft()
        if not level:
            self._drop_level(side, price)


class MatchingEngine(ExchangeNode):
    """Accepts, matches and cancels orders; answers every NewOrder and CancelOrder."""

    def __init__(self) -> None:
        super().__init__()
        self.books = {symbol: Book() for symbol in SYMBOLS}
        self.orders: dict[int, tuple[str, Order]] = {}
        self.seen_ids: set[int] = set()
        self.next_trade_id = 1
        self.trades = 0
        self.handled = 0
        #: Halted trading: symbol (or ALL_SYMBOLS) -> reason. Part of the state hash.
        self.halted: dict[str, str] = {}

    # -- handlers --------------------------------------------------------------------------

    def on_new_order(self, msg: NewOrderView, mine: bool) -> None:
        self.handled += 1
        now = self.sequencer_time()
        order_id = msg.order_id
        symbol = msg.symbol.strip()
        reason = self._check(msg, symbol)
        if reason is not None:
            self.post(OrderRejected(order_id=order_id, at=now, reason=reason, text=reason.name))
            return
        halt = self.halted.get(ALL_SYMBOLS, self.halted.get(symbol))
        if halt is not None:
            self.post(
                OrderRejected(
                    order_id=order_id, at=now, reason=RejectReason.MarketClosed, text=halt
                )
            )
            return
        self.seen_ids.add(order_id)
        order = Order(order_id, msg.client_id, msg.side, msg.price.mantissa, msg.quantity)
        book = self.books[symbol]
        if ExecInst.PostOnly in msg.inst and self._crosses(book, order):
            self.post(
                OrderRejected(
                    order_id=order_id, at=now, reason=RejectReason.BadPrice, text="would cross"
                )
            )
            return
        self.post(OrderAccepted(order_id=order_id, at=now))
        self._match(symbol, book, order, now)
        if order.remaining:
            book.add(order)
            self.orders[order_id] = (symbol, order)
            expire_at = msg.expire_at
            if expire_at is not None:
                self.set_timer(expire_at, lambda: self._expire(order_id))

    def on_cancel_order(self, msg: CancelOrderView, mine: bool) -> None:
        self.handled += 1
        now = self.sequencer_time()
        entry = self.orders.get(msg.order_id)
        if entry is None or entry[1].client_id != msg.client_id:
            self.post(
                OrderRejected(
                    order_id=msg.order_id,
                    at=now,
                    reason=RejectReason.UnknownOrder,
                    text="no such resting order",
                )
            )
            return
        self._cancel(msg.order_id, now)

    # -- admin commands (seqbus admin command ME NAME ARGS...) ------------------------------

    @admin_command(help="stop accepting new orders for SYMBOL, or for every symbol with *")
    def halt(self, symbol: str = ALL_SYMBOLS, reason: str = "halted by the operator") -> str:
        symbol = self._admin_symbol(symbol)
        if not reason.strip():
            raise AdminError("the reason must not be empty")
        self.halted[symbol] = reason
        what = "every symbol" if symbol == ALL_SYMBOLS else symbol
        return f"halted {what} at #{self.sequence()}: {reason}"

    @admin_command(help="accept new orders again for SYMBOL, or lift every halt with *")
    def resume(self, symbol: str = ALL_SYMBOLS) -> str:
        symbol = self._admin_symbol(symbol)
        if symbol == ALL_SYMBOLS:
            lifted = sorted(self.halted)
            self.halted.clear()
        else:
            lifted = [symbol] if self.halted.pop(symbol, None) is not None else []
        if not lifted:
            return f"{symbol} was not halted"
        still = f" ({ALL_SYMBOLS} still halted)" if ALL_SYMBOLS in self.halted else ""
        return f"resumed {', '.join(lifted)} at #{self.sequence()}{still}"

    @admin_command(help="top of SYMBOL's book: best bid and ask, levels and resting orders")
    def book(self, symbol: str) -> str:
        symbol = self._admin_symbol(symbol)
        if symbol == ALL_SYMBOLS:
            raise AdminError("book takes one symbol")
        book = self.books[symbol]
        parts = [symbol]
        for side in (Side.Buy, Side.Sell):
            best = book.best(side)
            if best is None:
                parts.append(f"{side.name.lower()} -")
                continue
            level = book.levels[side][best]
            qty = sum(o.remaining for o in level)
            parts.append(
                f"{side.name.lower()} {qty}@{best / 10**-PRICE_EXPONENT:.2f} "
                f"({len(book.prices[side])} levels)"
            )
        if symbol in self.halted or ALL_SYMBOLS in self.halted:
            parts.append("HALTED")
        return " | ".join(parts)

    def _admin_symbol(self, symbol: str) -> str:
        symbol = symbol.strip().upper()
        if symbol != ALL_SYMBOLS and symbol not in self.books:
            raise AdminError(f"unknown symbol {symbol!r}; known: {', '.join(SYMBOLS)}")
        return symbol

    # -- state -----------------------------------------------------------------------------

    def state_hash(self) -> str:
        """A digest of the books (every resting order in priority order) and the counters."""
        h = hashlib.blake2b(digest_size=16)
        for symbol in SYMBOLS:
            book = self.books[symbol]
            h.update(symbol.encode())
            for side in (Side.Buy, Side.Sell):
                for price in book.prices[side]:
                    for o in book.levels[side][price]:
                        h.update(_STATE.pack(o.order_id, o.client_id, o.side, o.price, o.remaining))
        h.update(struct.pack("<QQ", self.next_trade_id, len(self.seen_ids)))
        for symbol, reason in sorted(self.halted.items()):
            h.update(b"halt\0" + symbol.encode() + b"\0" + reason.encode() + b"\0")
        return h.hexdigest()

    # -- internals -------------------------------------------------------------------------

    def _check(self, msg: NewOrderView, symbol: str) -> RejectReason | None:
        if msg.order_id in self.seen_ids:
            return RejectReason.DuplicateOrderId
        if symbol not in self.books:
            return RejectReason.UnknownSymbol
        price = msg.price
        if price.exponent != PRICE_EXPONENT or price.mantissa <= 0:
            return RejectReason.BadPrice
        if msg.quantity <= 0:
            return RejectReason.BadQuantity
        return None

    @staticmethod
    def _crosses(book: Book, order: Order) -> bool:
        if order.side == Side.Buy:
            ask = book.best(Side.Sell)
            return ask is not None and ask <= order.price
        bid = book.best(Side.Buy)
        return bid is not None and bid >= order.price

    def _match(self, symbol: str, book: Book, order: Order, now: int) -> None:
        other = Side.Sell if order.side == Side.Buy else Side.Buy
        while order.remaining and self._crosses(book, order):
            best = book.best(other)
            assert best is not None
            resting = book.levels[other][best][0]
            qty = min(order.remaining, resting.remaining)
            buy, sell = (order, resting) if order.side == Side.Buy else (resting, order)
            self.post(
                Trade(
                    trade_id=self.next_trade_id,
                    symbol=symbol,
                    price=Price(mantissa=best, exponent=PRICE_EXPONENT),
                    quantity=qty,
                    buy_order_id=buy.order_id,
                    sell_order_id=sell.order_id,
                    aggressor=order.side,
                    at=now,
                )
            )
            self.next_trade_id += 1
            self.trades += 1
            order.remaining -= qty
            resting.remaining -= qty
            if not resting.remaining:
                book.pop_filled(other, best)
                del self.orders[resting.order_id]

    def _cancel(self, order_id: int, now: int) -> None:
        symbol, order = self.orders.pop(order_id)
        self.books[symbol].remove(order)
        self.post(OrderCancelled(order_id=order_id, at=now, cancelled_quantity=order.remaining))

    def _expire(self, order_id: int) -> None:
        if order_id in self.orders:
            self._cancel(order_id, self.sequencer_time())
