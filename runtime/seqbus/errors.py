"""The one error hierarchy of seqbus.

Every error the SDK, the generated codecs or the Rust core raise is a :class:`SeqbusError`, so
``except seqbus.SeqbusError`` catches all of them and nothing else.
"""

from __future__ import annotations

__all__ = [
    "BackPressureError",
    "ConfigError",
    "DecodeError",
    "GapError",
    "JournalError",
    "MessageTooLargeError",
    "SeqbusError",
    "SessionEndedError",
    "TransportError",
    "UnknownMessageError",
]


class SeqbusError(Exception):
    """Base class of every seqbus error."""


class DecodeError(SeqbusError, ValueError):
    """A buffer is truncated or corrupt.

    ``message`` is the IDL message (or struct) being read, ``field`` the field whose bytes are
    missing or invalid, ``offset`` the byte offset in the buffer where reading failed and
    ``detail`` what was wrong there.
    """

    def __init__(self, message: str, field: str, offset: int, detail: str = "") -> None:
        self.message = message
        self.field = field
        self.offset = offset
        self.detail = detail
        where = f"{message}.{field}" if field else message
        text = f"cannot decode {where} at offset {offset}"
        super().__init__(f"{text}: {detail}" if detail else text)

    def __reduce__(self) -> tuple[type[DecodeError], tuple[str, str, int, str]]:
        return (type(self), (self.message, self.field, self.offset, self.detail))


class ConfigError(SeqbusError, ValueError):
    """The configuration is missing, unreadable or invalid; the text names the key."""


class BackPressureError(SeqbusError):
    """``send`` found the node's window of in-flight commands full; retry after polling."""


class MessageTooLargeError(SeqbusError, ValueError):
    """A command body needs more fragments than the node's whole in-flight window."""


class SessionEndedError(SeqbusError):
    """The sequencer ended the session; every message up to ``last_sequence`` was delivered."""

    def __init__(self, text: str, last_sequence: int = 0) -> None:
        self.last_sequence = last_sequence
        super().__init__(text)


class GapError(SeqbusError):
    """Messages of the stream are missing and no replayer could fill the gap."""


class TransportError(SeqbusError, OSError):
    """A socket or other transport failed (bind, send, receive)."""


class JournalError(SeqbusError, OSError):
    """The journal could not be read or written."""


class UnknownMessageError(SeqbusError):
    """A message reached a node whose classes have no handler code for its schema/template."""

    def __init__(self, schema_id: int, template_id: int, sequence: int) -> None:
        self.schema_id = schema_id
        self.template_id = template_id
        self.sequence = sequence
        super().__init__(
            f"unknown message schema {schema_id} template {template_id} at sequence {sequence}"
        )
