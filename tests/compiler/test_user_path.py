"""The Python message path as users write it (issue 13): entries that stay valid, dicts
converted or refused at construction, to_dict/from_dict round trips, ints for enums and
flags, the encode path that builds no value objects, and what Node.send accepts."""

from __future__ import annotations

import enum
import gc
import inspect
import pydoc
from types import ModuleType
from typing import Any

import pytest

from seqbus.errors import DecodeError
from tests.compiler.test_codec import new_order


def test_list_of_a_group_gives_distinct_correct_entries(exchange: ModuleType) -> None:
    msg = new_order(exchange)
    view = exchange.NewOrder.decode(msg.encode())
    legs = list(view.legs)
    assert len({id(leg) for leg in legs}) == 2
    assert [leg.symbol for leg in legs] == ["MSFT", "GOOG"]  # not the last entry twice
    assert [leg.to_dict() for leg in legs] == [leg.to_dict() for leg in msg.legs]
    fills = [list(leg.fills) for leg in view.legs]
    assert [[(f.qty, f.price) for f in fs] for fs in fills] == [[(5, -7), (6, 2**63 - 1)], []]
    # nested: an outer iteration while an inner one is open keeps both right
    pairs = [(a.symbol, b.symbol) for a in view.legs for b in view.legs]
    assert pairs == [("MSFT", "MSFT"), ("MSFT", "GOOG"), ("GOOG", "MSFT"), ("GOOG", "GOOG")]
    it = iter(view.legs)
    first = next(it)
    second = next(it)
    assert (first.symbol, second.symbol, first.ratio) == ("MSFT", "GOOG", 1)
    with pytest.raises(StopIteration):
        next(it)


def test_entry_views_and_structs_answer_fields_and_keep_methods(exchange: ModuleType) -> None:
    """Entry views and structs read their fields through a getattro of their own (issue 13's
    full read); everything else an object has still answers, the same way."""
    x = exchange
    msg = new_order(x, inst=(1 << 9) | 1)  # a flags value past the table read by index
    view = x.NewOrder.decode(msg.encode())
    assert view.inst == (1 << 9) | 1 and type(view.inst) is x.ExecInst
    assert x.NewOrder.decode(new_order(x).encode()).inst == x.ExecInst.PostOnly | x.ExecInst.Hidden
    leg = next(iter(view.legs))
    assert (leg.symbol, leg.ratio, leg.side) == ("MSFT", 1, x.Side.Sell)
    assert getattr(leg, "".join(["sym", "bol"])) == "MSFT"  # not interned: the generic lookup
    assert leg.to_value() == msg.legs[0] and leg.to_dict() == msg.legs[0].to_dict()
    assert type(leg).symbol.__doc__ and "symbol" in dir(leg)
    with pytest.raises(AttributeError, match="no attribute 'colour'"):
        leg.colour  # noqa: B018
    with pytest.raises(AttributeError):
        leg.symbol = "X"  # views stay read-only
    price = view.price
    assert (price.mantissa, price.exponent) == (-12345, -2)
    assert price.encode() == msg.price.encode() and price.to_dict() == msg.price.to_dict()
    price.mantissa = 7  # a value: fields are still writable, and read back
    assert price.mantissa == 7 and getattr(price, "".join(["mant", "issa"])) == 7
    with pytest.raises(AttributeError, match="no attribute 'colour'"):
        price.colour  # noqa: B018


def test_message_views_answer_fields_and_bind_their_hot_methods(exchange: ModuleType) -> None:
    """Message views read fields through a getattro of their own too (issue 13's full read);
    it binds to_value and to_dict itself (a BoundMethod from a free list), and everything
    else goes the generic way."""
    x = exchange
    msg = new_order(x)
    view = x.NewOrder.decode(msg.encode())
    assert view.order_id == 2**64 - 1 and getattr(view, "".join(["order", "_id"])) == 2**64 - 1
    assert view.to_value() == msg and view.to_dict() == msg.to_dict()
    bound = view.to_value
    assert bound.__self__ is view and bound.__name__ == "to_value"
    assert bound.__qualname__ == "NewOrderView.to_value" and "full decode" in (bound.__doc__ or "")
    assert "bound method NewOrderView.to_value" in repr(bound)
    del view
    assert bound() == msg  # the bound method keeps its view (and the view its buffer)
    view = x.NewOrder.decode(msg.encode())
    assert getattr(view, "".join(["to_", "dict"]))() == msg.to_dict()  # the generic lookup
    assert type(view).to_value(view) == msg and view.wire_size == len(msg.encode())
    with pytest.raises(TypeError, match=r"^NewOrderView.to_value\(\) takes no arguments$"):
        view.to_value(1)
    with pytest.raises(TypeError, match="takes no arguments"):
        view.to_dict(deep=True)
    with pytest.raises(AttributeError, match="no attribute 'colour'"):
        view.colour  # noqa: B018
    with pytest.raises(AttributeError):
        view.order_id = 5  # views stay read-only
    with pytest.raises(TypeError, match="made by message views"):
        type(bound)()


