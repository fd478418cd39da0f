"""Decoded messages as readable lines or JSON lines (``seqbus archive cat``, ``seqbus archive tail``)."""

from __future__ import annotations

import base64
import datetime as dt
import json
from collections.abc import Callable, Iterator
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from seqbus.archive.reader import Archive, Slice

_PREFIX = {"sequence", "timestamp_ns", "account", "instance", "command_seq", "version"}


def parse_time(text: str) -> int:
    """Nanoseconds since the epoch from an integer or an ISO 8601 time (UTC unless it says)."""
    if text.isdigit():
        return int(text)
    frac_ns = 0
    body = text.rstrip("Z")
    if "." in body:  # keep nanoseconds that datetime would drop
        head, frac = body.split(".", 1)
        digits = "".join(c for c in frac if c.isdigit())
        rest = frac[len(digits):]
        frac_ns = int((digits + "000000000")[:9])
        body = head + rest
    t = dt.datetime.fromisoformat(body)
    if t.tzinfo is None:
        t = t.replace(tzinfo=dt.timezone.utc)
    return int(t.timestamp()) * 1_000_000_000 + frac_ns


def iso_ns(ns: int) -> str:
    t = dt.datetime.fromtimestamp(ns // 1_000_000_000, tz=dt.timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S") + f".{ns % 1_000_000_000:09d}Z"


def _node_mask(t: pa.Table, nodes: list[str]) -> Any:
    mask = None
    for n in nodes:
        acct, _, inst = n.partition(":")
        m = pc.equal(t["account"], acct)
        if inst:
            m = pc.and_(m, pc.equal(t["instance"], int(inst)))
        mask = m if mask is None else pc.or_(mask, m)
    return mask


def messages(
    a: Archive,
    *,
    types: list[str] | None = None,
    nodes: list[str] | None = None,
    slices: list[Slice] | None = None,
    on_slice: Callable[[Slice], None] | None = None,
    **bounds: Any,
) -> Iterator[dict[str, Any]]:
    """Every message in the bounds, decoded with the archive's IR, in sequence order: the
    envelope columns plus ``fields`` (the message's fields; None for an undecodable body)."""
    names = a.type_names()
    wanted = None if not types else {names[(sid, tid)] for sid, tid in
                                     (_key(a, t) for t in types)}
    for sl in a.slices(max_rows=4096, **bounds) if slices is None else slices:
        env = pa.Table.from_batches(list(a.envelope_batches([sl])))
        mask = None
        if wanted is not None:
            mask = pc.is_in(env["type"], pa.array(sorted(wanted)))
        if nodes:
            m = _node_mask(env, nodes)
            mask = m if mask is None else pc.and_(mask, m)
        if mask is not None:
            env = env.filter(mask)
        if on_slice is not None:
            on_slice(sl)
        if env.num_rows == 0:
            continue
        fields: dict[int, dict[str, Any]] = {}
        for typ in sorted(set(env["type"].to_pylist()) & set(names.values())):
            for batch in a.typed_batches(typ, [sl]):
                seq_col = "envelope_sequence" if "envelope_sequence" in batch.schema.names else "sequence"
                drop = {("envelope_" + c if "envelope_" + c in batch.schema.names else c) for c in _PREFIX}
                for r in batch.to_pylist():
                    fields[r[seq_col]] = {k: v for k, v in r.items() if k not in drop}
        for r in env.to_pylist():
            r["fields"] = fields.get(r["sequence"])
            yield r


def _key(a: Archive, typ: str) -> tuple[int, int]:
    sid, name = a.resolve(typ)
    m = next(m for m in a.ir[sid]["messages"] if m["name"] == name)
    return sid, int(m["id"])


def _plain(v: Any) -> Any:
    if isinstance(v, Decimal):
        return int(v)
    if isinstance(v, bytes):
        return {"base64": base64.b64encode(v).decode()}
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_plain(x) for x in v]
    return v


def json_line(r: dict[str, Any]) -> str:
    out = {
        "sequence": r["sequence"],
        "timestamp_ns": r["timestamp_ns"],
        "time": iso_ns(r["timestamp_ns"]),
        "account": r["account"],
        "instance": r["instance"],
        "command_seq": r["command_seq"],
        "kind": r["kind"],
        "type": r["type"],
        "size": r["size"],
        "fields": _plain(r["fields"]),
    }
    return json.dumps(out, ensure_ascii=False, separators=(",", ":"))


def _text(v: Any) -> str:
    if isinstance(v, Decimal):
        return str(int(v))
    if isinstance(v, bytes):
        return "0x" + v.hex() if v else "b''"
    if isinstance(v, str):
        return v if v and " " not in v and "=" not in v else json.dumps(v, ensure_ascii=False)
    if isinstance(v, dict):
        return "{" + " ".join(f"{k}={_text(x)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        return "[" + ", ".join(_text(x) for x in v) + "]"
    if v is None:
        return "-"
    return str(v)


def text_line(r: dict[str, Any]) -> str:
    head = (f"{r['sequence']:>10} {iso_ns(r['timestamp_ns'])} {r['account'] or '?'}:{r['instance']}"
            f" #{r['command_seq']} {r['type']}")
    f = r["fields"]
    if f is None:
        return head + ("" if r["type"].startswith("(") else " <not decoded>")
    return head + "".join(f" {k}={_text(v)}" for k, v in f.items())
