"""``python -m benchmarks.codec``: see the package docstring; ``--quick`` for a short run."""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import struct
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent.parent
sys.path.insert(0, str(ROOT))

import msgspec  # noqa: E402
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory  # noqa: E402

import examples.exchange.messages as x  # noqa: E402

Op = Callable[[], object]


# -- the message ------------------------------------------------------------------------------

def seqbus_order() -> Any:
    return x.NewOrder(
        order_id=1_234_567_890, client_id=42, symbol="AAPL", side=x.Side.Buy,
        price=x.Price(mantissa=18_950, exponent=-2), quantity=100, stop_price=None,
        inst=x.ExecInst.PostOnly, expire_at=1_700_000_000_000_000_000,
        legs=[
            x.NewOrderLegs(symbol="MSFT", ratio=1, side=x.Side.Sell, fills=[
                x.NewOrderLegsFills(qty=10, price=41_500), x.NewOrderLegsFills(qty=5, price=41_510)]),
            x.NewOrderLegs(symbol="GOOG", ratio=2, side=x.Side.Buy, fills=[
                x.NewOrderLegsFills(qty=7, price=17_320)]),
        ],
        account="trader-0001", memo=b"client-tag-77",
    )


# -- msgspec ----------------------------------------------------------------------------------

class MPrice(msgspec.Struct, array_like=True):
    mantissa: int
    exponent: int


class MFill(msgspec.Struct, array_like=True):
    qty: int
    price: int


class MLeg(msgspec.Struct, array_like=True):
    symbol: str
    ratio: int
    side: int
    fills: list[MFill]


class MOrder(msgspec.Struct, array_like=True):
    order_id: int
    client_id: int
    symbol: str
    side: int
    price: MPrice
    quantity: int
    stop_price: int | None
    inst: int
    expire_at: int | None
    legs: list[MLeg]
    account: str
    memo: bytes


def msgspec_order(o: Any) -> MOrder:
    return MOrder(o.order_id, o.client_id, o.symbol, int(o.side),
                  MPrice(o.price.mantissa, o.price.exponent), o.quantity, o.stop_price,
                  int(o.inst), o.expire_at,
                  [MLeg(leg.symbol, leg.ratio, int(leg.side),
                        [MFill(f.qty, f.price) for f in leg.fills]) for leg in o.legs],
                  o.account, o.memo)


# -- protobuf (message classes built from a descriptor: no protoc needed) ----------------------

def protobuf_classes() -> dict[str, Any]:
    fdp = descriptor_pb2.FileDescriptorProto(name="bench_order.proto", package="bench",
                                             syntax="proto3")
    F = descriptor_pb2.FieldDescriptorProto

    def msg(name: str, fields: list[tuple[str, int, str | None]]) -> None:
        m = fdp.message_type.add(name=name)
        for i, (fname, ftype, tname) in enumerate(fields, 1):
            f = m.field.add(name=fname, number=i, type=ftype, label=F.LABEL_OPTIONAL)
            if tname is not None:
                f.type_name = tname
                if tname.startswith(".bench.Fill") or tname.startswith(".bench.Leg"):
                    f.label = F.LABEL_REPEATED
            if fname in ("stop_price", "expire_at"):
                f.proto3_optional = True
                f.oneof_index = len(m.oneof_decl)
                m.oneof_decl.add(name=f"_{fname}")

    msg("Price", [("mantissa", F.TYPE_SINT64, None), ("exponent", F.TYPE_SINT32, None)])
    msg("Fill", [("qty", F.TYPE_UINT32, None), ("price", F.TYPE_SINT64, None)])
    msg("Leg", [("symbol", F.TYPE_STRING, None), ("ratio", F.TYPE_UINT32, None),
                ("side", F.TYPE_UINT32, None), ("fills", F.TYPE_MESSAGE, ".bench.Fill")])
    msg("NewOrder", [
        ("order_id", F.TYPE_UINT64, None), ("client_id", F.TYPE_UINT32, None),
        ("symbol", F.TYPE_STRING, None), ("side", F.TYPE_UINT32, None),
        ("price", F.TYPE_MESSAGE, ".bench.Price"), ("quantity", F.TYPE_UINT32, None),
        ("stop_price", F.TYPE_SINT64, None), ("inst", F.TYPE_UINT32, None),
        ("expire_at", F.TYPE_UINT64, None), ("legs", F.TYPE_MESSAGE, ".bench.Leg"),
        ("account", F.TYPE_STRING, None), ("memo", F.TYPE_BYTES, None)])
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fdp)
    return {n: message_factory.GetMessageClass(pool.FindMessageTypeByName(f"bench.{n}"))
            for n in ("Price", "Fill", "Leg", "NewOrder")}


