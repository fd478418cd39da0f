"""The record layout of the batches the Rust core hands to Python (docs/architecture.md), for
reading a record's fields here. The layout is the core's (``seqbus_core::delivery::batch``);
the constants are checked against it at import.

Each record, little-endian: record_length u32 (whole record), record_type u16, reserved u16,
sequence u64, the 32-byte envelope, then the body (message records only).
"""

from __future__ import annotations

import mmap
import struct
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

from seqbus import _core
from seqbus.errors import DecodeError, SeqbusError

__all__ = [
    "Buffer",
    "Dispatch",
    "ENVELOPE_APPLICATION",
    "ENVELOPE_CONTROL",
    "MESSAGE_HEADER",
    "RECORD_HEADER",
    "RECORD_MESSAGE",
    "RECORD_REWOUND",
    "RECORD_TIME",
    "Record",
    "account_key",
    "record_at",
    "message_type",
    "pack_record",
    "records",
    "sender",
]

#: record_length, record_type, (reserved), sequence, then the envelope: timestamp_ns,
#: command_seq, account char[8], instance, kind, flags, body_length.
RECORD_HEADER = struct.Struct("<IHxxQQQ8sHBBI")
#: The first 8 bytes of every body: block_length, template_id, schema_id, version.
MESSAGE_HEADER = struct.Struct("<HHHH")

#: What a batch or an encoded body may be.
Buffer = bytes | bytearray | memoryview | mmap.mmap
#: A generated dispatch: (node, template_id, buffer, body offset, body length, mine) -> whether
#: the node has a handler for the type.
Dispatch = Callable[[Any, int, Buffer, int, int, bool], bool]

RECORD_MESSAGE = 1
RECORD_REWOUND = 2
RECORD_TIME = 3

ENVELOPE_APPLICATION = 1
ENVELOPE_CONTROL = 2

if (RECORD_HEADER.size, RECORD_MESSAGE, RECORD_REWOUND, RECORD_TIME) != (
    _core.RECORD_HEADER_LEN,
    _core.RECORD_MESSAGE,
    _core.RECORD_CAUGHT_UP,
    _core.RECORD_TIME,
):  # pragma: no cover - a build of seqbus._core from another layout
    raise ImportError("seqbus._core hands out another batch layout than seqbus.batch reads")


class Record(NamedTuple):
    """One record of a batch: where it starts, its header's fields, where its body starts."""

    offset: int
    length: int
    record_type: int
    sequence: int
    timestamp_ns: int
    command_seq: int
    #: the sender's account, 8 bytes as on the wire (space- or NUL-padded)
    account: bytes
    instance: int
    kind: int
    flags: int
    body_length: int

    @property
    def body(self) -> int:
        """Offset of the body (8-byte message header first) in the batch."""
        return self.offset + RECORD_HEADER.size

    @property
    def end(self) -> int:
        """Offset of the next record."""
        return self.offset + self.length

    @property
    def sender(self) -> str:
        """The sender's account as text."""
        return _account_text(self.account)


def record_at(batch: Buffer, offset: int) -> Record:
    """The record at ``offset``; one shorter than its header, or one that runs past the batch,
    raises :class:`~seqbus.errors.DecodeError`."""
    end = len(batch)
    size = RECORD_HEADER.size
    if offset + size > end:
        raise DecodeError("Record", "record_length", offset, f"{end - offset} bytes left")
    record = Record(offset, *RECORD_HEADER.unpack_from(batch, offset))
    if record.length < size or offset + record.length > end:
        raise DecodeError(
            "Record", "record_length", offset,
            f"{record.length} bytes (header {size}, {end - offset} left in the batch)",
        )
    return record


def records(batch: Buffer, start: int = 0) -> Iterator[Record]:
    """The records of ``batch`` from offset ``start`` on. A record shorter than its header, or
    one that runs past the batch, raises :class:`~seqbus.errors.DecodeError`."""
    end = len(batch)
    offset = start
    while offset < end:
        record = record_at(batch, offset)
        yield record
        offset = record.end


def message_type(batch: Buffer, record: Record) -> tuple[int, int]:
    """(schema_id, template_id) of a message record, from its body's message header."""
    if record.length < RECORD_HEADER.size + MESSAGE_HEADER.size:
        raise DecodeError("Record", "body", record.offset, "shorter than a message header")
    _block, template_id, schema_id, _version = MESSAGE_HEADER.unpack_from(batch, record.body)
    return schema_id, template_id


def account_key(account: str) -> bytes:
    """An account as the envelope carries it: 1 to 8 ASCII characters, NUL-padded to 8."""
    try:
        raw = account.encode("ascii")
    except UnicodeEncodeError:
        raise SeqbusError(f"account {account!r} is not ASCII") from None
    if not 0 < len(raw) <= 8 or b"\0" in raw:
        raise SeqbusError(f"account {account!r} must be 1 to 8 ASCII characters")
    return raw.ljust(8, b"\0")


def sender(batch: Buffer, body: int) -> str:
    """The sender account in the envelope of the record whose body starts at ``body``."""
    start = body - RECORD_HEADER.size
    if start < 0:
        return ""
    return _account_text(RECORD_HEADER.unpack_from(batch, start)[5])


def _account_text(account: bytes) -> str:
    return account.rstrip(b"\0 ").decode("ascii", "replace")


def pack_record(
    record_type: int,
    sequence: int = 0,
    *,
    timestamp_ns: int = 0,
    command_seq: int = 0,
    account: bytes = b"",
    instance: int = 0,
    kind: int = ENVELOPE_APPLICATION,
    flags: int = 0,
    body: bytes = b"",
) -> bytes:
    """One record of a batch in the core's layout (for tests and benchmarks)."""
    length = RECORD_HEADER.size + len(body)
    head = RECORD_HEADER.pack(
        length,
        record_type,
        sequence,
        timestamp_ns,
        command_seq,
        account,
        instance,
        kind,
        flags,
        len(body),
    )
    return head + body
