"""Session archives: sealed, checksummed, indexed files of a session's sequenced stream with
the schema IR beside them, so any tool decodes them (docs/archive.md).

>>> a = Archive("session.archive")
>>> a.envelope_table()                  # pyarrow.Table: one row per sequenced message
>>> a.table("exchange.NewOrder")        # one typed table per message type
>>> a.verify().problems                 # checksums, indexes, sequence contiguity

Reading needs pyarrow (``pip install seqbus[archive]``); it is imported on first use so that
the ``seqbus`` CLI starts without it.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from seqbus.archive.errors import ArchiveError, CorruptRecordError, Problem

if TYPE_CHECKING:
    from seqbus.archive.archiver import JournalArchiver
    from seqbus.archive.reader import Archive, SegmentRef, Slice, VerifyReport
    from seqbus.archive.offline import replay
    from seqbus.archive.writer import ArchiveWriter, load_ir, package_ir

__all__ = [
    "Archive",
    "ArchiveError",
    "ArchiveWriter",
    "CorruptRecordError",
    "JournalArchiver",
    "Problem",
    "SegmentRef",
    "Slice",
    "VerifyReport",
    "load_ir",
    "package_ir",
    "replay",
]

_LAZY = {
    "Archive": "reader", "SegmentRef": "reader", "Slice": "reader", "VerifyReport": "reader",
    "ArchiveWriter": "writer", "load_ir": "writer", "package_ir": "writer",
    "JournalArchiver": "archiver",
    "replay": "offline",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(f"seqbus.archive.{_LAZY[name]}"), name)
    raise AttributeError(f"module 'seqbus.archive' has no attribute {name!r}")