def protobuf_order(pb: dict[str, Any], o: Any) -> Any:
    m = pb["NewOrder"](order_id=o.order_id, client_id=o.client_id, symbol=o.symbol,
                       side=int(o.side), quantity=o.quantity, inst=int(o.inst),
                       expire_at=o.expire_at, account=o.account, memo=o.memo)
    m.price.mantissa, m.price.exponent = o.price.mantissa, o.price.exponent
    for leg in o.legs:
        pl = m.legs.add(symbol=leg.symbol, ratio=leg.ratio, side=int(leg.side))
        for f in leg.fills:
            pl.fills.add(qty=f.qty, price=f.price)
    return m


def protobuf_to_python(m: Any) -> dict[str, Any]:
    return {
        "order_id": m.order_id, "client_id": m.client_id, "symbol": m.symbol, "side": m.side,
        "price": {"mantissa": m.price.mantissa, "exponent": m.price.exponent},
        "quantity": m.quantity,
        "stop_price": m.stop_price if m.HasField("stop_price") else None, "inst": m.inst,
        "expire_at": m.expire_at if m.HasField("expire_at") else None,
        "legs": [{"symbol": leg.symbol, "ratio": leg.ratio, "side": leg.side,
                  "fills": [{"qty": f.qty, "price": f.price} for f in leg.fills]}
                 for leg in m.legs],
        "account": m.account, "memo": m.memo,
    }


# -- struct: a hand-written codec of the same wire format, for scale ---------------------------

HEAD = struct.Struct("<HHHH")
BLOCK = struct.Struct("<QI8sBqbIB q H B Q".replace(" ", ""))
LEG = struct.Struct("<8sHB")
FILL = struct.Struct("<Iq")
GROUP = struct.Struct("<HBBI")
U32 = struct.Struct("<I")


def struct_encode(o: Any) -> bytes:
    parts = [HEAD.pack(54, 1, 7, 2),
             BLOCK.pack(o.order_id, o.client_id, o.symbol.encode(), int(o.side),
                        o.price.mantissa, o.price.exponent, o.quantity,
                        o.stop_price is not None, o.stop_price or 0, int(o.inst),
                        o.expire_at is not None, o.expire_at or 0),
             b"\x01\x02", GROUP.pack(11, 1, 0, len(o.legs))]
    for leg in o.legs:
        parts.append(LEG.pack(leg.symbol.encode(), leg.ratio, int(leg.side)))
        parts.append(GROUP.pack(12, 0, 0, len(leg.fills)))
        parts.extend(FILL.pack(f.qty, f.price) for f in leg.fills)
    acc = o.account.encode()
    parts += [U32.pack(len(acc)), acc, U32.pack(len(o.memo)), o.memo]
    return b"".join(parts)


def struct_decode(b: bytes) -> dict[str, Any]:
    (oid, cid, sym, side, mant, exp, qty, has_stop, stop, inst, has_exp, exp_at
     ) = BLOCK.unpack_from(b, 8)
    pos = 8 + 54 + 2
    _, _, _, n = GROUP.unpack_from(b, pos)
    pos += 8
    legs = []
    for _ in range(n):
        lsym, ratio, lside = LEG.unpack_from(b, pos)
        pos += 11
        _, _, _, nf = GROUP.unpack_from(b, pos)
        pos += 8
        fills = []
        for _ in range(nf):
            fq, fp = FILL.unpack_from(b, pos)
            fills.append({"qty": fq, "price": fp})
            pos += 12
        legs.append({"symbol": lsym.rstrip(b"\0").decode(), "ratio": ratio, "side": lside,
                     "fills": fills})
    (la,) = U32.unpack_from(b, pos)
    account = b[pos + 4:pos + 4 + la].decode()
    pos += 4 + la
    (lm,) = U32.unpack_from(b, pos)
    memo = b[pos + 4:pos + 4 + lm]
    return {"order_id": oid, "client_id": cid, "symbol": sym.rstrip(b"\0").decode(),
            "side": side, "price": {"mantissa": mant, "exponent": exp}, "quantity": qty,
            "stop_price": stop if has_stop else None, "inst": inst,
            "expire_at": exp_at if has_exp else None, "legs": legs, "account": account,
            "memo": memo}


