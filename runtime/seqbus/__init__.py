"""seqbus: a total-ordered messaging bus with typed, deterministic Python nodes."""

from __future__ import annotations

from seqbus.errors import (
    BackPressureError,
    ConfigError,
    DecodeError,
    GapError,
    JournalError,
    MessageTooLargeError,
    SeqbusError,
    SessionEndedError,
    TransportError,
    UnknownMessageError,
)
from seqbus.node import Node, NodeStats, Timer

__all__ = [
    "BackPressureError",
    "ConfigError",
    "DecodeError",
    "GapError",
    "JournalError",
    "MessageTooLargeError",
    "Node",
    "NodeStats",
    "SeqbusError",
    "SessionEndedError",
    "Timer",
    "TransportError",
    "UnknownMessageError",
]

__version__ = "0.1.0"
