"""Opening an archive and reading it as Arrow record batches (docs/archive.md)."""

from __future__ import annotations

import functools
import json
import logging
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from seqbus.archive import tables
from seqbus.archive._native import NativeReader, RawProblem, core
from seqbus.archive.errors import ArchiveError, CorruptRecordError, Problem

log = logging.getLogger("seqbus.archive")

MANIFEST = "archive.json"
U64_MAX = (1 << 64) - 1
#: Rows per record batch (and the finest partition) unless asked otherwise.
DEFAULT_BATCH_ROWS = 1 << 17

ProblemHandler = Callable[[Problem], None]


@dataclass(frozen=True)
class SegmentRef:
    """One segment: its files, first sequence and how many records its index lists now."""

    number: int
    seg: str
    idx: str
    first_sequence: int
    count: int
    first_timestamp_ns: int
    last_timestamp_ns: int

    @property
    def last_sequence(self) -> int:
        return self.first_sequence + self.count - 1


@dataclass(frozen=True)
class Slice:
    """The records with sequence in ``[lo, hi]`` (inclusive): the unit of a batch and of a
    partition. A message belongs to the slice holding its last record, so slices that cut
    the archive anywhere, across segments too, hand out every message once."""

    lo: int
    hi: int

    @property
    def sequences(self) -> tuple[int, int]:
        return self.lo, self.hi

    @property
    def records(self) -> int:
        return self.hi - self.lo + 1


@dataclass
class VerifyReport:
    segments: int = 0
    records: int = 0
    good: int = 0
    #: Messages fragmented over several records (across segments too) that reassembled.
    fragmented_messages: int = 0
    first_sequence: int | None = None
    last_sequence: int | None = None
    problems: list[Problem] = field(default_factory=list)
    #: Fragmented messages whose sender stopped between fragments (the account's next
    #: message began anew): never delivered by any reader; warnings, not damage.
    abandoned_messages: int = 0
    warnings: list[Problem] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems


def _problems(raw: list[RawProblem], handler: ProblemHandler) -> None:
    for p in raw:
        handler(Problem(*p))


def _native(call: Callable[[], Any]) -> Any:
    try:
        return call()
    except (OSError, ValueError) as exc:
        raise ArchiveError(str(exc)) from None


