"""The record layout of the batches the Rust core hands to Python (docs/architecture.md), for
reading a record's fields here. The layout is the core's (``seqbus_core::delivery::batch``);
the constants are checked against it at import.

Each record, little-endian: record_length u32 (whole record), record_type u16, reserved u16,
sequence u64, the 32-byte envelope, then the body (message records only).
"""

from __future__ import annotations

import struct

from seqbus import _core

__all__ = [
    "ENVELOPE_APPLICATION",
    "ENVELOPE_CONTROL",
    "MESSAGE_HEADER",
    "RECORD_HEADER",
    "RECORD_MESSAGE",
    "RECORD_REWOUND",
    "RECORD_TIME",
    "pack_record",
]

#: record_length, record_type, (reserved), sequence, then the envelope: timestamp_ns,
#: command_seq, account char[8], instance, kind, flags, body_length.
RECORD_HEADER = struct.Struct("<IHxxQQQ8sHBBI")
#: The first 8 bytes of every body: block_length, template_id, schema_id, version.
MESSAGE_HEADER = struct.Struct("<HHHH")

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
