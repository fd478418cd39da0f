"""Property tests (hypothesis): random values of every field kind round-trip; random
truncations and byte flips of valid messages only ever raise DecodeError."""

from __future__ import annotations

import string
from types import ModuleType
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from seqbus.errors import DecodeError

SETTINGS = settings(max_examples=100, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def ints(bits: int, signed: bool) -> st.SearchStrategy[int]:
    if signed:
        return st.integers(-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    return st.integers(0, (1 << bits) - 1)


def chars(n: int) -> st.SearchStrategy[str]:
    alphabet = string.ascii_letters + string.digits + string.punctuation + " "
    return st.text(alphabet, max_size=n).map(lambda s: s.rstrip(" "))


def f32() -> st.SearchStrategy[float]:
    return st.floats(width=32, allow_nan=False)


def f64() -> st.SearchStrategy[float]:
    return st.floats(allow_nan=False)


def everything(a: ModuleType) -> st.SearchStrategy[Any]:
    inner = st.builds(a.Inner, a=ints(8, False), b=f32())
    outer = st.builds(a.Outer, inner=inner, tag=chars(3), raw=st.binary(max_size=2),
                      ok=st.booleans())
    sub = st.builds(a.EverythingItemsSub, v=ints(64, True), blob=st.binary(max_size=20))
    items = st.builds(a.EverythingItems, id=ints(32, False), label=st.text(max_size=10),
                      sub=st.lists(sub, max_size=3), note=st.none() | ints(16, True))
    return st.builds(
        a.Everything,
        b=st.booleans(), u8v=ints(8, False), u16v=ints(16, False), u32v=ints(32, False),
        u64v=ints(64, False), i8v=ints(8, True), i16v=ints(16, True), i32v=ints(32, True),
        i64v=ints(64, True), f32v=f32(), f64v=f64(), name=chars(6), raw=st.binary(max_size=4),
        color=st.sampled_from(list(a.Color)),
        perm=st.integers(0, 2**32 - 1).map(a.Perm),
        outer=outer,
        o_u64=st.none() | ints(64, False), o_color=st.none() | st.sampled_from(list(a.Color)),
        o_outer=st.none() | outer, o_f64=st.none() | f64(), o_char=st.none() | chars(2),
        items=st.lists(items, max_size=4), text=st.text(max_size=30),
        data=st.binary(max_size=30), empty=st.lists(st.builds(a.EverythingEmpty), max_size=3),
    )


def attrs(obj: Any, name_of: Any = str) -> Any:
    """Every field of a view, an entry view or a struct read as an attribute, as user code
    reads it, in the shape of ``to_dict()`` (groups as lists, structs as dicts, bytes as bytes).
    ``name_of`` makes the name passed to ``getattr``: the interned literal, or a copy built at
    run time (entry views and structs answer the first from their own getattro, the second
    from the generic lookup)."""
    if isinstance(obj, (bytes, memoryview)):
        return bytes(obj)
    if not hasattr(obj, "to_dict") or isinstance(obj, int):
        return obj
    out = {}
    for name in obj.to_dict():
        value = getattr(obj, name_of(name))
        if hasattr(value, "to_list"):  # a group of entry views
            value = [attrs(e, name_of) for e in value]
        out[name] = attrs(value, name_of)
    return out


@given(data=st.data())
@SETTINGS
def test_every_field_kind_round_trips(alltypes: ModuleType, data: st.DataObject) -> None:
    msg = data.draw(everything(alltypes))
    encoded = msg.encode()
    view = alltypes.Everything.decode(encoded)
    assert view.to_dict() == msg.to_dict()
    assert attrs(view) == attrs(view, lambda n: "".join(list(n))) == msg.to_dict()
    assert view.wire_size == len(encoded)
    assert alltypes.Everything.from_dict(view.to_dict()).encode() == encoded
    buf = bytearray(len(encoded) + 7)
    assert msg.encode_into(buf, 7) == len(encoded) and bytes(buf[7:]) == encoded


@given(data=st.data())
@SETTINGS
def test_truncations_and_flips_raise_only_decode_error(alltypes: ModuleType,
                                                       data: st.DataObject) -> None:
    encoded = data.draw(everything(alltypes)).encode()
    cut = data.draw(st.integers(0, len(encoded) - 1))
    with pytest.raises(DecodeError):
        alltypes.Everything.decode(encoded[:cut]).to_dict()
    flipped = bytearray(encoded)
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(flipped) - 1))
        flipped[i] = data.draw(st.integers(0, 255))
    try:
        alltypes.Everything.decode(bytes(flipped)).to_dict()
    except DecodeError:
        pass


def nested_orders(x: ModuleType) -> st.SearchStrategy[Any]:
    fill = st.builds(x.NewOrderLegsFills, qty=ints(32, False), price=ints(64, True))
    leg = st.builds(x.NewOrderLegs, symbol=chars(8), ratio=ints(16, False),
                    side=st.sampled_from(list(x.Side)), fills=st.lists(fill, max_size=5))
    return st.builds(
        x.NewOrder, order_id=ints(64, False), client_id=ints(32, False), symbol=chars(8),
        side=st.sampled_from(list(x.Side)),
        price=st.builds(x.Price, mantissa=ints(64, True), exponent=ints(8, True)),
        quantity=ints(32, False), stop_price=st.none() | ints(64, True),
        inst=st.integers(0, 3).map(x.ExecInst), expire_at=st.none() | ints(64, False),
        legs=st.lists(leg, max_size=6), account=st.text(max_size=20),
        memo=st.binary(max_size=20))


@given(data=st.data())
@SETTINGS
def test_spec_order_round_trips_and_survives_corruption(exchange: ModuleType,
                                                         data: st.DataObject) -> None:
    msg = data.draw(nested_orders(exchange))
    encoded = msg.encode()
    assert exchange.NewOrder.decode(encoded) == msg
    i = data.draw(st.integers(0, len(encoded) - 1))
    corrupt = bytearray(encoded)
    corrupt[i] ^= data.draw(st.integers(1, 255))
    try:
        exchange.NewOrder.decode(corrupt).to_dict()
    except DecodeError:
        pass
