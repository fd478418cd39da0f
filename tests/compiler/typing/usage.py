"""User code of the generated exchange package: must pass mypy --strict.

Each ``reveal_type`` line says what mypy must reveal in its trailing comment.
"""

from __future__ import annotations

import mmap
from typing import reveal_type

import examples.exchange.messages as exchange
from examples.exchange.messages import (
    ExchangeNode,
    ExecInst,
    NewOrder,
    NewOrderBuilder,
    NewOrderLegs,
    NewOrderLegsFills,
    NewOrderView,
    Price,
    Side,
)


class Engine(ExchangeNode):
    def on_new_order(self, msg: NewOrderView, mine: bool) -> None:
        reveal_type(msg.order_id)  # revealed: builtins.int
        reveal_type(msg.symbol)  # revealed: builtins.str
        reveal_type(msg.stop_price)  # revealed: builtins.int | None
        reveal_type(msg.side)  # revealed: examples.exchange.messages._codec.Side
        reveal_type(msg.price)  # revealed: examples.exchange.messages._codec.Price
        reveal_type(msg.inst)  # revealed: examples.exchange.messages._codec.ExecInst
        reveal_type(msg.memo)  # revealed: builtins.memoryview[builtins.int]
        reveal_type(msg.legs)  # revealed: examples.exchange.messages._codec.NewOrderLegsGroup
        for leg in msg.legs:
            reveal_type(leg)  # revealed: examples.exchange.messages._codec.NewOrderLegsView
            reveal_type(leg.fills[0].price)  # revealed: builtins.int
        self.send(exchange.OrderAccepted(order_id=msg.order_id, at=self.sequencer_time()))
        # send and post take a message or an encoded body (bytes-like), as at run time
        body = msg.to_value().encode()
        self.post(msg.to_value())
        self.post(bytearray(body))
        reveal_type(self.send(memoryview(body)))  # revealed: builtins.int
        reveal_type(self.send_order_accepted(order_id=msg.order_id, at=1))  # revealed: builtins.int
        for fresh in list(msg.legs):
            reveal_type(fresh.symbol)  # revealed: builtins.str

    def on_cancel_order(self, msg: exchange.CancelOrderView, mine: bool) -> None:
        reveal_type(msg.to_dict())  # revealed: builtins.dict[builtins.str, Any]


order = NewOrder(
    order_id=1, client_id=2, symbol="AAPL", side=Side.Buy,
    price=Price(mantissa=100, exponent=-2), quantity=10, inst=ExecInst.PostOnly,
    legs=[NewOrderLegs(symbol="X", ratio=1, side=Side.Sell,
                       fills=[NewOrderLegsFills(qty=1, price=2)])],
)
data = order.encode()
reveal_type(NewOrder.encode_fields(  # revealed: builtins.bytes
    order_id=1, client_id=2, symbol="AAPL", side=1, price=(100, -2), quantity=10, inst=1,
    legs=[("X", 1, Side.Sell, [(1, 2)]), {"symbol": "Y", "ratio": 2, "side": 2}]))
reveal_type(NewOrder(**order.to_dict()).legs[0])  # revealed: examples.exchange.messages._codec.NewOrderLegs
reveal_type(data)  # revealed: builtins.bytes
reveal_type(NewOrder.decode(data))  # revealed: examples.exchange.messages._codec.NewOrderView
reveal_type(NewOrder.decode(bytearray(data), 0, len(data)).legs[0])  # revealed: examples.exchange.messages._codec.NewOrderLegsView
reveal_type(NewOrder.decode(data).to_value())  # revealed: examples.exchange.messages._codec.NewOrder
reveal_type(NewOrder.decode(data).legs[0].to_value())  # revealed: examples.exchange.messages._codec.NewOrderLegs
with mmap.mmap(-1, 4096) as mm:
    builder = NewOrderBuilder(mm)
    builder.order_id = 5
    builder.side = Side.Sell
    builder.side = 2  # an enum field's setter takes the value too
    legs = builder.legs(1)
    reveal_type(legs.next())  # revealed: examples.exchange.messages._codec.NewOrderLegsBuilder
    legs.symbol = "Y"
    reveal_type(builder.finish())  # revealed: builtins.int
reveal_type(exchange.decode(data))  # revealed: examples.exchange.messages._codec.NewOrderView | examples.exchange.messages._codec.OrderAcceptedView | examples.exchange.messages._codec.OrderRejectedView | examples.exchange.messages._codec.CancelOrderView | examples.exchange.messages._codec.OrderCancelledView | examples.exchange.messages._codec.TradeView | examples.exchange.messages._codec.BookUpdateView