def test_decode_takes_its_arguments_by_position_or_keyword(exchange: ModuleType) -> None:
    x = exchange
    data = b"xx" + x.OrderAccepted(order_id=1, at=2).encode() + b"yy"
    n = len(data) - 4
    for view in (x.OrderAccepted.decode(data, 2, n), x.OrderAccepted.decode(data, offset=2, length=n),
                 x.OrderAccepted.decode(buf=data, length=n, offset=2),
                 x.OrderAccepted.decode(data[2:-2]), x.OrderAccepted.decode(data, 2)):
        assert (view.order_id, view.at) == (1, 2)
    assert x.OrderAccepted.decode.__name__ == "decode" and "zero-copy" in (
        x.OrderAccepted.decode.__doc__ or "")
    for args, kwargs, text in [
        ((), {}, r"OrderAccepted.decode\(\) missing required argument 'buf'"),
        ((data, 2, n, 4), {}, r"OrderAccepted.decode\(\) takes at most 3 arguments \(4 given\)"),
        ((data,), {"colour": 1}, "unexpected keyword argument 'colour'"),
        ((data, 2), {"offset": 2}, "multiple values for argument 'offset'"),
        ((data, "2"), {}, "integer"),
    ]:
        with pytest.raises(TypeError, match=text):
            x.OrderAccepted.decode(*args, **kwargs)
    with pytest.raises(DecodeError):
        x.OrderAccepted.decode(data, 3, n)


def test_a_corrupt_entry_count_is_a_decode_error_not_an_allocation(exchange: ModuleType) -> None:
    """The full decode makes each group's list with a slot per entry when the bytes left can
    hold that many; a count they cannot hold fails on the entries, naming the group, as it
    did before the lists were made whole."""
    x = exchange
    data = bytearray(new_order(x).encode())
    at = 8 + 54 + 2  # the legs group header
    assert data[at + 4] == 2
    data[at + 4:at + 8] = (2**32 - 1).to_bytes(4, "little")
    for read in (lambda v: v.to_value(), lambda v: v.to_dict()):
        with pytest.raises(DecodeError, match="NewOrder.legs"):
            read(x.NewOrder.decode(bytes(data)))


def test_views_are_not_tracked_by_the_garbage_collector(exchange: ModuleType) -> None:
    """Views, their groups and iterators hold only their buffer and enclosing views (no
    cycles), so they skip the collector's bookkeeping; value objects, whose lists users fill,
    stay tracked."""
    view = exchange.NewOrder.decode(new_order(exchange).encode())
    legs = view.legs
    it = iter(legs)
    leg = next(it)
    assert not any(gc.is_tracked(o) for o in (view, legs, it, leg, leg.fills, view.memo.obj))
    assert gc.is_tracked(view.to_value())


def test_dicts_for_entries_and_structs_are_converted_at_construction(exchange: ModuleType) -> None:
    x = exchange
    msg = new_order(x)
    as_dicts = new_order(x, price={"mantissa": -12345, "exponent": -2},
                         legs=[leg.to_dict() for leg in msg.legs])
    assert type(as_dicts.price) is x.Price
    assert all(type(leg) is x.NewOrderLegs for leg in as_dicts.legs)
    assert all(type(f) is x.NewOrderLegsFills for f in as_dicts.legs[0].fills)
    assert as_dicts == msg and as_dicts.encode() == msg.encode()
    entries = [x.NewOrderLegs(symbol="A", ratio=1, side=x.Side.Buy)]
    assert x.NewOrder(**(msg.to_dict() | {"legs": entries})).legs is entries  # kept, not copied


