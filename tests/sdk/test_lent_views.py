"""The views the generated dispatch lends handlers: one per message type, used again for the
next message only when nothing but the dispatch holds it. Whatever a handler keeps (the view,
a group of it, a bytes field, a traceback that holds it) reads what it read when it was lent;
what it keeps nothing of is used again; a batch is not kept alive by the views that read it."""

from __future__ import annotations

import sys
from typing import Any

from examples.exchange import messages as x
from examples.exchange.messages import ExchangeNode, NewOrderView
from examples.pingpong.messages import Ping, PingpongNode, PingView
from examples.pingpong.messages import _codec as pingpong_codec
from seqbus.batch import RECORD_MESSAGE, pack_record
from tests.sdk.test_dispatch_capsule import NullClient


def batch_of(bodies: list[bytes], first: int = 1) -> bytes:
    return b"".join(
        pack_record(RECORD_MESSAGE, first + i, timestamp_ns=first + i,
                    account=b"OTHER\0\0\0", body=body)
        for i, body in enumerate(bodies)
    )


def pings(ids: range) -> bytes:
    return batch_of([Ping(id=i, sent_at_ns=i * 10).encode() for i in ids], ids[0])


def order(i: int) -> bytes:
    return x.NewOrder(
        order_id=i, client_id=i, symbol=f"S{i}", side=x.Side.Buy,
        price=x.Price(mantissa=i, exponent=-2), quantity=i, inst=x.ExecInst(0),
        legs=[x.NewOrderLegs(symbol=f"L{i}", ratio=i, side=x.Side.Sell,
                             fills=[x.NewOrderLegsFills(qty=i, price=-i)])],
        account=f"acct-{i}", memo=bytes([i % 256]) * 3,
    ).encode()


def attached(node: Any) -> Any:
    node.attach(NullClient(), "ME", 1)
    return node


class Pinged(PingpongNode):
    def __init__(self) -> None:
        super().__init__()
        self.ids: list[int] = []
        self.views: set[int] = set()

    def on_ping(self, msg: PingView, mine: bool) -> None:
        self.ids.append(msg.id)
        self.views.add(id(msg))


def test_a_view_nobody_keeps_is_lent_again_and_the_batch_is_not_kept() -> None:
    node = attached(Pinged())
    data = pings(range(1, 201))
    before = sys.getrefcount(data)
    node.handle_batch(data)
    assert node.ids == list(range(1, 201))
    assert len(node.views) == 1  # one view, lent 200 times
    assert sys.getrefcount(data) == before  # no view holds the batch once it is walked


def test_kept_views_read_what_they_were_lent_for() -> None:
    class Keeper(PingpongNode):
        def __init__(self) -> None:
            super().__init__()
            self.kept: list[PingView] = []

        def on_ping(self, msg: PingView, mine: bool) -> None:
            if msg.id % 3 == 0:
                self.kept.append(msg)

    node = attached(Keeper())
    for ids in (range(1, 61), range(61, 121)):
        data = pings(ids)
        before = sys.getrefcount(data)
        node.handle_batch(data)
        assert sys.getrefcount(data) == before + 20  # each kept view keeps its batch alive
        del data
    assert [(v.id, v.sent_at_ns) for v in node.kept] == [(i, i * 10) for i in range(3, 121, 3)]
    assert len({id(v) for v in node.kept}) == 40


def test_kept_groups_bytes_fields_and_tracebacks_hold_their_view() -> None:
    class Orders(ExchangeNode):
        def __init__(self) -> None:
            super().__init__()
            self.legs: list[Any] = []
            self.memos: list[memoryview] = []
            self.errors: list[BaseException] = []

        def on_new_order(self, msg: NewOrderView, mine: bool) -> None:
            if msg.order_id % 4 == 1:
                self.legs.append(msg.legs)  # a group keeps the message's view
            elif msg.order_id % 4 == 2:
                self.memos.append(msg.memo)  # so does a bytes field (a span of its buffer)
            elif msg.order_id % 4 == 3:
                try:
                    raise ValueError(msg.order_id)
                except ValueError as e:  # its traceback holds this frame, and the frame msg
                    self.errors.append(e)

    node = attached(Orders())
    for first in (1, 41):
        data = batch_of([order(i) for i in range(first, first + 40)], first)
        before = sys.getrefcount(data)
        node.handle_batch(data)
        # 30 of 40 views are held, each with its batch; a group holds the batch as well, and
        # the tracebacks hold handle_batch's frame (their handlers' caller), which holds it
        # twice (its argument and its local)
        assert sys.getrefcount(data) == before + 10 * 2 + 10 + 10 + 2
        del data
    assert [(g[0].symbol, g[0].ratio, g[0].fills[0].price) for g in node.legs] == [
        (f"L{i}", i, -i) for i in range(1, 81, 4)
    ]
    assert [bytes(m) for m in node.memos] == [bytes([i]) * 3 for i in range(2, 81, 4)]
    held = [e.__traceback__.tb_frame.f_locals["msg"] for e in node.errors if e.__traceback__]
    assert [(v.order_id, v.account, v.symbol) for v in held] == [
        (i, f"acct-{i}", f"S{i}") for i in range(3, 81, 4)
    ]


def test_a_handler_that_dispatches_again_keeps_its_own_view() -> None:
    class Nested(PingpongNode):
        def __init__(self) -> None:
            super().__init__()
            self.outer: list[tuple[PingView, int]] = []
            self.inner: list[int] = []

        def on_ping(self, msg: PingView, mine: bool) -> None:
            if msg.id < 1000:
                # pings of the same type handled inside this handler: the dispatch lends
                # them another view, this one is still the handler's
                self.handle_batch(pings(range(1000 + msg.id * 10, 1000 + msg.id * 10 + 3)))
                self.outer.append((msg, msg.id))
            else:
                self.inner.append(msg.id)

    node = attached(Nested())
    data = pings(range(1, 6))
    before = sys.getrefcount(data)
    node.handle_batch(data)
    assert sys.getrefcount(data) == before + 5
    assert [(v.id, v.sent_at_ns, i) for v, i in node.outer] == [(i, i * 10, i) for i in range(1, 6)]
    assert node.inner == [1000 + i * 10 + k for i in range(1, 6) for k in range(3)]


def test_a_buffer_lent_through_the_python_dispatch_is_released() -> None:
    body = bytearray(Ping(id=7, sent_at_ns=70).encode())
    node = attached(Pinged())
    assert pingpong_codec._seqbus_dispatch_(node, Ping.TEMPLATE_ID, body, 0, len(body), False)
    assert node.ids == [7]
    body.extend(b"\0")  # resizing fails (BufferError) while a view still exports its buffer
    node.handle_batch(pings(range(8, 10)))
    assert node.ids == [7, 8, 9]
