"""Arrow schemas of the archive's tables and the assembly of decoded column buffers.

The Rust decoder (rust/crates/archive) fills buffers in the Arrow layout; this module names
their types, derived from the schema IR with the same rules (docs/spark.md), and wraps the
buffers into arrays without copying them.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa

from seqbus.archive._native import ColumnTree

UTC = "UTC"

_HEAD = [
    pa.field("sequence", pa.int64(), nullable=False),
    pa.field("timestamp_ns", pa.int64(), nullable=False),
    pa.field("time", pa.timestamp("us", tz=UTC), nullable=False),
    pa.field("account", pa.string(), nullable=False),
    pa.field("instance", pa.int32(), nullable=False),
    pa.field("command_seq", pa.int64(), nullable=False),
    pa.field("kind", pa.string(), nullable=False),
]

#: One row per message; a fragmented one whole, at its last fragment (``fragments`` > 1).
ENVELOPE_SCHEMA = pa.schema(
    _HEAD
    + [
        pa.field("schema_id", pa.int32(), nullable=False),
        pa.field("template_id", pa.int32(), nullable=False),
        pa.field("version", pa.int32(), nullable=False),
        pa.field("type", pa.string(), nullable=False),
        pa.field("size", pa.int32(), nullable=False),
        pa.field("fragments", pa.int32(), nullable=False),
    ]
)

#: One row per record as stored, fragments included (envelope flags 1: more follow, 2: last).
RAW_SCHEMA = pa.schema(
    _HEAD
    + [
        pa.field("flags", pa.int16(), nullable=False),
        pa.field("body_length", pa.int64(), nullable=False),
        pa.field("size", pa.int32(), nullable=False),
        pa.field("body", pa.binary(), nullable=False),
    ]
)

#: Columns every typed table starts with; one whose name a message field also has is renamed
#: ``envelope_<name>`` in that message's table (NewOrder.account → envelope_account).
TYPED_PREFIX = [
    pa.field("sequence", pa.int64(), nullable=False),
    pa.field("timestamp_ns", pa.int64(), nullable=False),
    pa.field("account", pa.string(), nullable=False),
    pa.field("instance", pa.int32(), nullable=False),
    pa.field("command_seq", pa.int64(), nullable=False),
    pa.field("version", pa.int32(), nullable=False),
]

PROBLEM_SCHEMA = pa.schema(
    [
        pa.field("file", pa.string(), nullable=False),
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("sequence", pa.int64(), nullable=False),
        pa.field("problem", pa.string(), nullable=False),
    ]
)

#: How every Parquet export writes (``seqbus archive export`` and the Spark export job):
#: snappy, timestamps as µs UTC (INT64), lists in the standard three-level layout.
PARQUET: dict[str, Any] = {"compression": "snappy", "coerce_timestamps": "us",
                           "use_compliant_nested_type": True}

_PRIMITIVES: dict[str, pa.DataType] = {
    "bool": pa.bool_(),
    "u8": pa.int16(),
    "u16": pa.int32(),
    "u32": pa.int64(),
    "u64": pa.decimal128(20, 0),
    "i8": pa.int8(),
    "i16": pa.int16(),
    "i32": pa.int32(),
    "i64": pa.int64(),
    "f32": pa.float32(),
    "f64": pa.float64(),
}


def _fixed_type(ir: dict[str, Any], t: dict[str, Any]) -> pa.DataType:
    kind = t["kind"]
    if kind == "primitive":
        return _PRIMITIVES[t["primitive"]]
    if kind == "char":
        return pa.string()
    if kind == "byte":
        return pa.binary()
    if kind == "enum":
        return pa.string()
    if kind == "flags":
        return pa.list_(pa.field("item", pa.string(), nullable=False))
    if kind == "struct":
        s = next(s for s in ir["structs"] if s["name"] == t["name"])
        return pa.struct(
            [pa.field(f["name"], _fixed_type(ir, f["type"]), nullable=False) for f in s["fields"]]
        )
    raise ValueError(f"unknown IR type kind {kind!r}")


def _block_fields(ir: dict[str, Any], block: dict[str, Any]) -> list[pa.Field]:
    out = []
    for f in block["fields"]:
        kind = f["kind"]
        if kind == "fixed":
            out.append(pa.field(f["name"], _fixed_type(ir, f["type"]), nullable=False))
        elif kind == "optional":
            out.append(pa.field(f["name"], _fixed_type(ir, f["type"]), nullable=True))
        elif kind == "string":
            out.append(pa.field(f["name"], pa.string(), nullable=False))
        elif kind == "bytes":
            out.append(pa.field(f["name"], pa.binary(), nullable=False))
        elif kind == "group":
            entry = pa.struct(_block_fields(ir, f["group"]))
            out.append(
                pa.field(f["name"], pa.list_(pa.field("item", entry, nullable=False)), nullable=False)
            )
        else:
            raise ValueError(f"unknown IR field kind {kind!r}")
    return out


def message_ir(ir: dict[str, Any], name: str) -> dict[str, Any]:
    for m in ir["messages"]:
        if m["name"] == name:
            return dict(m)
    names = ", ".join(m["name"] for m in ir["messages"])
    raise KeyError(f"package {ir['package']} has no message {name!r} (it has: {names})")


def typed_schema(ir: dict[str, Any], message: str) -> pa.Schema:
    """The Arrow schema of the typed table of ``message`` (envelope prefix, then its fields)."""
    m = message_ir(ir, message)
    fields = _block_fields(ir, m["body"])
    names = {f.name for f in fields}
    prefix = [f.with_name(f"envelope_{f.name}") if f.name in names else f for f in TYPED_PREFIX]
    return pa.schema(prefix + fields)


def _array(t: pa.DataType, node: ColumnTree) -> pa.Array:
    length, nulls, validity, bufs, kids = node
    vb = pa.py_buffer(validity) if validity is not None else None
    if pa.types.is_struct(t):
        children = [_array(t.field(i).type, k) for i, k in enumerate(kids)]
        return pa.StructArray.from_buffers(t, length, [vb], null_count=nulls, children=children)
    if pa.types.is_list(t):
        child = _array(t.value_type, kids[0])
        return pa.Array.from_buffers(
            t, length, [vb, pa.py_buffer(bufs[0])], null_count=nulls, children=[child]
        )
    return pa.Array.from_buffers(t, length, [vb, *(pa.py_buffer(b) for b in bufs)], null_count=nulls)


def typed_batch(schema: pa.Schema, rows: int, columns: list[ColumnTree]) -> pa.RecordBatch:
    arrays = [_array(f.type, c) for f, c in zip(schema, columns, strict=True)]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def envelope_batch(rows: int, cols: dict[str, Any]) -> pa.RecordBatch:
    return _flat_batch(ENVELOPE_SCHEMA, rows, cols)


def raw_batch(rows: int, cols: dict[str, Any]) -> pa.RecordBatch:
    return _flat_batch(RAW_SCHEMA, rows, cols)


def _flat_batch(schema: pa.Schema, rows: int, cols: dict[str, Any]) -> pa.RecordBatch:
    arrays = []
    for f in schema:
        c = cols[f.name]
        if isinstance(c, tuple):
            bufs = [None, pa.py_buffer(c[0]), pa.py_buffer(c[1])]
        else:
            bufs = [None, pa.py_buffer(c)]
        arrays.append(pa.Array.from_buffers(f.type, rows, bufs, null_count=0))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