@pytest.mark.parametrize("bad, error, text", [
    ({"legs": [{"symbol": "A", "ratio": 1}]}, TypeError, "NewOrder.legs[0]: NewOrderLegs() missing required keyword argument 'side'"),
    ({"legs": [{"symbol": "A", "ratio": 1, "side": 1, "colour": 2}]}, TypeError, "NewOrder.legs[0]: NewOrderLegs() got an unexpected keyword argument 'colour'"),
    ({"legs": ["MSFT"]}, TypeError, "NewOrder.legs[0]: expected NewOrderLegs or dict, got str"),
    ({"legs": "MSFT"}, TypeError, "NewOrder.legs: expected a list of NewOrderLegs, got str"),
    ({"legs": 5}, TypeError, "NewOrder.legs: expected a list of NewOrderLegs, got int"),
    ({"price": (1, 2)}, TypeError, "NewOrder.price: expected Price or dict, got tuple"),
    ({"price": {"mantissa": 1}}, TypeError, "NewOrder.price: Price() missing required keyword argument 'exponent'"),
    ({"side": 9}, ValueError, "NewOrder.side: 9 is not a value of Side"),
    ({"side": "Buy"}, TypeError, "NewOrder.side: expected Side, got str"),
    ({"inst": 1 << 16}, ValueError, "NewOrder.inst: 65536 is outside the range of ExecInst"),
    ({"symbol": 5}, TypeError, "NewOrder.symbol: expected str, got int"),
    ({"quantity": -1}, OverflowError, "NewOrder.quantity: -1 does not fit: can't convert negative value to uint32_t"),
    ({"legs": [{"symbol": "A", "ratio": -1, "side": 1}]}, OverflowError, "NewOrder.legs[0]: NewOrderLegs.ratio: -1 does not fit: can't convert negative value to uint16_t"),
    ({"symbol": "TOO-LONG-SYMBOL"}, ValueError, "NewOrder.symbol: 'TOO-LONG-SYMBOL' is longer than 8 characters"),
    ({"symbol": "AAPL\u00e9"}, ValueError, "NewOrder.symbol: 'AAPL\u00e9' is not ASCII"),
    ({"symbol": "AAPL "}, ValueError, "NewOrder.symbol: 'AAPL ' ends in a space, which readers strip as padding"),
    ({"symbol": "AAPL\0"}, ValueError, "NewOrder.symbol: 'AAPL\\x00' ends in a NUL, which readers strip as padding"),
    ({"legs": [{"symbol": "TOO-LONG-SYMBOL", "ratio": 1, "side": 1}]}, ValueError, "NewOrder.legs[0]: NewOrder.legs.symbol: 'TOO-LONG-SYMBOL' is longer than 8 characters"),
    ({"account": b"x"}, TypeError, "NewOrder.account: expected str, got bytes"),
])
def test_bad_values_are_refused_at_construction_naming_the_field(
    exchange: ModuleType, bad: dict[str, Any], error: type[Exception], text: str
) -> None:
    with pytest.raises(error) as exc:
        new_order(exchange, **bad)
    assert str(exc.value) == text


def test_unknown_and_positional_arguments_fail_at_once(exchange: ModuleType) -> None:
    x = exchange
    with pytest.raises(TypeError, match=r"OrderAccepted\(\) got an unexpected keyword argument 'colour'"):
        x.OrderAccepted(order_id=1, at=2, colour=3)
    with pytest.raises(TypeError, match="missing required keyword argument 'at'"):
        x.OrderAccepted(order_id=1)
    with pytest.raises(TypeError, match="keyword arguments only"):
        x.OrderAccepted(1, 2)
    with pytest.raises(OverflowError):
        x.OrderAccepted(order_id=-1, at=2)


def test_to_dict_round_trips_through_from_dict_and_the_constructor(exchange: ModuleType) -> None:
    x = exchange
    samples = [new_order(x), new_order(x, stop_price=-5, expire_at=None, legs=[]),
               x.BookUpdate(symbol="AAPL", at=8, levels=[x.BookUpdateLevels(
                   side=x.BookSide.Bid, price=x.Price(mantissa=1, exponent=0), quantity=2,
                   orders=3)]),
               x.OrderRejected(order_id=1, at=2, reason=x.RejectReason.BadPrice, text="t")]
    for msg in samples:
        cls = type(msg)
        assert cls.from_dict(msg.to_dict()) == msg
        assert cls(**msg.to_dict()) == msg
        view = cls.decode(msg.encode())
        assert cls.from_dict(view.to_dict()) == msg and cls(**view.to_dict()) == msg
        assert cls(**view.to_dict()).encode() == msg.encode()
        entry_cls = type(msg.legs[0]) if getattr(msg, "legs", None) else None
        if entry_cls is not None:
            assert entry_cls.from_dict(msg.legs[0].to_dict()) == msg.legs[0]
    assert x.Price.from_dict(x.Price(mantissa=3, exponent=-1).to_dict()) == x.Price(
        mantissa=3, exponent=-1)


