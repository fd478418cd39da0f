"""Mistakes mypy must catch in user code of the generated package (one per line marked)."""

from __future__ import annotations

from examples.exchange.messages import ExchangeNode, NewOrder, NewOrderView, Side


class Engine(ExchangeNode):
    def on_new_order(self, msg: NewOrderView, mine: bool) -> None:
        msg.quantity.upper()  # error: "int" has no attribute "upper"
        msg.order_id = 5  # error: Property "order_id" defined in "NewOrderView" is read-only
        self.send("text")  # error: Argument 1 to "send" of "Node" has incompatible type "str"
        self.post(msg)  # error: Argument 1 to "post" of "Node" has incompatible type "NewOrderView"
        self.send(msg.to_value())
        self.post(msg.to_value().encode())


NewOrder(order_id="1")  # error: Argument "order_id" to "NewOrder" has incompatible type "str"
NewOrder.decode(b"").no_such_field  # error: "NewOrderView" has no attribute "no_such_field"
Side.Buy.value + ""  # error: Unsupported operand types for + ("int" and "str")
NewOrder.encode_fields(order_id="1")  # error: Argument "order_id" to "encode_fields" of "NewOrder" has incompatible type "str"
