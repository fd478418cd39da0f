"""Cross-connect nodes: one process, one thread, several buses (docs/sites.md, "Several buses
and the cross-connect node").

Each bus is joined by its own :class:`seqbus.Node` (a subclass of the generated base of that
bus's schema, so its handlers are typed for that bus), with its own client, account, timers and
clock. One loop runs them all, so no two handlers ever run at once and they may share state; a
handler of one bus sends on another through that bus's node (``self.orders.send(...)``).

Delivery rule: each bus's stream is delivered complete and in its own order. Across buses:

* ``merge="arrival"``: batches are handed out as they arrive, bus after bus (not deterministic:
  another run may interleave the streams otherwise);
* ``merge="time"``: records are handed out in the order (sequencer time, bus index, sequence),
  a record only once every other bus's stream has reached its time (its watermark: the time of
  the last record received from it, its idle clock ticks included). The interleaving is then a
  function of the streams alone, the same in every instance and every replay, at the cost of
  waiting for the slower stream.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

from seqbus import _core
from seqbus.batch import RECORD_REWOUND, records
from seqbus.errors import SeqbusError, TransportError
from seqbus.node import Node, OnError
from seqbus.runner import (
    POLL_TIMEOUT_S,
    READY_TIMEOUT_S,
    Start,
    _start_arg,
    apply_error_policy,
    stop_on_signals,
)

__all__ = ["BusSpec", "CrossConnect", "Merge", "run_cross"]

Merge = Literal["arrival", "time"]

@dataclass
class BusSpec:
    """One bus of a cross-connect node: its node object and how it joins."""

    node: Node
    config: str
    account: str
    instance: int = 1
    start: Start = "live"
    #: The node's own unicast address on this bus (``seqbus.run``'s ``listen``).
    listen: str | None = None
    #: Overrides the bus configuration's ``on_error`` for this node; ``skip`` adds sequences
    #: (``seqbus.run``'s, docs/sdk.md "Errors in handlers").
    on_error: OnError | None = None
    skip: Sequence[int] = ()
    #: The records received but not yet handed out (time merge), and the bus's watermark.
    _queue: deque[tuple[int, int, int, bytes]] = field(default_factory=deque, repr=False)
    _watermark: int = field(default=0, repr=False)


class CrossConnect:
    """Several buses, one loop (see the module documentation for the delivery rule)."""

    def __init__(self, buses: Sequence[BusSpec], *, merge: Merge = "arrival") -> None:
        if not buses:
            raise SeqbusError("a cross-connect node joins at least one bus")
        if merge not in ("arrival", "time"):
            raise SeqbusError(f"merge must be 'arrival' or 'time', not {merge!r}")
        self.buses = list(buses)
        self.merge: Merge = merge
        self._clients: list[_core.NodeClient] = []
        #: (bus index, sequence) of every message and time record handed out, when
        #: ``record_order`` is set (for tests and audits of the interleaving).
        self.order: list[tuple[int, int]] = []
        #: The sequencer time of each entry of ``order`` (time merge only).
        self.order_times: list[int] = []
        self.record_order = False

    def open(self, stop: threading.Event | None = None) -> None:
        """Connects every bus, waits until each may send, and opens every node."""
        early: list[list[bytes]] = []
        clients = []
        for b in self.buses:
            # each bus's account reads its error policy as every other instance of it does
            apply_error_policy(b.node, b.config, b.account, b.on_error, b.skip)
            clients.append(
                _core.NodeClient(
                    b.config,
                    b.account,
                    b.instance,
                    start=_start_arg(b.start),
                    topics=type(b.node).topics(),
                    listen=b.listen,
                )
            )
            early.append([])
        deadline = time.monotonic() + READY_TIMEOUT_S
        for i, (b, c) in enumerate(zip(self.buses, clients, strict=True)):
            while not c.is_ready():
                if stop is not None and stop.is_set():
                    return
                if time.monotonic() > deadline:
                    raise TransportError(
                        f"cross-connect {b.account}/{b.instance}: no answer from the sequencer "
                        f"of {b.config} within {READY_TIMEOUT_S:g} s"
                    )
                batch = c.poll(4096, POLL_TIMEOUT_S / 10)
                if batch:
                    early[i].append(batch)
        self._clients = clients
        for b, c in zip(self.buses, clients, strict=True):
            b.node.attach(c, b.account, b.instance, rewinding=c.is_rewinding())
        for i, batches in enumerate(early):
            for batch in batches:
                self._take(i, batch)
        self._release()

    def _take(self, i: int, batch: bytes) -> int:
        """Hands a batch of bus ``i`` out (arrival) or queues its records (time)."""
        b = self.buses[i]
        if self.merge == "arrival":
            if self.record_order:
                self._note(i, batch)
            return b.node.handle_batch(batch)
        n = 0
        for r in records(batch):
            # a caught-up record has no time of its own: in place in its bus's order
            ts = b._watermark if r.record_type == RECORD_REWOUND else r.timestamp_ns
            b._watermark = max(b._watermark, ts)
            b._queue.append((ts, r.sequence, r.record_type, batch[r.offset : r.end]))
            n += 1
        return n

    def _note(self, i: int, batch: bytes) -> None:
        for r in records(batch):
            if r.record_type != RECORD_REWOUND:
                self.order.append((i, r.sequence))

    def _release(self) -> int:
        """Hands out, in (time, bus, sequence) order, every queued record no other bus can
        still precede."""
        if self.merge == "arrival":
            return 0
        buses = self.buses
        n = 0
        while True:
            heads = [(b._queue[0][0], i) for i, b in enumerate(buses) if b._queue]
            if not heads:
                return n
            ts, i = min(heads)
            for j, other in enumerate(buses):
                if j == i or other._queue:
                    continue
                if other._watermark < ts or (other._watermark == ts and j < i):
                    return n  # bus j may still bring an earlier record
            _, seq, kind, record = buses[i]._queue.popleft()
            if self.record_order and kind != RECORD_REWOUND:
                self.order.append((i, seq))
                self.order_times.append(ts)
            buses[i].node.handle_batch(record)
            n += 1

    def poll_once(self, timeout: float) -> int:
        """Polls every bus once and hands out what may be; waits at most ``timeout`` s when
        nothing came. Returns the records taken in."""
        if not self._clients:
            raise SeqbusError("the cross-connect node is not open")
        got = 0
        for i, b in enumerate(self.buses):
            batch = b.node._connected().poll(4096, 0.0)
            if batch:
                got += self._take(i, batch)
            if b.node.posted:
                b.node.flush_outbox()
            if b.node._local_timers:
                b.node._fire_local_timers()
        self._release()
        if got == 0 and timeout > 0:
            # the first bus's socket is waited on; the others are looked at every 0.5 ms
            batch = self.buses[0].node._connected().poll(4096, min(timeout, 0.0005))
            if batch:
                got += self._take(0, batch)
                self._release()
        return got

    @property
    def stopped(self) -> bool:
        return any(b.node.stopped for b in self.buses)

    def run(self, stop: threading.Event) -> None:
        """Runs until ``stop`` is set or a node calls ``stop()``; then closes every node."""
        self.open(stop)
        try:
            while not stop.is_set() and not self.stopped:
                self.poll_once(POLL_TIMEOUT_S)
            for b in self.buses:
                b.node.on_closed()
        finally:
            self.close()

    def close(self) -> None:
        for c in self._clients:
            c.close()
        self._clients = []


def run_cross(
    buses: Sequence[BusSpec], *, merge: Merge = "arrival", stop: threading.Event | None = None
) -> list[Node]:
    """Runs a cross-connect node over ``buses`` until ``stop``, SIGINT/SIGTERM (from the main
    thread) or a node's ``stop()``; returns the nodes."""
    event = stop if stop is not None else threading.Event()
    cc = CrossConnect(buses, merge=merge)
    with stop_on_signals(event):
        cc.run(event)
    return [b.node for b in buses]
