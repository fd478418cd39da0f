"""The generated Cython codecs: views, builders, value classes, errors (SPEC §3)."""

from __future__ import annotations

import mmap
import pickle
from types import ModuleType
from typing import Any

import pytest

from seqbus.errors import DecodeError


def new_order(x: ModuleType, **over: Any) -> Any:
    fields: dict[str, Any] = dict(
        order_id=2**64 - 1, client_id=7, symbol="AAPL", side=x.Side.Buy,
        price=x.Price(mantissa=-12345, exponent=-2), quantity=100, stop_price=None,
        inst=x.ExecInst.PostOnly | x.ExecInst.Hidden, expire_at=1_700_000_000,
        legs=[
            x.NewOrderLegs(symbol="MSFT", ratio=1, side=x.Side.Sell, fills=[
                x.NewOrderLegsFills(qty=5, price=-7), x.NewOrderLegsFills(qty=6, price=2**63 - 1)]),
            x.NewOrderLegs(symbol="GOOG", ratio=2, side=x.Side.Buy),
        ],
        account="acct-é", memo=b"\x00\xff",
    )
    fields.update(over)
    return x.NewOrder(**fields)


def test_spec_example_round_trips(exchange: ModuleType) -> None:
    msg = new_order(exchange)
    data = msg.encode()
    view = exchange.NewOrder.decode(data)
    assert view == msg
    assert view.order_id == 2**64 - 1 and view.symbol == "AAPL" and view.side is exchange.Side.Buy
    assert view.price == exchange.Price(mantissa=-12345, exponent=-2)
    assert view.stop_price is None and view.expire_at == 1_700_000_000
    assert view.inst == exchange.ExecInst.PostOnly | exchange.ExecInst.Hidden
    assert [leg.symbol for leg in view.legs] == ["MSFT", "GOOG"]
    assert [(f.qty, f.price) for f in view.legs[0].fills] == [(5, -7), (6, 2**63 - 1)]
    assert len(view.legs[1].fills) == 0
    assert view.account == "acct-é"
    assert isinstance(view.memo, memoryview) and bytes(view.memo) == b"\x00\xff"
    assert view.wire_size == len(data) and view.wire_version == 2
    assert exchange.NewOrder.from_dict(view.to_dict()) == msg


def test_header_is_block_length_template_schema_version(exchange: ModuleType) -> None:
    data = exchange.OrderAccepted(order_id=1, at=2).encode()
    assert data[:8] == bytes([16, 0, 2, 0, 7, 0, 2, 0])
    assert data[8:] == (1).to_bytes(8, "little") + (2).to_bytes(8, "little") + b"\0\0"


def test_optional_keeps_every_value_usable(exchange: ModuleType) -> None:
    for value in (0, -1, 2**63 - 1, -(2**63)):
        view = exchange.NewOrder.decode(new_order(exchange, stop_price=value).encode())
        assert view.stop_price == value


def test_views_wrap_every_buffer_kind_at_an_offset(exchange: ModuleType) -> None:
    data = new_order(exchange).encode()
    padded = b"\xee" * 5 + data + b"\xee" * 3
    with mmap.mmap(-1, len(padded)) as mm:
        mm[:] = padded
        for buf in (padded, bytearray(padded), memoryview(padded), mm):
            view = exchange.NewOrder.decode(buf, 5)
            assert view.order_id == 2**64 - 1 and view.legs[0].fills[1].qty == 6
            del view


def test_view_reads_in_place_without_copying(exchange: ModuleType) -> None:
    buf = bytearray(exchange.OrderAccepted(order_id=1, at=2).encode())
    view = exchange.OrderAccepted.decode(buf)
    buf[8] = 9  # the view sees later changes: it holds no copy
    assert view.order_id == 9


def test_reused_group_iteration_is_an_explicit_opt_in(exchange: ModuleType) -> None:
    view = exchange.NewOrder.decode(new_order(exchange).encode())
    seen = [(id(leg), leg.symbol) for leg in view.legs.iter_reused()]
    assert len({i for i, _ in seen}) == 1 and [s for _, s in seen] == ["MSFT", "GOOG"]


