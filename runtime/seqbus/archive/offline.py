"""Offline replay: a node class run over an archive with the same handlers, clock and
deterministic timers as live.

The archive's records, fragments included, go through the core's delivery model
(``seqbus._core.Delivery``, ``seqbus_core::delivery``) — the component a live node's stream goes
through: topics, admin commands routed by account, fragments reassembled per sender account,
one time record per new millisecond of stream time — so the node is handed exactly the batches
a live node of the same class and account is, and its deterministic timers fire at the same
stream points. ``send`` during a replay records the command instead of sending it. Local
(wall-clock) timers do not run.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any, TypeVar

from seqbus import _core
from seqbus.archive.errors import ArchiveError
from seqbus.archive.reader import Archive, _native, _problems
from seqbus.node import Node

N = TypeVar("N", bound=Node)


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
    ``account`` is given (from the first record within ``bounds``, as a node rewinding from
    there would be)."""
    delivery = _core.Delivery(account, sorted(topics))
    path = str(archive.path)
    for sl in archive.slices(max_rows=records, **bounds):
        batch, problems = _native(functools.partial(delivery.archive, path, sl.lo, sl.hi))
        _problems(problems, archive.report)
        if batch:
            yield batch


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
        obj.handle_batch(_core.Delivery(account, None).caught_up(a.last_sequence or 0))
    return obj