class Archive:
    """A session archive directory. Reading a live (unsealed) archive sees what its writer has
    flushed; :meth:`refresh` picks up what came since.

    Every reader hands out each message whole and once: a message fragmented across records
    (and across segments) is one row, at its last fragment; :meth:`raw_table` lists the
    records themselves. Control messages are decoded with the bus's schema even when the
    archive does not store it.

    ``on_problem``: what a corrupt record does — "report" (kept in :attr:`problems` and logged),
    "collect" (kept only) or "fail" (raises :class:`CorruptRecordError`)."""

    def __init__(self, path: str | os.PathLike[str], *, on_problem: str = "report") -> None:
        if on_problem not in ("report", "collect", "fail"):
            raise ArchiveError(
                f"on_problem must be 'report', 'collect' or 'fail', not {on_problem!r}")
        self.path = Path(path)
        self.on_problem = on_problem
        self.problems: list[Problem] = []
        self._seen: set[Problem] = set()
        self.refresh()

    def refresh(self) -> None:
        m = self.path / MANIFEST
        if not m.exists():
            raise ArchiveError(f"{self.path}: not a seqbus archive (no {MANIFEST})")
        try:
            self.manifest: dict[str, Any] = json.loads(m.read_text())
        except (OSError, ValueError) as exc:
            raise ArchiveError(f"{m}: {exc}") from None
        if self.manifest.get("format") != "seqbus-archive" or self.manifest.get("version") != 1:
            raise ArchiveError(f"{m}: not a version 1 seqbus archive manifest")
        self.native: NativeReader = _native(functools.partial(core.ArchiveReader, str(self.path)))
        self.ir_text: dict[int, str] = {}
        self.ir: dict[int, dict[str, Any]] = {}
        for sid, _package, text, _builtin in self.native.schemas():
            self.ir_text[sid] = text
            self.ir[sid] = json.loads(text)

    @property
    def sealed(self) -> bool:
        return bool(self.manifest["sealed"])

    @property
    def session(self) -> str:
        return str(self.manifest["session"])

    def report(self, problem: Problem) -> None:
        """What happens to a corrupt record: kept in :attr:`problems` and logged, or raised."""
        if self.on_problem == "fail":
            raise CorruptRecordError(problem)
        if problem in self._seen:  # the same record met again by another table
            return
        self._seen.add(problem)
        self.problems.append(problem)
        if self.on_problem == "report":
            log.warning("corrupt archive record skipped: %s", problem)

    def segments(self) -> list[SegmentRef]:
        return [SegmentRef(*s) for s in self.native.segments()]

    @property
    def first_sequence(self) -> int | None:
        segs = [s for s in self.segments() if s.count]
        return segs[0].first_sequence if segs else None

    @property
    def last_sequence(self) -> int | None:
        segs = [s for s in self.segments() if s.count]
        return segs[-1].last_sequence if segs else None

    def type_names(self) -> dict[tuple[int, int], str]:
        """``(schema id, template id) → "package.Message"`` for every schema the archive is
        decoded with (the bus's included)."""
        return dict(self.native.type_names())

    def resolve(self, message: str) -> tuple[int, str]:
        """(schema id, message name) of ``"package.Message"`` or an unambiguous ``"Message"``."""
        pkg, _, name = message.rpartition(".")
        hits = [
            (sid, m["name"])
            for sid, ir in self.ir.items()
            if not pkg or ir["package"] == pkg
            for m in ir["messages"]
            if m["name"] == name
        ]
        if len(hits) == 1:
            return hits[0]
        known = ", ".join(sorted(self.type_names().values()))
        if not hits:
            raise ArchiveError(f"no message {message!r} in this archive's schemas ({known})")
        raise ArchiveError(f"{message!r} is ambiguous; name its package ({known})")

    def bounds(
        self,
        *,
        seq_lo: int | None = None,
        seq_hi: int | None = None,
        ts_lo: int | None = None,
        ts_hi: int | None = None,
    ) -> tuple[int, int] | None:
        """The inclusive sequence range of the records within the (inclusive) bounds, or None
        (sequencer time never decreases, so time bounds are a sequence range too)."""
        c = _clamp(seq_lo, seq_hi, ts_lo, ts_hi)
        return None if c is None else self.native.bounds(*c)

    def slices(
        self,
        *,
        seq_lo: int | None = None,
        seq_hi: int | None = None,
        ts_lo: int | None = None,
        ts_hi: int | None = None,
        max_rows: int = DEFAULT_BATCH_ROWS,
    ) -> list[Slice]:
        """The records within the (inclusive) bounds as slices of at most ``max_rows`` records;
        segments outside the bounds are not opened."""
        c = _clamp(seq_lo, seq_hi, ts_lo, ts_hi)
        if c is None:
            return []
        return [Slice(lo, hi) for lo, hi in self.native.plan(*c, max(1, max_rows))]

    # -- record batches ----------------------------------------------------------------------

    def envelope_batches(self, slices: list[Slice] | None = None, **bounds: Any) -> Iterator[pa.RecordBatch]:
        """The envelope table: one row per message (fragmented ones whole, at their last
        fragment, with their fragment count)."""
        for sl in self.slices(**bounds) if slices is None else slices:
            rows, cols, raw = _native(functools.partial(self.native.envelopes, sl.lo, sl.hi))
            _problems(raw, self.report)
            yield tables.envelope_batch(rows, cols)

    def raw_batches(self, slices: list[Slice] | None = None, **bounds: Any) -> Iterator[pa.RecordBatch]:
        """The raw table: one row per record as stored, fragments included, with its body."""
        for sl in self.slices(**bounds) if slices is None else slices:
            rows, cols, raw = _native(functools.partial(self.native.raw, sl.lo, sl.hi))
            _problems(raw, self.report)
            yield tables.raw_batch(rows, cols)

    def typed_schema(self, message: str) -> pa.Schema:
        sid, name = self.resolve(message)
        return tables.typed_schema(self.ir[sid], name)

    def typed_batches(
        self, message: str, slices: list[Slice] | None = None, **bounds: Any
    ) -> Iterator[pa.RecordBatch]:
        sid, name = self.resolve(message)
        schema = tables.typed_schema(self.ir[sid], name)
        for sl in self.slices(**bounds) if slices is None else slices:
            rows, cols, raw = _native(functools.partial(self.native.typed, sl.lo, sl.hi, sid, name))
            _problems(raw, self.report)
            yield tables.typed_batch(schema, rows, cols)

    def envelope_table(self, **bounds: Any) -> pa.Table:
        return pa.Table.from_batches(list(self.envelope_batches(**bounds)), tables.ENVELOPE_SCHEMA)

    def raw_table(self, **bounds: Any) -> pa.Table:
        return pa.Table.from_batches(list(self.raw_batches(**bounds)), tables.RAW_SCHEMA)

    def table(self, message: str, **bounds: Any) -> pa.Table:
        """The typed table of one message type (``"exchange.NewOrder"`` or ``"NewOrder"``)."""
        return pa.Table.from_batches(
            list(self.typed_batches(message, **bounds)), self.typed_schema(message)
        )

    def stream(self, slices: list[Slice] | None = None, **bounds: Any) -> Iterator[tuple[int, bool, bytes]]:
        """The records as a live node's core sees them, in order: ``(sequence, True, message)``
        for a whole message (envelope with flags 0, then the whole body, at its last
        fragment) and ``(sequence, False, envelope)`` for a record that is not one (a fragment
        before the last, or one that does not reassemble, which is reported)."""
        for sl in self.slices(max_rows=1 << 16, **bounds) if slices is None else slices:
            items, raw = _native(functools.partial(self.native.stream, sl.lo, sl.hi))
            _problems(raw, self.report)
            for seq, kind, msg in items:
                yield seq, kind == 0, msg

    # -- verification ------------------------------------------------------------------------

    def verify(self, progress: Callable[[SegmentRef], None] | None = None) -> VerifyReport:
        """Checks every record (length, sequence, CRC32C), the indexes, timestamps in order,
        sequence contiguity across segments and that every fragmented message reassembles
        (across segments too); problems are listed, never raised."""
        rep = VerifyReport()
        expect: int | None = None
        v = core.ArchiveVerifier()
        for s in self.segments():
            n, good, first, _last_ts, raw = _native(functools.partial(
                v.segment, s.seg, s.idx, expect))
            rep.segments += 1
            rep.records += n
            rep.good += good
            rep.problems.extend(Problem(*p) for p in raw)
            if rep.first_sequence is None and n:
                rep.first_sequence = first
            if n:
                rep.last_sequence = first + n - 1
            expect = first + n
            if self.sealed and n != s.count:
                rep.problems.append(Problem(
                    Path(s.seg).name, 0, first,
                    f"the manifest lists {s.count} records, the index {n}"))
            if progress is not None:
                progress(s)
        rep.problems.extend(Problem(*p) for p in v.finish(self.sealed))
        rep.fragmented_messages = v.fragmented_messages
        rep.abandoned_messages = v.abandoned_messages
        rep.warnings.extend(Problem(*p) for p in v.take_warnings())
        if not self.sealed:
            rep.problems.append(Problem(MANIFEST, 0, expect or 0, "the archive is not sealed"))
        return rep


def _clamp(
    seq_lo: int | None, seq_hi: int | None, ts_lo: int | None, ts_hi: int | None
) -> tuple[int, int, int, int] | None:
    lo, hi = max(seq_lo or 0, 0), U64_MAX if seq_hi is None else seq_hi
    tlo, thi = max(ts_lo or 0, 0), U64_MAX if ts_hi is None else ts_hi
    if hi < 0 or thi < 0 or lo > hi or tlo > thi:
        return None
    return lo, min(hi, U64_MAX), tlo, min(thi, U64_MAX)
