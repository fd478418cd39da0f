"""seqbus: a total-ordered messaging bus with typed, deterministic Python nodes."""

from __future__ import annotations

from seqbus.admin import AdminError, admin_command
from seqbus.crossconnect import BusSpec, CrossConnect, run_cross
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
from seqbus.node import HandlerFailure, Node, NodeStats, Timer
from seqbus.runner import NodeSpec, run, run_many

__all__ = [
    "AdminError",
    "BackPressureError",
    "BusSpec",
    "ConfigError",
    "CrossConnect",
    "DecodeError",
    "GapError",
    "HandlerFailure",
    "JournalError",
    "MessageTooLargeError",
    "Node",
    "NodeSpec",
    "NodeStats",
    "SeqbusError",
    "SessionEndedError",
    "Timer",
    "TransportError",
    "UnknownMessageError",
    "admin_command",
    "run",
    "run_cross",
    "run_many",
]

__version__ = "0.1.0"
