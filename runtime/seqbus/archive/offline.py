"""Offline replay: a node class run over an archive with the same handlers, clock and
deterministic timers as live.

The archive's messages become the records the Rust core hands out (docs/architecture.md,
"Batches from Rust to Python"): application messages as message records (fragments
reassembled per sender account, delivered at the last fragment, as seqbus-core does, wherever
in the archive the earlier fragments lie), control messages and early fragments as time
records. They then go through the live topic filter
itself (``seqbus._core.TopicFilter``: topics, admin commands routed by account, one time
record per new millisecond of stream time), so the node sees exactly the batches a live node
of the same class and account sees, and its deterministic timers fire at the same stream
points. ``send`` during a replay records the command instead of sending it. Local
(wall-clock) timers do not run.
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
RECORD_MESSAGE, RECORD_REWOUND, RECORD_TIME = 1, 2, 3
KIND_APPLICATION = 1


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
    archive: Archive,
    topics: set[tuple[int, int]],
    *,
    account: str = "REPLAY",
    records: int = 4096,
    **bounds: Any,
) -> Iterator[bytes]:
    """The archive's messages as the batches a live node handling ``topics`` under
    ``account`` is given."""
    from seqbus import _core

    live = _core.TopicFilter(sorted(topics), account)
    out = bytearray()
    n = 0
    for seq, whole, msg in archive.stream(**bounds):
        if whole and msg[26] == KIND_APPLICATION:
            out += _HEAD.pack(16 + len(msg), RECORD_MESSAGE, seq) + msg
        else:  # control messages and fragments before the last advance the clock only
            out += _HEAD.pack(48, RECORD_TIME, seq) + msg[:32]
        n += 1
        if n >= records:
            yield live.apply(bytes(out))
            out.clear()
            n = 0
    if out:
        yield live.apply(bytes(out))


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
    for batch in batches(a, topics, account=account, **bounds):
        obj.handle_batch(batch)
        if obj.stopped:
            return obj
    client.rewinding = False
    if rewound_at_end:
        obj.handle_batch(_HEAD.pack(48, RECORD_REWOUND, a.last_sequence or 0) + bytes(32))
    return obj
