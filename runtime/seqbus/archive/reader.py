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
from seqbus.archive._native import RawProblem, core
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
    """Index positions ``[start, end)`` of one segment: the unit of a batch and of a partition."""

    seg: str
    idx: str
    start: int
    end: int
    first_sequence: int

    @property
    def sequences(self) -> tuple[int, int]:
        return self.first_sequence + self.start, self.first_sequence + self.end - 1


@dataclass
class VerifyReport:
    segments: int = 0
    records: int = 0
    good: int = 0
    first_sequence: int | None = None
    last_sequence: int | None = None
    problems: list[Problem] = field(default_factory=list)

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
    flushed; :meth:`refresh` picks up new segments.

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
        self.ir_text: dict[int, str] = {}
        self.ir: dict[int, dict[str, Any]] = {}
        for s in self.manifest["schemas"]:
            p = self.path / s["ir"]
            try:
                text = p.read_text()
            except OSError as exc:
                raise ArchiveError(f"{p}: schema IR of package {s['package']}: {exc}") from None
            self.ir_text[s["schema_id"]] = text
            self.ir[s["schema_id"]] = json.loads(text)

    def refresh(self) -> None:
        m = self.path / MANIFEST
        try:
            self.manifest: dict[str, Any] = json.loads(m.read_text())
        except FileNotFoundError:
            raise ArchiveError(f"{self.path}: not a seqbus archive (no {MANIFEST})") from None
        except (OSError, ValueError) as exc:
            raise ArchiveError(f"{m}: {exc}") from None
        if self.manifest.get("format") != "seqbus-archive" or self.manifest.get("version") != 1:
            raise ArchiveError(f"{m}: not a version 1 seqbus archive manifest")

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
        out = []
        segs = self.manifest["segments"]
        for i, s in enumerate(segs):
            seg, idx = str(self.path / s["file"]), str(self.path / s["index"])
            if self.sealed or i < len(segs) - 1:
                count = int(s["count"])
            else:  # the active segment: what its index lists now
                _, count = _native(functools.partial(core.archive_segment_info, seg, idx))
            out.append(
                SegmentRef(
                    s["number"], seg, idx, s["first_sequence"], count,
                    s["first_timestamp_ns"], s["last_timestamp_ns"],
                )
            )
        return out

    @property
    def first_sequence(self) -> int | None:
        segs = self.segments()
        return segs[0].first_sequence if segs else None

    @property
    def last_sequence(self) -> int | None:
        segs = [s for s in self.segments() if s.count]
        return segs[-1].last_sequence if segs else None

    def type_names(self) -> dict[tuple[int, int], str]:
        """``(schema id, template id) → "package.Message"`` for every schema in the archive."""
        return {
            (sid, m["id"]): f"{ir['package']}.{m['name']}"
            for sid, ir in self.ir.items()
            for m in ir["messages"]
        }

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

    def slices(
        self,
        *,
        seq_lo: int | None = None,
        seq_hi: int | None = None,
        ts_lo: int | None = None,
        ts_hi: int | None = None,
        max_rows: int = DEFAULT_BATCH_ROWS,
    ) -> list[Slice]:
        """The index ranges holding the records within the (inclusive) bounds, cut into pieces of
        at most ``max_rows``; segments outside the bounds are not opened."""
        lo, hi = seq_lo or 0, U64_MAX if seq_hi is None else seq_hi
        tlo, thi = ts_lo or 0, U64_MAX if ts_hi is None else ts_hi
        out = []
        for s in self.segments():
            if s.count == 0 or s.last_sequence < lo or s.first_sequence > hi:
                continue
            if self.sealed and (s.last_timestamp_ns < tlo or s.first_timestamp_ns > thi):
                continue
            start, end = _native(functools.partial(
                core.archive_range, s.seg, s.idx, max(lo, 0), max(hi, 0), tlo, thi))
            for a in range(start, end, max_rows):
                out.append(Slice(s.seg, s.idx, a, min(a + max_rows, end), s.first_sequence))
        return out

    # -- record batches ----------------------------------------------------------------------

    def envelope_batches(self, slices: list[Slice] | None = None, **bounds: Any) -> Iterator[pa.RecordBatch]:
        names = self.type_names()
        for sl in self.slices(**bounds) if slices is None else slices:
            rows, cols, raw = _native(functools.partial(
                core.archive_envelopes, sl.seg, sl.idx, sl.start, sl.end, names))
            _problems(raw, self.report)
            yield tables.envelope_batch(rows, cols)

    def typed_schema(self, message: str) -> pa.Schema:
        sid, name = self.resolve(message)
        return tables.typed_schema(self.ir[sid], name)

    def typed_batches(
        self, message: str, slices: list[Slice] | None = None, **bounds: Any
    ) -> Iterator[pa.RecordBatch]:
        sid, name = self.resolve(message)
        schema = tables.typed_schema(self.ir[sid], name)
        text = self.ir_text[sid]
        for sl in self.slices(**bounds) if slices is None else slices:
            rows, cols, raw = _native(functools.partial(
                core.archive_typed, sl.seg, sl.idx, sl.start, sl.end, text, name))
            _problems(raw, self.report)
            yield tables.typed_batch(schema, rows, cols)

    def envelope_table(self, **bounds: Any) -> pa.Table:
        return pa.Table.from_batches(list(self.envelope_batches(**bounds)), tables.ENVELOPE_SCHEMA)

    def table(self, message: str, **bounds: Any) -> pa.Table:
        """The typed table of one message type (``"exchange.NewOrder"`` or ``"NewOrder"``)."""
        return pa.Table.from_batches(
            list(self.typed_batches(message, **bounds)), self.typed_schema(message)
        )

    def records(self, slices: list[Slice] | None = None, **bounds: Any) -> Iterator[tuple[int, bytes]]:
        """(sequence, message) of every good record in order; message = envelope + body."""
        for sl in self.slices(**bounds) if slices is None else slices:
            recs, raw = _native(functools.partial(
                core.archive_records, sl.seg, sl.idx, sl.start, sl.end))
            _problems(raw, self.report)
            for seq, _off, msg in recs:
                yield seq, msg

    # -- verification ------------------------------------------------------------------------

    def verify(self, progress: Callable[[SegmentRef], None] | None = None) -> VerifyReport:
        """Checks every record (length, sequence, CRC32C), the indexes, timestamps in order and
        sequence contiguity across segments; problems are listed, never raised."""
        rep = VerifyReport()
        expect: int | None = None
        for s in self.segments():
            n, good, first, _last_ts, raw = _native(functools.partial(
                core.archive_verify_segment, s.seg, s.idx, expect))
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
        if not self.sealed:
            rep.problems.append(Problem(MANIFEST, 0, expect or 0, "the archive is not sealed"))
        return rep
