"""Session archives: sealed, checksummed, indexed files of a session's sequenced stream with
the schema IR beside them, so any tool decodes them (docs/archive.md).

>>> a = Archive("session.archive")
>>> a.envelope_table()                  # pyarrow.Table: one row per sequenced message
>>> a.table("exchange.NewOrder")        # one typed table per message type
>>> a.verify().problems                 # checksums, indexes, sequence contiguity
"""

from __future__ import annotations

from seqbus.archive.errors import ArchiveError, CorruptRecordError, Problem
from seqbus.archive.reader import Archive, SegmentRef, Slice, VerifyReport
from seqbus.archive.writer import ArchiveWriter, load_ir

__all__ = [
    "Archive",
    "ArchiveError",
    "ArchiveWriter",
    "CorruptRecordError",
    "Problem",
    "SegmentRef",
    "Slice",
    "VerifyReport",
    "load_ir",
]
