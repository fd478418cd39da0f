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


class _Core(Protocol):
    def ArchiveWriter(  # noqa: N802 (a class in the extension)
        self, dir: str, session: str, segment_bytes: int, schemas: list[tuple[int, str, str]]
    ) -> NativeWriter: ...
    def archive_segment_info(self, seg: str, idx: str) -> tuple[int, int]: ...
    def archive_range(
        self, seg: str, idx: str, seq_lo: int, seq_hi: int, ts_lo: int, ts_hi: int
    ) -> tuple[int, int]: ...
    def archive_envelopes(
        self, seg: str, idx: str, start: int, end: int, names: dict[tuple[int, int], str]
    ) -> tuple[int, dict[str, Any], list[RawProblem]]: ...
    def archive_typed(
        self, seg: str, idx: str, start: int, end: int, ir_json: str, message: str
    ) -> tuple[int, list[ColumnTree], list[RawProblem]]: ...
    def archive_records(
        self, seg: str, idx: str, start: int, end: int
    ) -> tuple[list[tuple[int, int, bytes]], list[RawProblem]]: ...
    def archive_verify_segment(
        self, seg: str, idx: str, expect_first: int | None = None
    ) -> tuple[int, int, int, int, list[RawProblem]]: ...


core = cast(_Core, importlib.import_module("seqbus._core"))
