"""``spark.read.format("seqbus")`` and ``spark.readStream.format("seqbus")``: Python data
sources (Spark 4) over session archives (docs/spark.md).

Options:

* ``message`` — ``"exchange.NewOrder"`` (or an unambiguous ``"NewOrder"``): the typed table of
  that message; without it, the envelope table (one row per sequenced message).
* ``table`` — ``"raw"``: one row per record, fragments included; ``"problems"``: one row per
  problem ``verify`` finds (file, offset, sequence).
* ``mode`` — ``PERMISSIVE`` (default: a corrupt record is logged with its position and skipped)
  or ``FAILFAST`` (the query fails naming the position).
* ``rowsPerPartition`` — the finest split of a segment (default 1,048,576 rows).
* streaming: ``startSequence`` (default: the archive's first), ``maxRecordsPerTrigger``.

Filters on ``sequence``, ``timestamp_ns`` and ``time`` (=, <, <=, >, >=) are pushed down: the
partitions only cover the index ranges inside them (``spark.sql.python.filterPushdown.enabled``
must be true; :func:`seqbus.spark.register` sets it).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    InputPartition,
    LessThan,
    LessThanOrEqual,
)
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from seqbus.archive import tables
from seqbus.archive._native import RawProblem, core
from seqbus.archive.errors import ArchiveError, CorruptRecordError, Problem
from seqbus.archive.reader import Archive

log = logging.getLogger("seqbus.spark")
U64_MAX = (1 << 64) - 1
DEFAULT_ROWS_PER_PARTITION = 1 << 20


@dataclass(frozen=True)
class SlicePartition(InputPartition):
    """The records with sequence in ``[lo, hi]`` (a message belongs to the partition holding
    its last fragment, wherever its earlier fragments lie)."""

    lo: int
    hi: int

    def __init__(self, lo: int, hi: int) -> None:
        object.__setattr__(self, "lo", lo)
        object.__setattr__(self, "hi", hi)
        object.__setattr__(self, "value", (lo, hi))


@dataclass(frozen=True)
class Plan:
    """What every partition needs to decode, pickled to the executors."""

    path: str
    table: str  # "envelope", "raw", "typed" or "problems"
    schema: pa.Schema
    message: str = ""
    schema_id: int = 0
    failfast: bool = False
    rows_per_partition: int = DEFAULT_ROWS_PER_PARTITION


#: Every option the source reads (Spark hands them over with lower-cased keys).
OPTIONS = {
    "path": "the archive directory",
    "message": "package.Message: that type's typed table",
    "table": "envelope (default), raw or problems",
    "mode": "PERMISSIVE (default) or FAILFAST",
    "rowsPerPartition": "records per partition",
    "pushdown": "false to turn filter pushdown off",
    "startSequence": "streaming: the first sequence to read",
    "maxRecordsPerTrigger": "streaming: records per micro-batch at most",
}
_KNOWN = {k.lower(): k for k in OPTIONS}


def options(given: Any) -> dict[str, str]:
    """The options Spark gave, by their documented names, whatever their case; an unknown one
    is an error naming the known ones (a misspelt option must not be ignored)."""
    out: dict[str, str] = {}
    for k, v in dict(given).items():
        name = _KNOWN.get(k.lower())
        if name is None:
            raise ArchiveError(
                f"unknown option {k!r} for the seqbus source; it knows: {', '.join(OPTIONS)}")
        out[name] = v
    return out


def _int_option(opts: dict[str, str], name: str, default: int | None) -> int | None:
    v = opts.get(name)
    if v is None:
        return default
    try:
        n = int(v)
    except ValueError:
        raise ArchiveError(f"option {name} must be an integer, not {v!r}") from None
    if n < 1:
        raise ArchiveError(f"option {name} must be positive, not {n}")
    return n


def _plan(opts: dict[str, str]) -> Plan:
    path = opts.get("path")
    if not path:
        raise ArchiveError('the seqbus source needs a path: spark.read.format("seqbus").load(PATH)')
    path = os.path.abspath(path)  # resolved on the driver, not on each executor
    a = Archive(path)
    mode = opts.get("mode", "PERMISSIVE").upper()
    if mode not in ("PERMISSIVE", "FAILFAST"):
        raise ArchiveError(f"mode must be PERMISSIVE or FAILFAST, not {mode!r}")
    rows = _int_option(opts, "rowsPerPartition", DEFAULT_ROWS_PER_PARTITION)
    assert rows is not None
    common: dict[str, Any] = {"path": path, "failfast": mode == "FAILFAST", "rows_per_partition": rows}
    table = opts.get("table", "").lower()
    message = opts.get("message", "")
    if table == "problems":
        return Plan(table="problems", schema=tables.PROBLEM_SCHEMA, **common)
    if table == "raw":
        return Plan(table="raw", schema=tables.RAW_SCHEMA, **common)
    if table not in ("", "envelope"):
        raise ArchiveError(f"table must be 'envelope', 'raw' or 'problems', not {table!r}")
    if message:
        sid, name = a.resolve(message)
        return Plan(table="typed", schema=tables.typed_schema(a.ir[sid], name), message=name,
                    schema_id=sid, **common)
    return Plan(table="envelope", schema=tables.ENVELOPE_SCHEMA, **common)


def _report(raw: list[RawProblem], failfast: bool) -> None:
    for p in raw:
        problem = Problem(*p)
        if failfast:
            raise CorruptRecordError(problem)
        log.warning("seqbus archive: corrupt record skipped: %s", problem)


def _read(plan: Plan, part: SlicePartition) -> Iterator[pa.RecordBatch]:
    try:
        if plan.table == "problems":
            rep = Archive(plan.path).verify()
            yield pa.RecordBatch.from_pylist(
                [{"file": p.file, "offset": p.offset, "sequence": p.sequence, "problem": p.message}
                 for p in rep.problems], schema=plan.schema)
            return
        r = core.ArchiveReader(plan.path)
        if plan.table == "envelope":
            rows, cols, raw = r.envelopes(part.lo, part.hi)
            _report(raw, plan.failfast)
            yield tables.envelope_batch(rows, cols)
        elif plan.table == "raw":
            rows, cols, raw = r.raw(part.lo, part.hi)
            _report(raw, plan.failfast)
            yield tables.raw_batch(rows, cols)
        else:
            rows, tcols, raw = r.typed(part.lo, part.hi, plan.schema_id, plan.message)
            _report(raw, plan.failfast)
            yield tables.typed_batch(plan.schema, rows, tcols)
    except (OSError, ValueError) as exc:
        raise ArchiveError(str(exc)) from None


def _ns(v: Any, col: str) -> tuple[int, int]:
    """The [lo, hi] nanosecond range of values equal to ``v`` in column ``col``."""
    if col == "time":
        if not isinstance(v, dt.datetime):
            raise TypeError(v)
        if v.tzinfo is None:
            v = v.astimezone()
        us = (v - dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)) // dt.timedelta(microseconds=1)
        return us * 1000, us * 1000 + 999
    return int(v), int(v)


class _Bounds:
    """Inclusive bounds on sequence and timestamp_ns gathered from pushed filters."""

    def __init__(self) -> None:
        self.seq = [0, U64_MAX]
        self.ts = [0, U64_MAX]

    def push(self, f: Filter, seq_col: str, ts_col: str) -> bool:
        if not isinstance(f, (EqualTo, GreaterThan, GreaterThanOrEqual, LessThan, LessThanOrEqual)):
            return False
        if len(f.attribute) != 1 or f.attribute[0] not in (seq_col, ts_col, "time"):
            return False
        col = f.attribute[0]
        b = self.seq if col == seq_col else self.ts
        try:
            lo, hi = _ns(f.value, col)
        except (TypeError, ValueError):
            return False
        if isinstance(f, EqualTo):
            b[0], b[1] = max(b[0], lo), min(b[1], hi)
        elif isinstance(f, GreaterThan):
            b[0] = max(b[0], hi + 1)
        elif isinstance(f, GreaterThanOrEqual):
            b[0] = max(b[0], lo)
        elif isinstance(f, LessThan):
            b[1] = min(b[1], lo - 1)
        else:
            b[1] = min(b[1], hi)
        return True

    def clamp(self) -> tuple[int, int, int, int]:
        c = [min(max(x, 0), U64_MAX) for x in (*self.seq, *self.ts)]
        return c[0], c[1], c[2], c[3]


def _partitions(plan: Plan, bounds: tuple[int, int, int, int]) -> list[SlicePartition]:
    if plan.table == "problems":
        return [SlicePartition(0, 0)]  # verify follows fragments across every segment: one pass
    seq_lo, seq_hi, ts_lo, ts_hi = bounds
    slices = Archive(plan.path).slices(seq_lo=seq_lo, seq_hi=seq_hi, ts_lo=ts_lo, ts_hi=ts_hi,
                                       max_rows=plan.rows_per_partition)
    return [SlicePartition(s.lo, s.hi) for s in slices]


class SeqbusReader(DataSourceReader):
    def __init__(self, plan: Plan) -> None:
        self.plan = plan
        self.bounds = _Bounds()

    def partitions(self) -> Sequence[InputPartition]:
        return _partitions(self.plan, self.bounds.clamp())

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, SlicePartition)
        return _read(self.plan, partition)


class SeqbusPushdownReader(SeqbusReader):
    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:  # noqa: N802 (Spark's name)
        if self.plan.table == "problems":
            yield from filters
            return
        names = self.plan.schema.names
        seq_col = "sequence" if "sequence" in names else "envelope_sequence"
        ts_col = "timestamp_ns" if "timestamp_ns" in names else "envelope_timestamp_ns"
        for f in filters:
            if not self.bounds.push(f, seq_col, ts_col):
                yield f


class SeqbusStreamReader(DataSourceStreamReader):
    """Follows a live archive: offsets are ``{"next": n}``, the next sequence to read, so a query
    restarted from its checkpoint reads on from exactly where its last batch ended."""

    def __init__(self, plan: Plan, opts: dict[str, str]) -> None:
        self.plan = plan
        self.start = _int_option(opts, "startSequence", None)
        self.max_records = _int_option(opts, "maxRecordsPerTrigger", None)
        self._next: int | None = None

    def initialOffset(self) -> dict[str, int]:  # noqa: N802
        if self.start is not None:
            return {"next": self.start}
        first = Archive(self.plan.path).first_sequence
        return {"next": first if first is not None else 1}

    def latestOffset(self) -> dict[str, int]:  # noqa: N802
        a = Archive(self.plan.path)
        last = a.last_sequence
        end = (last + 1) if last is not None else self.initialOffset()["next"]
        if self.max_records is not None:
            base = self._next if self._next is not None else self.initialOffset()["next"]
            end = min(end, base + self.max_records)
        self._next = max(end, self._next or 0)
        return {"next": self._next}

    def partitions(self, start: dict[str, int], end: dict[str, int]) -> Sequence[InputPartition]:
        lo, hi = int(start["next"]), int(end["next"]) - 1
        if hi < lo:
            return []
        return _partitions(self.plan, (lo, hi, 0, U64_MAX))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, SlicePartition)
        return _read(self.plan, partition)

    def commit(self, end: dict[str, int]) -> None:
        """Archives are immutable: nothing to release."""


class SeqbusDataSource(DataSource):
    """The ``seqbus`` format: session archives as DataFrames."""

    @classmethod
    def name(cls) -> str:
        return "seqbus"

    def schema(self) -> StructType:
        return from_arrow_schema(_plan(options(self.options)).schema)

    def reader(self, schema: StructType) -> DataSourceReader:
        opts = options(self.options)
        plan = _plan(opts)
        if opts.get("pushdown", "true").lower() == "false":
            return SeqbusReader(plan)
        return SeqbusPushdownReader(plan)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:  # noqa: N802
        opts = options(self.options)
        plan = _plan(opts)
        if plan.table == "problems":
            raise ArchiveError("the problems table is not a stream")
        return SeqbusStreamReader(plan, opts)


def describe(options: dict[str, str]) -> str:
    return json.dumps(options, sort_keys=True)
