"""What the bus says, on a console: the logging set-up of ``seqbus node`` and of the roles
(``seqbus sequencer``, ``replayer``, ``dispatcher``, ``bridge``).

Everything the bus does is a :mod:`logging` record of the ``seqbus`` hierarchy, one per event:
``seqbus.node`` (a node: what it waits for, connected, no heartbeat and why, a new leader,
caught up, stopped; the Rust core's and the runner's alike), ``seqbus.node.rewind`` (rewinding
progress: every second at debug level, every ten at info), ``seqbus.sequencer``,
``seqbus.replayer``, ``seqbus.dispatcher``, ``seqbus.bridge``, ``seqbus.tcp``. A library user
configures them as any logger; :func:`configure` is what the commands do.
"""

from __future__ import annotations

import contextlib
import logging
import re
import shutil
import sys
from collections.abc import Iterator
from typing import TextIO

__all__ = ["LEVELS", "PROGRESS_LOGGER", "Console", "configure", "configured"]

#: The logger of a rewinding node's progress (records every second at debug level).
PROGRESS_LOGGER = "seqbus.node.rewind"
#: What ``--log-level`` takes.
LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")

_PERCENT = re.compile(r"\((\d{1,3})%\)")
_BAR = 20


class Console(logging.StreamHandler[TextIO]):
    """One line per record (``2025-01-31 12:00:00.123 INFO node ME/1: connected ...``; the
    logger's name is written for loggers outside ``seqbus``). On a terminal a rewinding node's
    progress is one line redrawn in place, with a bar, until the next record."""

    def __init__(self, stream: TextIO | None = None) -> None:
        super().__init__(stream if stream is not None else sys.stderr)
        self.tty = self.stream.isatty()
        self.bar = ""
        self.setFormatter(_Formatter())

    def emit(self, record: logging.LogRecord) -> None:
        try:
            if record.name == PROGRESS_LOGGER and self.tty:
                self._draw(self._bar(record))
                return
            self.acquire()
            try:
                if self.bar:
                    self.stream.write("\r\x1b[K")
                    self.bar = ""
                self.stream.write(self.format(record) + self.terminator)
                self.flush()
            finally:
                self.release()
        except Exception:  # noqa: BLE001 - logging must not raise
            self.handleError(record)

    def _bar(self, record: logging.LogRecord) -> str:
        text = record.getMessage()
        m = _PERCENT.search(text)
        if m is None:
            return text
        done = min(_BAR, int(m.group(1)) * _BAR // 100)
        return f"[{'#' * done}{'.' * (_BAR - done)}] {text}"

    def _draw(self, text: str) -> None:
        width = max(20, shutil.get_terminal_size((100, 24)).columns - 1)
        self.acquire()
        try:
            self.bar = text[:width]
            self.stream.write("\r\x1b[K" + self.bar)
            self.flush()
        finally:
            self.release()


class _Formatter(logging.Formatter):
    def __init__(self) -> None:
        super().__init__("%(asctime)s.%(msecs)03d %(levelname)s %(message)s", "%Y-%m-%d %H:%M:%S")

    def formatMessage(self, record: logging.LogRecord) -> str:  # noqa: N802 - logging's name
        if record.name != "seqbus" and not record.name.startswith("seqbus."):
            record.message = f"{record.name}: {record.message}"
        return super().formatMessage(record)


def configure(level: str | int = "INFO", stream: TextIO | None = None) -> Console:
    """Log every record of ``level`` and above (the application's too: the root logger) to
    ``stream`` (stderr) through a :class:`Console`; on a terminal, with ``level`` at INFO or
    below, a rewind's progress is drawn as a bar every second. Returns the handler."""
    numeric = logging.getLevelName(level) if isinstance(level, str) else level
    if not isinstance(numeric, int):
        raise ValueError(f"log level must be one of {', '.join(LEVELS)}, not {level!r}")
    console = Console(stream)
    root = logging.getLogger()
    root.addHandler(console)
    root.setLevel(numeric)
    progress = logging.getLogger(PROGRESS_LOGGER)
    progress.setLevel(logging.DEBUG if console.tty and numeric <= logging.INFO else logging.NOTSET)
    return console


@contextlib.contextmanager
def configured(level: str | int = "INFO", stream: TextIO | None = None) -> Iterator[Console]:
    """:func:`configure` for the block; then the handler is removed and the levels it set are
    as they were (a command run inside another program, a test, leaves no trace)."""
    root = logging.getLogger()
    progress = logging.getLogger(PROGRESS_LOGGER)
    levels = root.level, progress.level
    console = configure(level, stream)
    try:
        yield console
    finally:
        root.removeHandler(console)
        root.setLevel(levels[0])
        progress.setLevel(levels[1])