ORDER_ID_QTY = struct.Struct("<Q")
QTY = struct.Struct("<I")


def struct_partial(b: bytes) -> tuple[int, int]:
    return ORDER_ID_QTY.unpack_from(b, 8)[0], QTY.unpack_from(b, 8 + 30)[0]


# -- timing -----------------------------------------------------------------------------------

def measure(ops: dict[str, Op], number: int, rounds: int) -> dict[str, list[float]]:
    """ns per call of each op in each of ``rounds`` interleaved rounds of ``number`` calls
    (interleaving spreads a busy machine's noise over every contender alike)."""
    times: dict[str, list[float]] = {name: [] for name in ops}
    for _ in range(rounds):
        for name, op in ops.items():
            loop = range(number)
            t0 = time.perf_counter_ns()
            for _ in loop:
                op()
            times[name].append((time.perf_counter_ns() - t0) / number)
    return times


def summary(times: dict[str, list[float]]) -> list[tuple[str, float, float, float]]:
    """Per op: median and 90th percentile of its rounds (ns/call), and the median over rounds
    of its time divided by the first op's time in the same round (a ratio per round cancels
    the machine's slower and faster moments, which both sides of a round share)."""
    ours = next(iter(times.values()))
    rows = []
    for name, ts in times.items():
        ratios = [t / o for t, o in zip(ts, ours)]
        rows.append((name, statistics.median(ts), statistics.quantiles(ts, n=10)[-1],
                     statistics.median(ratios)))
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.codec")
    ap.add_argument("--quick", action="store_true", help="fewer iterations")
    args = ap.parse_args(argv)
    number, rounds = (1_000, 5) if args.quick else (2_000, 60)

    order = seqbus_order()
    data = order.encode()
    morder = msgspec_order(order)
    menc = msgspec.msgpack.Encoder()
    mdata = menc.encode(morder)
    mdec = msgspec.msgpack.Decoder(MOrder)
    jenc, jdec = msgspec.json.Encoder(), msgspec.json.Decoder(MOrder)
    jdata = jenc.encode(morder)
    pb = protobuf_classes()
    porder = protobuf_order(pb, order)
    pdata = porder.SerializeToString()
    sdata = struct_encode(order)
    assert sdata == data, "the struct codec must write the same bytes as seqc's"
    assert struct_decode(data) == x.NewOrder.decode(data).to_dict() | {
        "side": 1, "inst": 1, "price": {"mantissa": 18_950, "exponent": -2}}
    assert mdec.decode(mdata) == morder and pb["NewOrder"].FromString(pdata) == porder
    buf = bytearray(1024)
    NewOrder, View = x.NewOrder, x.NewOrder.decode

    def builder() -> int:
        b = x.NewOrderBuilder(buf)
        b.order_id = 1_234_567_890
        b.client_id = 42
        b.symbol = "AAPL"
        b.side = x.Side.Buy
        b.price = order.price
        b.quantity = 100
        b.inst = 1
        b.expire_at = 1_700_000_000_000_000_000
        legs = b.legs(2)
        legs.next()
        legs.symbol, legs.ratio, legs.side = "MSFT", 1, x.Side.Sell
        fills = legs.fills(2)
        fills.next()
        fills.qty, fills.price = 10, 41_500
        fills.next()
        fills.qty, fills.price = 5, 41_510
        legs.next()
        legs.symbol, legs.ratio, legs.side = "GOOG", 2, x.Side.Buy
        fills = legs.fills(1)
        fills.next()
        fills.qty, fills.price = 7, 17_320
        b.account = "trader-0001"
        b.memo = b"client-tag-77"
        return int(b.finish())

    assert bytes(buf[:builder()]) == data

    def partial(view: Callable[[Any], Any], raw: Any) -> Op:
        def op() -> object:
            v = view(raw)
            return v.order_id, v.quantity
        return op

    Side, ExecInst, Price = x.Side, x.ExecInst, x.Price
    Legs, Fills = x.NewOrderLegs, x.NewOrderLegsFills

    # -- the user path (issue 13): what users write, beside msgspec in the same run ----------

    def user_construct_encode() -> bytes:  # typed objects as in SPEC §3, enum members passed
        return NewOrder(
            order_id=1_234_567_890, client_id=42, symbol="AAPL", side=Side.Buy,
            price=Price(mantissa=18_950, exponent=-2), quantity=100, stop_price=None,
            inst=ExecInst.PostOnly, expire_at=1_700_000_000_000_000_000,
            legs=[Legs(symbol="MSFT", ratio=1, side=Side.Sell, fills=[
                Fills(qty=10, price=41_500), Fills(qty=5, price=41_510)]),
                Legs(symbol="GOOG", ratio=2, side=Side.Buy, fills=[
                    Fills(qty=7, price=17_320)])],
            account="trader-0001", memo=b"client-tag-77").encode()

    def user_construct_encode_int() -> bytes:  # the same, an int for the flags field
        return NewOrder(
            order_id=1_234_567_890, client_id=42, symbol="AAPL", side=Side.Buy,
            price=Price(mantissa=18_950, exponent=-2), quantity=100, stop_price=None,
            inst=1, expire_at=1_700_000_000_000_000_000,
            legs=[Legs(symbol="MSFT", ratio=1, side=Side.Sell, fills=[
                Fills(qty=10, price=41_500), Fills(qty=5, price=41_510)]),
                Legs(symbol="GOOG", ratio=2, side=Side.Buy, fills=[
                    Fills(qty=7, price=17_320)])],
            account="trader-0001", memo=b"client-tag-77").encode()

    def user_encode_fields() -> bytes:  # no value objects: entries as tuples of their fields
        return NewOrder.encode_fields(
            order_id=1_234_567_890, client_id=42, symbol="AAPL", side=Side.Buy,
            price=(18_950, -2), quantity=100, stop_price=None,
            inst=1, expire_at=1_700_000_000_000_000_000,
            legs=[("MSFT", 1, Side.Sell, [(10, 41_500), (5, 41_510)]),
                  ("GOOG", 2, Side.Buy, [(7, 17_320)])],
            account="trader-0001", memo=b"client-tag-77")

    def msgspec_construct_encode() -> bytes:
        return menc.encode(MOrder(
            order_id=1_234_567_890, client_id=42, symbol="AAPL", side=Side.Buy,
            price=MPrice(mantissa=18_950, exponent=-2), quantity=100, stop_price=None,
            inst=ExecInst.PostOnly, expire_at=1_700_000_000_000_000_000,
            legs=[MLeg(symbol="MSFT", ratio=1, side=Side.Sell, fills=[
                MFill(qty=10, price=41_500), MFill(qty=5, price=41_510)]),
                MLeg(symbol="GOOG", ratio=2, side=Side.Buy, fills=[
                    MFill(qty=7, price=17_320)])],
            account="trader-0001", memo=b"client-tag-77"))

    assert user_construct_encode() == data == user_encode_fields()
    assert user_construct_encode_int() == data
    assert mdec.decode(msgspec_construct_encode()) == morder

    def read_all(v: Any) -> object:
        """Every field of a view or a decoded msgspec Struct, groups iterated."""
        p = v.price
        r: object = (v.order_id, v.client_id, v.symbol, v.side, p.mantissa, p.exponent,
                     v.quantity, v.stop_price, v.inst, v.expire_at)
        for leg in v.legs:
            r = (leg.symbol, leg.ratio, leg.side)
            for f in leg.fills:
                r = (f.qty, f.price)
        return r, v.account, v.memo

    def read_all_indexed(v: Any) -> object:
        """The same, groups read by index (a fresh entry each)."""
        p = v.price
        r: object = (v.order_id, v.client_id, v.symbol, v.side, p.mantissa, p.exponent,
                     v.quantity, v.stop_price, v.inst, v.expire_at)
        legs = v.legs
        for i in range(len(legs)):
            leg = legs[i]
            r = (leg.symbol, leg.ratio, leg.side)
            fills = leg.fills
            for k in range(len(fills)):
                r = (fills[k].qty, fills[k].price)
        return r, v.account, v.memo

    assert read_all(View(data))[1:] == read_all(mdec.decode(mdata))[1:]

    sections: list[tuple[str, dict[str, Op]]] = [
        ("user path: construct typed objects + encode (enum members passed)", {
            "seqbus NewOrder(...).encode()": user_construct_encode,
            "msgspec Structs + msgpack": msgspec_construct_encode,
        }),
        ("user path: the same, an int passed to the flags field", {
            "seqbus NewOrder(..., inst=1).encode()": user_construct_encode_int,
            "msgspec Structs + msgpack": msgspec_construct_encode,
        }),
        ("user path: encode from fields, no objects built (entries as tuples)", {
            "seqbus NewOrder.encode_fields(...)": user_encode_fields,
            "msgspec Structs + msgpack": msgspec_construct_encode,
        }),
        ("user path: read every field through the view, iterating groups", {
            "seqbus decode(b) + every field": lambda: read_all(View(data)),
            "msgspec decode + every attribute": lambda: read_all(mdec.decode(mdata)),
        }),
        ("user path: the same, groups read by index", {
            "seqbus decode(b) + every field, by index": lambda: read_all_indexed(View(data)),
            "msgspec decode + every attribute": lambda: read_all_indexed(mdec.decode(mdata)),
        }),
        ("encode (object -> bytes)", {
            "seqbus NewOrder.encode()": order.encode,
            "seqbus NewOrderBuilder -> buffer": builder,
            "msgspec msgpack": lambda: menc.encode(morder),
            "msgspec json": lambda: jenc.encode(morder),
            "protobuf": porder.SerializeToString,
            "struct (hand-written)": lambda: struct_encode(order),
        }),
        ("full decode (bytes -> Python values)", {
            "seqbus decode().to_value()": lambda: View(data).to_value(),
            "seqbus decode().to_dict()": lambda: View(data).to_dict(),
            "msgspec msgpack": lambda: mdec.decode(mdata),
            "msgspec json": lambda: jdec.decode(jdata),
            "protobuf (parse + to Python)": lambda: protobuf_to_python(
                pb["NewOrder"].FromString(pdata)),
            "protobuf (parse only)": lambda: pb["NewOrder"].FromString(pdata),
            "struct (hand-written)": lambda: struct_decode(data),
        }),
        ("partial read (new view, order_id + quantity)", {
            "seqbus NewOrder.decode(buf)": partial(View, data),
            "msgspec msgpack": partial(mdec.decode, mdata),
            "protobuf": partial(pb["NewOrder"].FromString, pdata),
            "struct (hand-written)": lambda: struct_partial(data),
        }),
    ]
    print(f"NewOrder (SPEC §3): {len(data)} bytes seqbus, {len(mdata)} msgpack, "
          f"{len(jdata)} json, {len(pdata)} protobuf")
    print(f"python {platform.python_version()}, msgspec {msgspec.__version__}, "
          f"{number} calls x {rounds} interleaved rounds: median and p90 of the rounds, ratio = "
          "median of the per-round ratios; load average "
          f"{' '.join(f'{x:.1f}' for x in os.getloadavg())} at start\n")
    for title, ops in sections:
        print(f"{title}")
        print(f"  {'':44} {'ns/msg':>9} {'p90':>7} {'vs seqbus':>10}")
        for name, median, p90, ratio in summary(measure(ops, number, rounds)):
            print(f"  {name:44} {median:9.0f} {p90:7.0f} {ratio:9.2f}x")
        print()
    print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())} at the end")
    _ = NewOrder
    return 0


if __name__ == "__main__":
    sys.exit(main())