def test_builder_writes_the_same_bytes_as_encode(exchange: ModuleType) -> None:
    x = exchange
    buf = bytearray(512)
    b = x.NewOrderBuilder(buf, 3)
    b.order_id = 2**64 - 1
    b.client_id = 7
    b.symbol = "AAPL"
    b.side = x.Side.Buy
    b.price = x.Price(mantissa=-12345, exponent=-2)
    b.quantity = 100
    b.inst = 3
    b.expire_at = 1_700_000_000
    legs = b.legs(2)
    legs.next()
    legs.symbol, legs.ratio, legs.side = "MSFT", 1, x.Side.Sell
    fills = legs.fills(2)
    fills.next().qty = 5
    fills.price = -7
    fills.next().qty = 6
    fills.price = 2**63 - 1
    legs.next()
    legs.symbol, legs.ratio, legs.side = "GOOG", 2, x.Side.Buy
    b.account = "acct-é"
    b.memo = b"\x00\xff"
    n = b.finish()
    assert bytes(buf[3:3 + n]) == new_order(x).encode()


def test_builder_enforces_order_and_counts(exchange: ModuleType) -> None:
    x = exchange
    b = x.NewOrderBuilder(bytearray(512))
    b.account = "a"
    with pytest.raises(ValueError, match="written already"):
        b.legs(1)
    b2 = x.NewOrderBuilder(bytearray(512))
    legs = b2.legs(2)
    legs.next()
    with pytest.raises(ValueError, match="1 of 2 entries"):
        b2.finish()
    b3 = x.NewOrderBuilder(bytearray(512))
    legs = b3.legs(1)
    legs.next()
    fills = legs.fills(0)
    b3.account = "a"  # closes legs (and its fills)
    with pytest.raises(ValueError, match="already complete"):
        legs.next()
    with pytest.raises(ValueError, match="already complete"):
        fills.next()
    b3.finish()
    with pytest.raises(ValueError, match="already complete"):
        b3.memo = b"late"
    with pytest.raises(ValueError, match="too small"):
        x.NewOrderBuilder(bytearray(10))
    with pytest.raises(ValueError, match="longer than 8"):
        x.NewOrderBuilder(bytearray(512)).symbol = "TOO-LONG-SYMBOL"


def test_builder_skipped_groups_and_strings_are_empty(exchange: ModuleType) -> None:
    buf = bytearray(256)
    b = exchange.NewOrderBuilder(buf)
    b.side = exchange.Side.Sell
    b.memo = b"m"
    view = exchange.NewOrder.decode(buf, 0, b.finish())
    assert len(view.legs) == 0 and view.account == "" and bytes(view.memo) == b"m"


def test_bad_values_are_refused_when_encoding(exchange: ModuleType) -> None:
    x = exchange
    with pytest.raises(OverflowError):
        new_order(x, order_id=-1)
    with pytest.raises(ValueError):
        new_order(x, side=7)
    with pytest.raises(ValueError, match="not ASCII"):
        new_order(x, symbol="ÄPFEL").encode()
    with pytest.raises(TypeError, match="NewOrderLegs"):
        new_order(x, legs=[{"symbol": "X"}]).encode()


def test_decode_errors_name_message_field_and_offset(exchange: ModuleType) -> None:
    data = bytearray(new_order(exchange).encode())
    data[8 + 20] = 9  # side: not a value of Side
    with pytest.raises(DecodeError) as info:
        exchange.NewOrder.decode(data).side
    assert (info.value.message, info.value.field, info.value.offset) == ("NewOrder", "side", 28)
    with pytest.raises(DecodeError, match="template id 2, expected 1"):
        exchange.NewOrder.decode(exchange.OrderAccepted(order_id=1, at=2).encode())
    with pytest.raises(DecodeError, match="past the end"):
        exchange.NewOrder.decode(new_order(exchange).encode()[:20])


