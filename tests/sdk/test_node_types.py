"""Types that catch mistakes at run time (issue 29): ``send`` and ``post`` take messages and
encoded bodies only, and a handler that matches no message type is refused when its class is
defined, with the names it may have meant. (mypy refusing the same: tests/compiler/typing.)"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from examples.exchange.messages import (
    ExchangeNode,
    ExecInst,
    NewOrder,
    NewOrderView,
    Price,
    Side,
)
from examples.pingpong.messages import Ping, PingpongNode
from seqbus import Node
from seqbus.bus.node import BusNode


class Recorder:
    """A client that keeps what it is sent."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []

    def poll(self, max_records: int, timeout: float) -> bytes:
        return b""

    def send(self, body: Any) -> int:
        self.sent.append(bytes(body))
        return len(self.sent)

    def is_rewinding(self) -> bool:
        return False


def attached() -> tuple[PingpongNode, Recorder]:
    node = PingpongNode()
    client = Recorder()
    node.attach(client, "T", 1)
    return node, client


@pytest.mark.parametrize("method", ["send", "post"])
def test_send_and_post_refuse_text_naming_what_was_given(method: str) -> None:
    node, client = attached()
    with pytest.raises(TypeError, match=rf"^{method}\(\) takes a generated message or an "
                       r"encoded body \(bytes, bytearray, memoryview\), not str \(encode text"):
        getattr(node, method)("text")
    with pytest.raises(TypeError, match=rf"^{method}\(\) .* not int$"):
        getattr(node, method)(5)
    assert client.sent == [] and node.posted == 0


def test_a_view_or_a_struct_is_not_a_message_to_send() -> None:
    node, client = attached()
    body = NewOrder(
        order_id=1, client_id=2, symbol="AAPL", side=Side.Buy,
        price=Price(mantissa=100, exponent=-2), quantity=10, inst=ExecInst.PostOnly, legs=[],
    ).encode()
    view = NewOrder.decode(body)
    assert isinstance(view, NewOrderView)
    with pytest.raises(TypeError, match=r"not examples\.exchange\.messages\._codec\.NewOrderView"
                       r" \(a view of a received message: send its to_value\(\)"):
        node.send(view)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^post\(\) .* not examples\.exchange\.messages\._codec\."
                       r"Price$"):
        node.post(Price(mantissa=1, exponent=0))  # type: ignore[arg-type]  # a struct
    assert client.sent == []
    # what is accepted: a message, its encoding, a bytearray or memoryview of it
    node.send(view.to_value())
    node.send(body)
    node.post(bytearray(body))
    node.post(memoryview(body))
    assert client.sent == [body] * 4


def test_an_aio_send_refuses_text_too() -> None:
    from seqbus.aio import Connection

    async def main() -> None:
        conn = Connection.__new__(Connection)  # only send's check runs: nothing else is used
        with pytest.raises(TypeError, match=r"^send\(\) takes a generated message .* not str"):
            await conn.send("text")  # type: ignore[arg-type]

    asyncio.run(main())


def test_a_misspelt_handler_is_refused_when_the_class_is_defined() -> None:
    with pytest.raises(TypeError) as info:

        class Engine(ExchangeNode):
            def on_neworder(self, msg: NewOrderView, mine: bool) -> None:
                pass

    text = str(info.value)
    assert "Engine.on_neworder handles no message type of this node" in text, text
    assert "did you mean on_new_order (the handler of NewOrder)?" in text, text


def test_an_on_name_with_nothing_close_lists_the_handlers() -> None:
    with pytest.raises(TypeError) as info:

        class Pinger(PingpongNode):
            def on_tick(self) -> None:
                pass

    text = str(info.value)
    assert "Pinger.on_tick handles no message type of this node" in text, text
    assert "the handlers of PingpongNode are on_ping, on_pong" in text, text


def test_a_node_of_no_schema_has_no_handlers() -> None:
    with pytest.raises(TypeError, match=r"Bare\.on_ping .* Bare subclasses no generated node"):

        class Bare(Node):
            def on_ping(self, msg: object, mine: bool) -> None:
                pass


def test_what_is_not_a_misspelt_handler_is_left_alone() -> None:
    class Fine(PingpongNode, BusNode):
        ON_ERROR = "skip"  # not a method

        def on_ping(self, msg: Any, mine: bool) -> None:  # a handler of each base
            pass

        def on_admin_reply(self, msg: Any, mine: bool) -> None:
            pass

        def on_opened(self) -> None:  # the hooks
            pass

        def on_rewound(self) -> None:
            pass

        def on_closed(self) -> None:
            pass

        def _on_expiry(self) -> None:  # not named like a handler
            pass

    class Helper(PingpongNode):
        pass

    Helper.on_flush = lambda self: None  # type: ignore[attr-defined]  # set after: not checked

    class Subclass(Fine):
        def on_ping(self, msg: Any, mine: bool) -> None:  # an override
            pass

    assert Subclass.topics() == Fine.topics()


def test_a_message_sent_by_the_generated_sender_still_goes() -> None:
    node, client = attached()
    node.send(Ping(id=1, sent_at_ns=2))
    node.send_ping(id=1, sent_at_ns=2)
    assert client.sent[0] == client.sent[1] == Ping(id=1, sent_at_ns=2).encode()
