"""The archive classes of ``seqbus._core`` (rust/crates/py/src/archive.rs), typed by the
extension's stub (``seqbus/_core.pyi``, checked against the built extension by stubtest in
``make typecheck``)."""

from __future__ import annotations

import sys
from typing import Any

from seqbus import _core as core
from seqbus._core import ArchiveReader as NativeReader
from seqbus._core import ArchiveVerifier as NativeVerifier
from seqbus._core import ArchiveWriter as NativeWriter
from seqbus._core import JournalArchiver as NativeArchiver

if sys.byteorder != "little":
    raise ImportError("seqbus archives need a little-endian host")

__all__ = [
    "ColumnTree",
    "NativeArchiver",
    "NativeReader",
    "NativeVerifier",
    "NativeWriter",
    "RawProblem",
    "core",
]

#: (file, byte offset, sequence, what is wrong)
RawProblem = tuple[str, int, int, str]
#: (length, null count, validity bitmap or None, buffers, children)
ColumnTree = tuple[int, int, bytes | None, list[bytes], list[Any]]