def test_enums_and_flags_take_plain_ints_and_read_back_typed(exchange: ModuleType) -> None:
    x = exchange
    msg = new_order(x, side=2, inst=3)
    assert msg.side is x.Side.Sell
    assert type(msg.inst) is x.ExecInst and msg.inst == x.ExecInst.PostOnly | x.ExecInst.Hidden
    assert new_order(x, inst=3).inst is msg.inst  # one IntFlag per distinct int, cached
    assert msg.encode() == new_order(x, side=x.Side.Sell,
                                     inst=x.ExecInst.PostOnly | x.ExecInst.Hidden).encode()
    with pytest.raises(TypeError):
        new_order(x, side=True)
    assert isinstance(msg.side, enum.IntEnum)


def test_encode_fields_writes_what_the_value_path_writes_without_value_objects(
    exchange: ModuleType,
) -> None:
    x = exchange
    msg = new_order(x)
    want = msg.encode()
    fields = msg.to_dict()
    assert x.NewOrder.encode_fields(**fields) == want  # dicts for entries and the struct
    legs = [("MSFT", 1, x.Side.Sell, [(5, -7), (6, 2**63 - 1)]), ("GOOG", 2, 1)]
    assert x.NewOrder.encode_fields(**(fields | {"legs": legs, "price": (-12345, -2)})) == want
    assert x.NewOrder.encode_fields(**(fields | {"legs": tuple(msg.legs), "price": msg.price,
                                                 "side": 1, "inst": 3})) == want
    assert x.OrderAccepted.encode_fields(order_id=1, at=2) == x.OrderAccepted(
        order_id=1, at=2).encode()


def test_encode_outgrowing_the_stack_buffer_writes_the_same_bytes(exchange: ModuleType) -> None:
    """Encoders write in one pass, starting in a buffer on the stack, and move to a growing
    bytes object past it: big strings and blobs, and many entries, come out whole and equal
    on every path (value, fields, encode_into); a buffer too small for encode_into gets
    nothing written."""
    x = exchange
    fills = [x.NewOrderLegsFills(qty=i, price=-i) for i in range(300)]
    legs = [x.NewOrderLegs(symbol=f"S{i}", ratio=i, side=x.Side.Buy, fills=fills)
            for i in range(3)]
    for account, memo in (("a" * 5000, b""), ("é" * 700, bytes(range(256)) * 400)):
        msg = new_order(x, legs=legs, account=account, memo=memo)
        data = msg.encode()
        assert len(data) > 4096
        view = x.NewOrder.decode(data)
        assert view == msg and view.wire_size == len(data)
        assert x.NewOrder.encode_fields(**msg.to_dict()) == data
        tuples = [(leg.symbol, leg.ratio, leg.side, [(f.qty, f.price) for f in leg.fills])
                  for leg in legs]
        assert x.NewOrder.encode_fields(**(msg.to_dict() | {"legs": tuples})) == data
        buf = bytearray(len(data) + 9)
        assert msg.encode_into(buf, 9) == len(data) and bytes(buf[9:]) == data
        small = bytearray(b"\xee" * (len(data) - 1))
        with pytest.raises(ValueError, match=f"too small .*{len(data)} needed"):
            msg.encode_into(small)
        assert small == b"\xee" * (len(data) - 1)


def test_encode_fields_is_a_keyword_only_function_of_the_class(exchange: ModuleType) -> None:
    x = exchange
    f = x.NewOrder.encode_fields
    assert f is x.NewOrder.encode_fields and callable(f)
    assert f.__name__ == "encode_fields" and f.__qualname__ == "NewOrder.encode_fields"
    assert "no value object built" in (f.__doc__ or "")
    assert x.OrderAccepted.encode_fields(**{"at": 2, "order_id": 1}) == x.OrderAccepted(
        order_id=1, at=2).encode()  # keywords in any order
    with pytest.raises(TypeError, match=r"^OrderAccepted.encode_fields\(\) takes keyword "
                       r"arguments only \(2 positional given\)$"):
        x.OrderAccepted.encode_fields(1, 2)
    with pytest.raises(TypeError, match=r"^OrderAccepted.encode_fields\(\) got an unexpected "
                       r"keyword argument 'colour'$"):
        x.OrderAccepted.encode_fields(order_id=1, at=2, colour=3)
    with pytest.raises(TypeError, match="missing required keyword argument 'at'"):
        x.OrderAccepted.encode_fields(order_id=1)
    with pytest.raises(TypeError, match="made by generated codecs"):
        type(f)()


