"""Deterministic test harness: a whole bus in one thread with a virtual clock.

``Harness`` runs the sequencer (or a cluster of them), its replayer and any number of nodes of
the Rust core over the simulated bus the Rust tests run on (``seqbus-sim``, through
``seqbus._core.SimBus``: the same sans-IO state machines the real processes run) with seeded
delays, loss, duplication and process kills. Time is virtual, so a distributed scenario — loss,
a late joiner, a hot backup taking over, a sequencer failing over, a timer firing — is an
ordinary, fast, repeatable test::

    bus = Harness(seed=7)
    engine = bus.add(MatchingEngine, "ENGINE", 1, start="rewind")
    backup = bus.add(MatchingEngine, "ENGINE", 2, start="rewind")
    gateway = bus.add(Gateway, "GW", 1)
    bus.run(until=lambda: gateway.sent == 100)
    bus.kill(engine)                      # the primary dies; the backup's commands count now
    bus.run(for_ns=50_000_000)
    assert backup.state_hash() == ...

``sequencer_time()`` in handlers is the virtual stream time; ``set_local_timer`` still uses the
machine's clock (it is not deterministic, here as anywhere).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from seqbus import _core
from seqbus.node import Body, Node
from seqbus.runner import Start

__all__ = ["Harness", "SimClient"]

N = TypeVar("N", bound=Node)

#: How far one ``run`` may move virtual time when no bound is given.
DEFAULT_LIMIT_NS = 60_000_000_000


class SimClient:
    """A node's client on a :class:`Harness` bus (the ``seqbus.node.Client`` protocol)."""

    def __init__(self, sim: _core.SimBus, node_id: int) -> None:
        self._sim = sim
        self.node_id = node_id

    def poll(self, max_records: int, timeout: float) -> bytes:
        return self._sim.poll(self.node_id, max_records)

    def send(self, body: Body) -> int:
        return self._sim.send_command(self.node_id, bytes(body))

    def is_rewinding(self) -> bool:
        return self._sim.is_rewinding(self.node_id)

    def is_ready(self) -> bool:
        return self._sim.is_ready(self.node_id)

    def stats(self) -> dict[str, int]:
        return self._sim.node_stats(self.node_id)


@dataclass
class _Member:
    node: Node
    client: SimClient
    account: str
    instance: int
    opened: bool = False
    alive: bool = True
    early: list[bytes] = field(default_factory=list)


