"""The order gateway: a seeded flow of orders and cancels from one client.

It stands for the clients of the exchange: it keeps at most ``IN_FLIGHT`` orders without an
answer, and checks that every order gets exactly one answer (``OrderAccepted`` or
``OrderRejected``) — the "no lost order" property. Its parameters come from the environment
when it runs as a process: ``EXCHANGE_ORDERS`` (how many), ``EXCHANGE_SEED``.
"""

from __future__ import annotations

import os
import random

from .messages import (
    CancelOrder,
    ExchangeNode,
    ExecInst,
    NewOrder,
    OrderAcceptedView,
    OrderCancelledView,
    OrderRejectedView,
    Price,
    RejectReason,
    Side,
    TradeView,
)

from .engine import PRICE_EXPONENT, SYMBOLS

__all__ = ["OrderGateway"]

IN_FLIGHT = 32


class OrderGateway(ExchangeNode):
    def __init__(self, orders: int | None = None, seed: int | None = None) -> None:
        super().__init__()
        self.total = (
            orders if orders is not None else int(os.environ.get("EXCHANGE_ORDERS", "1000"))
        )
        self.rng = random.Random(
            seed if seed is not None else int(os.environ.get("EXCHANGE_SEED", "1"))
        )
        self.client_id = 1
        #: orders kept in flight (without an answer) at most
        self.in_flight_limit = IN_FLIGHT
        self.sent = 0
        self.answers: dict[int, int] = {}
        self.accepted = 0
        self.rejected = 0
        self.cancelled = 0
        self.trades = 0
        self.open_ids: list[int] = []

    @property
    def done(self) -> bool:
        """Every order sent and answered."""
        return self.sent == self.total and len(self.answers) == self.total

    def lost(self) -> list[int]:
        """Orders sent that got no answer, or more than one."""
        ids = [self._order_id(n) for n in range(self.sent)]
        return [i for i in ids if self.answers.get(i) != 1]

    def on_opened(self) -> None:
        self.pump()

    def _order_id(self, n: int) -> int:
        return self.client_id * 1_000_000_000 + n

    def pump(self) -> None:
        rng = self.rng
        while self.sent < self.total and self.sent - len(self.answers) < self.in_flight_limit:
            if self.open_ids and rng.random() < 0.05:
                victim = self.open_ids.pop(rng.randrange(len(self.open_ids)))
                self.post(CancelOrder(order_id=victim, client_id=self.client_id))
            order_id = self._order_id(self.sent)
            expire = self.sequencer_time() + rng.randrange(1, 50) * 1_000_000
            self.post(
                NewOrder(
                    order_id=order_id,
                    client_id=self.client_id,
                    symbol=rng.choice(SYMBOLS),
                    side=rng.choice((Side.Buy, Side.Sell)),
                    price=Price(mantissa=10_000 + rng.randrange(-50, 51), exponent=PRICE_EXPONENT),
                    quantity=rng.randrange(1, 101),
                    inst=ExecInst(0),
                    expire_at=expire
                    if rng.random() < float(os.environ.get("EXCHANGE_EXPIRE", "0.1"))
                    else None,
                    account="demo",
                )
            )
            self.open_ids.append(order_id)
            self.sent += 1

    def _answer(self, order_id: int) -> None:
        if order_id // 1_000_000_000 == self.client_id:
            self.answers[order_id] = self.answers.get(order_id, 0) + 1
            self.pump()

    def on_order_accepted(self, msg: OrderAcceptedView, mine: bool) -> None:
        self.accepted += 1
        self._answer(msg.order_id)

    def on_order_rejected(self, msg: OrderRejectedView, mine: bool) -> None:
        if msg.reason == RejectReason.UnknownOrder:
            return  # the answer to a cancel of an order that had already gone
        self.rejected += 1
        self._answer(msg.order_id)

    def on_order_cancelled(self, msg: OrderCancelledView, mine: bool) -> None:
        self.cancelled += 1

    def on_trade(self, msg: TradeView, mine: bool) -> None:
        self.trades += 1
