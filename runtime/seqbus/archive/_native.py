"""Typed access to the archive functions of ``seqbus._core`` (rust/crates/archive/src/python.rs)."""

from __future__ import annotations

import importlib
import sys
from typing import Any, Protocol, cast

if sys.byteorder != "little":
    raise ImportError("seqbus archives need a little-endian host")

#: (file, byte offset, sequence, what is wrong)
RawProblem = tuple[str, int, int, str]
#: (length, null count, validity bitmap or None, buffers, children)
ColumnTree = tuple[int, int, bytes | None, list[bytes], list[Any]]


class NativeWriter(Protocol):
    next_sequence: int | None

    def append(self, sequence: int, message: bytes | bytearray | memoryview) -> None: ...
    def append_many(self, first_sequence: int, buf: bytes | bytearray | memoryview) -> int: ...
    def flush(self) -> None: ...
    def seal(self) -> str: ...


class NativeReader(Protocol):
    """``seqbus._core.ArchiveReader``: reads over inclusive sequence ranges, across segments."""

    def schemas(self) -> list[tuple[int, str, str, bool]]: ...
    def type_names(self) -> dict[tuple[int, int], str]: ...
    def segments(self) -> list[tuple[int, str, str, int, int, int, int]]: ...
    def bounds(self, seq_lo: int, seq_hi: int, ts_lo: int, ts_hi: int) -> tuple[int, int] | None: ...
    def plan(
        self, seq_lo: int, seq_hi: int, ts_lo: int, ts_hi: int, max_rows: int
    ) -> list[tuple[int, int]]: ...
    def envelopes(self, lo: int, hi: int) -> tuple[int, dict[str, Any], list[RawProblem]]: ...
    def raw(self, lo: int, hi: int) -> tuple[int, dict[str, Any], list[RawProblem]]: ...
    def typed(
        self, lo: int, hi: int, schema_id: int, message: str
    ) -> tuple[int, list[ColumnTree], list[RawProblem]]: ...
    def stream(self, lo: int, hi: int) -> tuple[list[tuple[int, int, bytes]], list[RawProblem]]: ...


class NativeVerifier(Protocol):
    fragmented_messages: int
    abandoned_messages: int

    def segment(
        self, seg: str, idx: str, expect_first: int | None = None
    ) -> tuple[int, int, int, int, list[RawProblem]]: ...
    def finish(self, sealed: bool) -> list[RawProblem]: ...
    def take_warnings(self) -> list[RawProblem]: ...


class _Core(Protocol):
    def ArchiveWriter(  # noqa: N802 (a class in the extension)
        self, dir: str, session: str, segment_bytes: int, schemas: list[tuple[int, str, str]]
    ) -> NativeWriter: ...
    def ArchiveReader(self, dir: str) -> NativeReader: ...  # noqa: N802
    def ArchiveVerifier(self) -> NativeVerifier: ...  # noqa: N802
    def archive_segment_info(self, seg: str, idx: str) -> tuple[int, int]: ...
    def archive_bus_ir(self) -> str: ...


core = cast(_Core, importlib.import_module("seqbus._core"))