def test_classes_and_class_functions_have_signatures(exchange: ModuleType) -> None:
    """inspect, help() and notebooks see the parameters of what C-level callables take."""
    x = exchange
    msg = new_order(x)
    fields = list(msg.to_dict())
    sig = inspect.signature(x.NewOrder)
    assert list(sig.parameters) == fields
    assert {p.kind for p in sig.parameters.values()} == {inspect.Parameter.KEYWORD_ONLY}
    assert sig.parameters["legs"].default == () and sig.parameters["memo"].default == b""
    assert sig.parameters["order_id"].default is inspect.Parameter.empty
    assert sig.bind(**msg.to_dict()).arguments == msg.to_dict()
    assert inspect.signature(x.NewOrder.encode_fields) == sig
    assert str(inspect.signature(x.NewOrder.decode)) == "(buf, offset=0, length=-1)"
    assert str(inspect.signature(x.NewOrderView)) == "(buf, offset=0, length=-1)"
    assert str(inspect.signature(x.NewOrderBuilder)) == "(buf, offset=0)"
    assert str(inspect.signature(x.NewOrderLegsFills)) == "(*, qty, price)"
    assert str(inspect.signature(x.Price)) == "(*, mantissa, exponent)"
    # the signature says what the constructor takes: a missing required one fails both
    with pytest.raises(TypeError, match="missing a required argument: 'exponent'"):
        inspect.signature(x.Price).bind(mantissa=1)
    with pytest.raises(TypeError, match="missing required keyword argument 'exponent'"):
        x.Price(mantissa=1)
    assert "encode_fields" in pydoc.render_doc(x.NewOrder)
    # help() opens with the same signature (Cython's own put the * after the first field)
    for cls in (x.NewOrder, x.NewOrderLegs, x.NewOrderLegsFills, x.Price, x.OrderAccepted):
        assert (cls.__doc__ or "").startswith(f"{cls.__name__}{inspect.signature(cls)}\n"), cls


@pytest.mark.parametrize("bad, error, text", [
    ({"legs": [("MSFT", 1)]}, TypeError, "NewOrder.legs() missing required keyword argument 'side'"),
    ({"legs": [("MSFT", 1, 1, [], 9)]}, TypeError, "NewOrder.legs: 5 values for 4 fields"),
    ({"legs": ["MSFT"]}, TypeError, "NewOrder.legs: expected an entry, a tuple of its fields or a dict, got str"),
    ({"legs": iter([])}, TypeError, "NewOrder.legs: expected a list or tuple of entries, got list_iterator"),
    ({"side": 9}, ValueError, "NewOrder.side: 9 is not a value of Side"),
    ({"price": (1,)}, TypeError, "Price() missing required keyword argument 'exponent'"),
    ({"symbol": "TOO-LONG-SYMBOL"}, ValueError, "NewOrder.symbol: 'TOO-LONG-SYMBOL' is longer than 8 characters"),
    ({"symbol": "MSFT "}, ValueError, "NewOrder.symbol: 'MSFT ' ends in a space, which readers strip as padding"),
])
def test_encode_fields_refuses_bad_fields_naming_them(
    exchange: ModuleType, bad: dict[str, Any], error: type[Exception], text: str
) -> None:
    fields = new_order(exchange).to_dict() | bad
    with pytest.raises(error) as exc:
        exchange.NewOrder.encode_fields(**fields)
    assert str(exc.value) == text


def test_node_sends_fields_and_refuses_what_is_not_a_message() -> None:
    from examples.pingpong.messages import Ping, PingpongNode, PingView

    from seqbus.testing import Harness

    class Sender(PingpongNode):
        def __init__(self) -> None:
            super().__init__()
            self.seen: list[tuple[int, int]] = []

        def on_opened(self) -> None:
            self.send_ping(id=1, sent_at_ns=10)
            self.send(Ping(id=2, sent_at_ns=20))
            self.send(Ping.encode_fields(id=3, sent_at_ns=30))
            for bad in ("some text", 5, None, {"id": 4}):
                with pytest.raises(TypeError, match="takes a generated message or an encoded body"):
                    self.send(bad)

        def on_ping(self, msg: PingView, mine: bool) -> None:
            self.seen.append((msg.id, msg.sent_at_ns))

    bus = Harness(seed=3)
    node = bus.add(Sender, "SENDER", 1)
    bus.run(until=lambda: len(node.seen) == 3, for_ns=2_000_000_000)
    assert node.seen == [(1, 10), (2, 20), (3, 30)]
    assert node.stats.sent == 3