def test_every_truncation_raises_decode_error(exchange: ModuleType) -> None:
    data = new_order(exchange).encode()
    for n in range(len(data)):
        with pytest.raises(DecodeError):
            exchange.NewOrder.decode(data[:n]).to_dict()


def test_package_decode_and_dispatch(exchange: ModuleType) -> None:
    data = exchange.CancelOrder(order_id=5, client_id=1).encode()
    assert isinstance(exchange.decode(data), exchange.CancelOrderView)
    seen: list[tuple[int, bool]] = []

    class Engine(exchange.ExchangeNode):  # type: ignore[misc]
        def on_cancel_order(self, msg: Any, mine: bool) -> None:
            seen.append((msg.order_id, mine))

    node = Engine()
    assert Engine._seqbus_dispatch_(node, 4, data, 0, len(data), True)
    assert not Engine._seqbus_dispatch_(node, 99, data, 0, len(data), True)
    assert seen == [(5, True)]
    assert Engine.topics() == [(7, 4)]
    assert Engine._seqbus_handlers_[1] == "on_new_order"


def test_repr_to_dict_pickle(exchange: ModuleType) -> None:
    msg = new_order(exchange)
    assert repr(msg).startswith("NewOrder(order_id=18446744073709551615, client_id=7, symbol='AAPL'")
    assert repr(exchange.NewOrder.decode(msg.encode())).startswith("NewOrderView(order_id=")
    assert pickle.loads(pickle.dumps(msg)) == msg
    assert msg.to_dict()["legs"][0]["fills"][0] == {"qty": 5, "price": -7}


def test_struct_codec(generated_packages: object) -> None:
    from seqbus import bus

    env = bus.Envelope(timestamp_ns=1, command_seq=2, account="ME", instance=3,
                       kind=bus.MessageKind.Control, flags=bus.EnvelopeFlags.LastFragment,
                       body_length=10)
    raw = env.encode()
    assert len(raw) == bus.Envelope.SIZE == 32
    assert raw[16:24] == b"ME\0\0\0\0\0\0" and raw[26] == 2 and raw[27] == 2
    assert bus.Envelope.decode(b"\0" + raw, 1) == env
    with pytest.raises(DecodeError):
        bus.Envelope.decode(raw[:31])


def test_all_types_round_trip(alltypes: ModuleType) -> None:
    a = alltypes
    msg = a.Everything(
        b=True, u8v=255, u16v=65535, u32v=2**32 - 1, u64v=2**64 - 1, i8v=-128, i16v=-32768,
        i32v=-(2**31), i64v=-(2**63), f32v=1.5, f64v=-2.25, name="abc", raw=b"\x01\x02",
        color=a.Color.Red, perm=a.Perm.Exec | a.Perm.Read,
        outer=a.Outer(inner=a.Inner(a=1, b=0.5), tag="xy", raw=b"\xff\xfe", ok=True),
        o_u64=0, o_color=a.Color.Blue, o_outer=None, o_f64=float("inf"), o_char="q",
        items=[a.EverythingItems(id=1, label="l", sub=[a.EverythingItemsSub(v=-1, blob=b"b")],
                                 note=-5)],
        text="t", data=b"d", empty=[a.EverythingEmpty(), a.EverythingEmpty()])
    view = a.Everything.decode(msg.encode())
    assert view == msg
    assert view.raw == b"\x01\x02\0\0" and view.outer.inner.b == 0.5
    assert len(view.empty) == 2 and view.items[0].sub[0].v == -1
    assert a.Empty.decode(a.Empty().encode()).to_dict() == {}


def test_u64_fields_read_exactly_on_both_sides_of_each_int_path() -> None:
    from examples.pingpong.messages import Ping, PingView

    for value in (0, 1, 256, 257, 2**30 - 1, 2**30, 2**31, 2**62 - 1, 2**62, 2**63, 2**64 - 1):
        view = PingView(Ping(id=value, sent_at_ns=2**64 - 1 - value).encode())
        assert (view.id, view.sent_at_ns) == (value, 2**64 - 1 - value)
        assert type(view.id) is int