class Harness:
    """A sequencer (``sequencers=3``: a cluster), replayers and nodes in this thread, over a
    simulated network. ``loss_pct``/``dup_pct``: every datagram's chance to be lost or
    duplicated; delays between ``min_delay_ns`` and ``max_delay_ns`` reorder them.
    ``journal``: a recorded session's journal directory — the sequencers start from it (its
    session, its messages; virtual time goes on after its last one) and rewinding nodes are
    handed it as they would be live. ``replay_packet``: the largest replayer answer."""

    def __init__(
        self,
        *,
        seed: int = 1,
        min_delay_ns: int = 20_000,
        max_delay_ns: int = 60_000,
        upstream_loss_pct: float = 0.0,
        loss_pct: float = 0.0,
        dup_pct: float = 0.0,
        clock_tick_ns: int = 10_000_000,
        heartbeat_ns: int = 1_000_000,
        window: int = 64,
        sequencers: int = 1,
        journal: str | os.PathLike[str] | None = None,
        replay_packet: int = 60_000,
    ) -> None:
        self.sim = _core.SimBus(
            seed=seed,
            min_delay_ns=min_delay_ns,
            max_delay_ns=max_delay_ns,
            upstream_loss_pct=upstream_loss_pct,
            loss_pct=loss_pct,
            dup_pct=dup_pct,
            clock_tick_ns=clock_tick_ns,
            heartbeat_ns=heartbeat_ns,
            window=window,
            sequencers=sequencers,
            journal=None if journal is None else os.fspath(journal),
            replay_packet=replay_packet,
        )
        self._members: list[_Member] = []
        self.steps = 0

    @property
    def now_ns(self) -> int:
        """Virtual time, ns since the epoch."""
        return self.sim.now_ns

    @property
    def sequenced(self) -> int:
        """How many messages the sequencer has sequenced."""
        return self.sim.next_seq - 1

    def add(
        self,
        node: N | type[N],
        account: str,
        instance: int = 1,
        *,
        start: Start = "live",
        window: int | None = None,
    ) -> N:
        """Put a node on the bus (a class is instantiated); returns the node.

        It opens (``on_opened``) once the sequencer has told it its next command sequence, as
        a real node does; ``start="rewind"`` replays the stream from the first message.
        """
        obj = node() if isinstance(node, type) else node
        node_id = self.sim.add_node(
            account, instance, start=start, topics=type(obj).topics(), window=window
        )
        self._members.append(_Member(obj, SimClient(self.sim, node_id), account, instance))
        return obj

    def _member(self, node: Node) -> _Member:
        for m in self._members:
            if m.node is node and m.alive:
                return m
        raise ValueError("that node is not on this bus")

    def kill(self, node: Node) -> None:
        """Take a node off the bus at once, as if its process died."""
        m = self._member(node)
        self.sim.remove_node(m.client.node_id)
        m.alive = False

    def drop_downstream(self, node: Node, count: int) -> None:
        """Lose the next ``count`` live packets on the way to ``node`` (gap fill recovers)."""
        self.sim.drop_downstream(self._member(node).client.node_id, count)

    def set_downstream_loss(self, node: Node, pct: float) -> None:
        """Lose ``pct`` percent of live packets on the way to ``node``, at random (seeded)."""
        self.sim.set_downstream_loss(self._member(node).client.node_id, pct)

    @property
    def leader(self) -> int | None:
        """The sequencer leading the bus (1 without a cluster), None during an election."""
        return self.sim.leader

    def kill_sequencer(self, member: int) -> None:
        """Kill sequencer ``member`` (1-based) as SIGKILL would: its journal stays. In a
        cluster a standby takes over and the nodes follow the new leader."""
        self.sim.kill_sequencer(member)

    def restart_sequencer(self, member: int) -> None:
        """Restart a killed sequencer from its journal."""
        self.sim.restart_sequencer(member)

    def client(self, node: Node) -> SimClient:
        return self._member(node).client

    def step(self, limit_ns: int) -> None:
        """One round: datagrams due now, every node's records, their sends, then the clock."""
        self.sim.process()
        for m in self._members:
            if not m.alive or m.node.stopped:
                continue
            batch = m.client.poll(4096, 0.0)
            if not m.opened:
                if batch:
                    m.early.append(batch)
                if not m.client.is_ready():
                    continue
                m.node.attach(m.client, m.account, m.instance, rewinding=m.client.is_rewinding())
                m.opened = True
                for early in m.early:
                    m.node.handle_batch(early)
                m.early.clear()
            elif batch:
                m.node.handle_batch(batch)
            if m.opened and m.node.posted:
                m.node.flush_outbox()
        self.sim.transmit()
        self.sim.advance(limit_ns)
        self.steps += 1

    def settle(self, *nodes: Node, for_ns: int = 1_000_000_000) -> None:
        """Run until ``nodes`` stand at the same point of the stream (the same last record),
        e.g. before comparing their states: a node that lost a packet is briefly behind its
        peers while the replayer fills the gap, and idle clock ticks keep the stream moving.
        Meant for nodes of one class (the records a node sees depend on its topics)."""
        self.run(until=lambda: len({n.sequence() for n in nodes}) == 1, for_ns=for_ns)

    def run(
        self,
        *,
        until: Callable[[], bool] | None = None,
        for_ns: int | None = None,
        max_steps: int = 10_000_000,
    ) -> None:
        """Run until ``until()`` is true or ``for_ns`` of virtual time have passed.

        With ``until``, failing to get there within ``for_ns`` (default one virtual minute)
        raises ``TimeoutError``.
        """
        span = for_ns if for_ns is not None else DEFAULT_LIMIT_NS
        limit = self.now_ns + span
        for _ in range(max_steps):
            if until is not None and until():
                return
            if self.now_ns >= limit:
                if until is None:
                    return
                raise TimeoutError(f"condition not met after {span} ns of virtual time")
            self.step(limit)
        raise TimeoutError(f"condition not met after {max_steps} steps")
