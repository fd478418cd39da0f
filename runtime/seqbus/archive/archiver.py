"""The archiver role: copies a sequencer's journal into a session archive, live or at once.

The journal (docs/journal.md) is read through the Rust ``JournalReader``, which follows the
segments as the sequencer writes them; what the archiver appends is flushed to the archive's
readers after every poll, so ``spark.readStream.format("seqbus")`` over the archive follows the
live session.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from seqbus.archive._native import NativeArchiver, core
from seqbus.archive.errors import ArchiveError
from seqbus.archive.writer import DEFAULT_SEGMENT_BYTES


class JournalArchiver:
    """Creates archive ``out`` from the journal in ``journal_dir`` (session name from the
    journal), starting at ``start`` (default: the journal's first message)."""

    def __init__(
        self,
        journal_dir: str | os.PathLike[str],
        out: str | os.PathLike[str],
        schemas: Iterable[tuple[int, str, str]],
        *,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
        start: int | None = None,
    ) -> None:
        self.out = Path(out)
        try:
            self._a: NativeArchiver | None = core.JournalArchiver(
                str(journal_dir), str(out), segment_bytes, list(schemas), start)
        except (OSError, ValueError) as exc:
            raise ArchiveError(str(exc)) from None

    def _native(self) -> NativeArchiver:
        if self._a is None:
            raise ArchiveError(f"{self.out}: the archive is sealed")
        return self._a

    def poll(self, max_messages: int = 65536) -> int:
        """Copies what the journal holds beyond the archive (at most ``max_messages``)."""
        try:
            return self._native().poll(max_messages)
        except (OSError, ValueError) as exc:
            raise ArchiveError(str(exc)) from None

    def catch_up(self) -> int:
        """Copies everything the journal holds now."""
        total = 0
        while (n := self.poll()) > 0:
            total += n
        return total

    @property
    def archived(self) -> int:
        """The next sequence the archive needs (everything before it is archived)."""
        _journal, nxt = self._native().position()
        return nxt or 1

    def follow(
        self,
        stop: threading.Event,
        *,
        interval: float = 0.05,
        idle_exit: float | None = None,
        on_progress: Callable[[int], None] | None = None,
    ) -> None:
        """Copies new messages every ``interval`` s until ``stop`` is set (or nothing new came
        for ``idle_exit`` s), then copies the rest. Does not seal."""
        last = time.monotonic()
        while not stop.is_set():
            n = self.catch_up()
            if n:
                last = time.monotonic()
                if on_progress is not None:
                    on_progress(n)
            elif idle_exit is not None and time.monotonic() - last >= idle_exit:
                break
            stop.wait(interval)
        self.catch_up()

    @property
    def torn_tail(self) -> tuple[str, int] | None:
        """(file, offset) where the journal's last segment stops forming records, if it
        does, as of the last poll: a record being written, or one a crash cut short (never
        published, since a record is written before it is sent); it is not archived."""
        return self._native().torn_tail()

    def seal(self) -> dict[str, Any]:
        import json

        m = json.loads(self._native().seal())
        self._a = None
        return dict(m)
