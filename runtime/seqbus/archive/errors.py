"""Errors and problem reports of archive reading."""

from __future__ import annotations

from dataclasses import dataclass

from seqbus.errors import SeqbusError


class ArchiveError(SeqbusError):
    """An archive cannot be opened or used (missing files, wrong format, bad arguments)."""


class CorruptRecordError(ArchiveError):
    """A record failed its checks and the reader was asked to fail fast; names its position."""

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        super().__init__(str(problem))


@dataclass(frozen=True)
class Problem:
    """A corrupt or inconsistent record: reported with its position, then skipped."""

    file: str
    offset: int
    sequence: int
    message: str

    def __str__(self) -> str:
        return f"{self.file}:{self.offset}: sequence {self.sequence}: {self.message}"
