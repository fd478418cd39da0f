"""Offline replay: a node class run over an archive with the same handlers, clock and
deterministic timers as live.

The archive's messages become the batches the Rust ``NodeClient`` would have delivered
(docs/architecture.md, "Batches from Rust to Python"): messages of the node's topics as
message records (fragments reassembled per sender account, delivered at the last fragment, as
seqbus-core does), every other message as a time-advanced record, so sequencer time moves and
deterministic timers fire at the same stream point as live. ``send`` during a replay records the
command instead of sending it. Local (wall-clock) timers do not run.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from typing import Any, TypeVar

from seqbus.archive.errors import ArchiveError
from seqbus.archive.reader import Archive
from seqbus.node import Node

N = TypeVar("N", bound=Node)

_HEAD = struct.Struct("<IHxxQ")  # record_length, record_type, sequence
_ENV = struct.Struct("<QQ8sHBBI")
RECORD_MESSAGE, RECORD_REWOUND, RECORD_TIME = 1, 2, 3


class ReplayClient:
    """Stands for the transport: nothing to poll, commands kept in :attr:`sent`."""

    def __init__(self) -> None:
        self.sent: list[bytes] = []
        self.rewinding = True

    def poll(self, max_records: int, timeout: float) -> bytes:
        return b""

    def send(self, body: bytes | bytearray | memoryview) -> int:
        self.sent.append(bytes(body))
        return len(self.sent)

    def is_rewinding(self) -> bool:
        return self.rewinding


def batches(
    archive: Archive, topics: set[tuple[int, int]], *, records: int = 4096, **bounds: Any
) -> Iterator[bytes]:
    """The archive's messages as node batches for a node handling ``topics``."""
    frags: dict[bytes, bytearray] = {}
    out = bytearray()
    n = 0
    for seq, msg in archive.records(**bounds):
        ts, cmd, account, instance, kind, flags, body_len = _ENV.unpack_from(msg)
        body = msg[32:]
        if flags:
            buf = frags.setdefault(account, bytearray())
            buf += body
            if flags & 1:  # more fragments follow
                out += _HEAD.pack(48, RECORD_TIME, seq) + msg[:32]
                n += 1
                continue
            whole = bytes(frags.pop(account))
            if len(whole) != body_len:
                out += _HEAD.pack(48, RECORD_TIME, seq) + msg[:32]
                n += 1
                continue
            msg = _ENV.pack(ts, cmd, account, instance, kind, 0, body_len) + whole
            body = whole
        wanted = kind == 1 and len(body) >= 8 and (
            struct.unpack_from("<H", body, 4)[0], struct.unpack_from("<H", body, 2)[0]) in topics
        if wanted:
            out += _HEAD.pack(16 + len(msg), RECORD_MESSAGE, seq) + msg
        else:
            out += _HEAD.pack(48, RECORD_TIME, seq) + msg[:32]
        n += 1
        if n >= records:
            yield bytes(out)
            out.clear()
            n = 0
    if out:
        yield bytes(out)


def replay(
    node: type[N] | N,
    archive: Archive | str,
    *,
    account: str = "REPLAY",
    instance: int = 1,
    rewound_at_end: bool = True,
    **bounds: Any,
) -> N:
    """Runs ``node`` (a class, instantiated with no arguments, or an instance) over ``archive``
    and returns it. ``account``/``instance``: who the node was live (decides ``mine``).
    ``rewound_at_end``: call ``on_rewound`` after the last message, as a rewinding node is when
    it catches up. Stops early when the node calls ``stop()``."""
    a = archive if isinstance(archive, Archive) else Archive(archive)
    obj: N = node() if isinstance(node, type) else node
    client = ReplayClient()
    obj.attach(client, account, instance, rewinding=True)
    topics = set(obj.topics())
    if not topics:
        raise ArchiveError(f"{type(obj).__name__} handles no message type: nothing to replay")
    for batch in batches(a, topics, **bounds):
        obj.handle_batch(batch)
        if obj.stopped:
            return obj
    client.rewinding = False
    if rewound_at_end:
        obj.handle_batch(_HEAD.pack(48, RECORD_REWOUND, a.last_sequence or 0) + bytes(32))
    return obj
