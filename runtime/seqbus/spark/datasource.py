"""``spark.read.format("seqbus")`` and ``spark.readStream.format("seqbus")``: Python data
sources (Spark 4) over session archives (docs/spark.md).

Options:

* ``message`` — ``"exchange.NewOrder"`` (or an unambiguous ``"NewOrder"``): the typed table of
  that message; without it, the envelope table (one row per sequenced message).
* ``table`` — ``"problems"``: one row per corrupt record ``verify`` finds (file, offset, sequence).
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
    """Index positions ``[start, end)`` of one segment."""

    seg: str
    idx: str
    start: int
    end: int
    first_sequence: int

    def __init__(self, seg: str, idx: str, start: int, end: int, first_sequence: int) -> None:
        object.__setattr__(self, "seg", seg)
        object.__setattr__(self, "idx", idx)
        object.__setattr__(self, "start", start)
        object.__setattr__(self, "end", end)
        object.__setattr__(self, "first_sequence", first_sequence)
        object.__setattr__(self, "value", (seg, start, end))


@dataclass(frozen=True)
class Plan:
    """What every partition needs to decode, pickled to the executors."""

    path: str
    table: str  # "envelope", "typed" or "problems"
    schema: pa.Schema
    message: str = ""
    ir_text: str = ""
    names: tuple[tuple[tuple[int, int], str], ...] = ()
    failfast: bool = False
    rows_per_partition: int = DEFAULT_ROWS_PER_PARTITION


def _plan(options: dict[str, str]) -> Plan:
    path = options.get("path")
    if not path:
        raise ArchiveError('the seqbus source needs a path: spark.read.format("seqbus").load(PATH)')
    a = Archive(path)
    mode = options.get("mode", "PERMISSIVE").upper()
    if mode not in ("PERMISSIVE", "FAILFAST"):
        raise ArchiveError(f"mode must be PERMISSIVE or FAILFAST, not {mode!r}")
    rows = int(options.get("rowsPerPartition", DEFAULT_ROWS_PER_PARTITION))
    if rows < 1:
        raise ArchiveError(f"rowsPerPartition must be positive, not {rows}")
    common: dict[str, Any] = {"path": path, "failfast": mode == "FAILFAST", "rows_per_partition": rows}
    table = options.get("table", "")
    message = options.get("message", "")
    if table == "problems":
        return Plan(table="problems", schema=tables.PROBLEM_SCHEMA, **common)
    if table not in ("", "envelope"):
        raise ArchiveError(f"table must be 'envelope' or 'problems', not {table!r}")
    if message:
        sid, name = a.resolve(message)
        return Plan(table="typed", schema=tables.typed_schema(a.ir[sid], name), message=name,
                    ir_text=a.ir_text[sid], **common)
    return Plan(table="envelope", schema=tables.ENVELOPE_SCHEMA,
                names=tuple(sorted(a.type_names().items())), **common)


def _report(raw: list[RawProblem], failfast: bool) -> None:
    for p in raw:
        problem = Problem(*p)
        if failfast:
            raise CorruptRecordError(problem)
        log.warning("seqbus archive: corrupt record skipped: %s", problem)


def _read(plan: Plan, part: SlicePartition) -> Iterator[pa.RecordBatch]:
    try:
        if plan.table == "envelope":
            rows, cols, raw = core.archive_envelopes(
                part.seg, part.idx, part.start, part.end, dict(plan.names))
            _report(raw, plan.failfast)
            yield tables.envelope_batch(rows, cols)
        elif plan.table == "typed":
            rows, tcols, raw = core.archive_typed(
                part.seg, part.idx, part.start, part.end, plan.ir_text, plan.message)
            _report(raw, plan.failfast)
            yield tables.typed_batch(plan.schema, rows, tcols)
        else:
            _n, _good, _first, _ts, raw = core.archive_verify_segment(part.seg, part.idx)
            yield pa.RecordBatch.from_pylist(
                [{"file": f, "offset": o, "sequence": s, "problem": m} for f, o, s, m in raw],
                schema=plan.schema)
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
    a = Archive(plan.path)
    if plan.table == "problems":
        return [SlicePartition(s.seg, s.idx, 0, s.count, s.first_sequence) for s in a.segments()]
    seq_lo, seq_hi, ts_lo, ts_hi = bounds
    if seq_lo > seq_hi or ts_lo > ts_hi:
        return []
    slices = a.slices(seq_lo=seq_lo, seq_hi=seq_hi, ts_lo=ts_lo, ts_hi=ts_hi,
                      max_rows=plan.rows_per_partition)
    return [SlicePartition(s.seg, s.idx, s.start, s.end, s.first_sequence) for s in slices]


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

    def __init__(self, plan: Plan, options: dict[str, str]) -> None:
        self.plan = plan
        start = options.get("startSequence")
        self.start = int(start) if start is not None else None
        mx = options.get("maxRecordsPerTrigger")
        self.max_records = int(mx) if mx is not None else None
        if self.max_records is not None and self.max_records < 1:
            raise ArchiveError(f"maxRecordsPerTrigger must be positive, not {mx}")
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
        return from_arrow_schema(_plan(dict(self.options)).schema)

    def reader(self, schema: StructType) -> DataSourceReader:
        plan = _plan(dict(self.options))
        if self.options.get("pushdown", "true").lower() == "false":
            return SeqbusReader(plan)
        return SeqbusPushdownReader(plan)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:  # noqa: N802
        plan = _plan(dict(self.options))
        if plan.table == "problems":
            raise ArchiveError("the problems table is not a stream")
        return SeqbusStreamReader(plan, dict(self.options))


def describe(options: dict[str, str]) -> str:
    return json.dumps(options, sort_keys=True)
