"""Running nodes against a real bus: ``seqbus.run`` and ``seqbus.run_many``.

The Rust core (``seqbus._core.NodeClient``) owns the sockets; the loop here polls it with a
bounded timeout (the GIL is released while Rust waits), so Ctrl-C and SIGTERM stop a node
within one poll interval. A stopping node first waits (bounded) until the stream confirms every
command it sent or queued, then the client is closed.
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import signal
import sys
import threading
import time
import weakref
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from os import PathLike
from types import FrameType
from typing import TYPE_CHECKING, Literal, cast

from seqbus.errors import SeqbusError, TransportError
from seqbus.node import Node, OnError

if TYPE_CHECKING:
    from seqbus import _core

__all__ = ["NodeSpec", "Start", "load_node_class", "run", "run_many", "stop_on_signals"]

#: Where a node starts: "live" (the default), "rewind" (the whole persisted stream) or a
#: sequence number to replay from.
Start = Literal["live", "rewind"] | int

POLL_TIMEOUT_S = 0.05
READY_TIMEOUT_S = 10.0
#: How long a stopping node waits for the stream to confirm what it sent (docs/sdk.md).
DRAIN_TIMEOUT_S = 5.0


def load_node_class(target: str) -> type[Node]:
    """``package.module:ClassName`` → the class, which must subclass :class:`seqbus.Node`."""
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise SeqbusError(f"node must be given as MODULE:CLASS, not {target!r}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise SeqbusError(f"cannot import {module_name!r}: {exc}") from exc
    obj: object = module
    for part in attr.split("."):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            raise SeqbusError(f"{module_name!r} has no attribute {attr!r}") from None
    if not (isinstance(obj, type) and issubclass(obj, Node)):
        raise SeqbusError(f"{target} is not a subclass of seqbus.Node")
    return obj


def importable_from(paths: Sequence[str] | None) -> None:
    """Makes application modules importable as ``python -m`` would: the working directory
    first on ``sys.path`` (a console script has only its own directory there), then each of
    ``paths`` before it (``--path`` of ``seqbus node`` and ``seqbus tail``)."""
    for entry in [os.getcwd(), *reversed(paths or [])]:
        sys.path.insert(0, entry)

log = logging.getLogger("seqbus.runner")
#: The records of a node's life (what the Rust core says of its client goes here too).
node_log = logging.getLogger("seqbus.node")

#: The signal that set a stop event of :func:`stop_on_signals`, by event.
_signalled: weakref.WeakKeyDictionary[threading.Event, str] = weakref.WeakKeyDictionary()


def stopped_by(stop: threading.Event) -> str | None:
    """The name of the signal (``SIGTERM``) that set ``stop`` under :func:`stop_on_signals`;
    None when none did."""
    return _signalled.get(stop)


@dataclass
class NodeSpec:
    """One node of :func:`run_many`."""

    node: Node | type[Node]
    account: str
    instance: int = 1
    start: Start = "live"
    #: host:port this node receives a udp-unicast downstream on (overrides node.listen).
    listen: str | None = None
    #: Overrides the configuration's ``on_error`` for this node (see :func:`run`).
    on_error: OnError | None = None
    #: Sequences to skip besides the configuration's (see :func:`run`).
    skip: Sequence[int] = ()


@contextlib.contextmanager
def stop_on_signals(stop: threading.Event) -> Iterator[threading.Event]:
    """Set ``stop`` on SIGINT or SIGTERM while the block runs (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield stop
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        _signalled.setdefault(stop, signal.Signals(signum).name)
        stop.set()

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield stop
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def _start_arg(start: Start) -> Start:
    if isinstance(start, bool) or not (start in ("live", "rewind") or isinstance(start, int)):
        raise SeqbusError(f"start must be 'live', 'rewind' or a sequence number, not {start!r}")
    if isinstance(start, int) and start < 1:
        raise SeqbusError(f"start sequence must be 1 or more, not {start}")
    return start


def apply_error_policy(
    node: Node, config: str, account: str, on_error: OnError | None, skip: Sequence[int]
) -> None:
    """The account's error policy, as every instance of it reads it (docs/sdk.md): the
    configuration's, else the node's; ``on_error`` overrides it, ``skip`` adds sequences
    (``seqbus.run`` and ``seqbus.aio.connect``)."""
    from seqbus import _core

    cfg_on_error, cfg_skip = _core.error_policy(config, account)
    node.set_error_policy(on_error or cast(OnError | None, cfg_on_error), [*cfg_skip, *skip])


def _loop(node: Node, spec: NodeSpec, config: str, stop: threading.Event) -> None:
    from seqbus import _core

    apply_error_policy(node, config, spec.account, spec.on_error, spec.skip)
    client = _core.NodeClient(
        config,
        spec.account,
        spec.instance,
        start=_start_arg(spec.start),
        topics=type(node).topics(),
        listen=spec.listen,
    )
    try:
        # on_opened may send, so the node opens once the sequencer has told the client its
        # next command sequence; what arrives meanwhile is handled right after, in order.
        early: list[bytes] = []
        deadline = time.monotonic() + READY_TIMEOUT_S
        while not client.is_ready():
            if stop.is_set():
                node_log.info(
                    "node %s/%s: stopped before the sequencer answered (%s)",
                    spec.account, spec.instance, _why(node, stop),
                )
                return
            if time.monotonic() > deadline:
                raise TransportError(
                    f"node {spec.account}/{spec.instance}: no answer from the sequencer within "
                    f"{READY_TIMEOUT_S:g} s (is it running? see [sequencer] upstream in {config})"
                )
            batch = client.poll(4096, POLL_TIMEOUT_S)
            if batch:
                early.append(batch)
        node.attach(client, spec.account, spec.instance, rewinding=client.is_rewinding())
        for batch in early:
            node.handle_batch(batch)
        while not stop.is_set() and not node.stopped:
            node.poll_once(POLL_TIMEOUT_S)
        _drain(node, client, spec)
        node.on_closed()
        node_log.info(
            "node %s/%s: stopped at sequence %d (%s): %d messages handled, %d commands sent",
            spec.account, spec.instance, node.sequence(), _why(node, stop),
            node.stats.messages, node.stats.sent,
        )
    finally:
        client.close()


def _why(node: Node, stop: threading.Event) -> str:
    """What stopped a node that stops cleanly, as its last record says."""
    signalled = stopped_by(stop)
    if signalled is not None:
        return signalled
    if node.stopped:
        return "node.stop()"
    return "the stop event was set"


def _drain(node: Node, client: _core.NodeClient, spec: NodeSpec) -> None:
    """A stopping node keeps reading the stream until everything it sent is sequenced: the
    commands :meth:`Node.post` queued go out as the window frees, and none stays in flight
    (handlers keep running meanwhile, so the node's state follows the stream to that point).
    Bounded by :data:`DRAIN_TIMEOUT_S`: with no sequencer to answer, the node closes and says
    how many commands were not confirmed."""
    deadline = time.monotonic() + DRAIN_TIMEOUT_S
    while node.posted or client.stats()["in_flight"]:
        if time.monotonic() > deadline:
            log.warning(
                "node %s/%s closes with %d commands in flight and %d queued, not confirmed "
                "by the stream within %g s",
                spec.account,
                spec.instance,
                client.stats()["in_flight"],
                node.posted,
                DRAIN_TIMEOUT_S,
            )
            return
        node.poll_once(POLL_TIMEOUT_S)


def run(
    node: Node | type[Node],
    config: str | PathLike[str],
    account: str,
    instance: int = 1,
    *,
    start: Start = "live",
    listen: str | None = None,
    stop: threading.Event | None = None,
    on_error: OnError | None = None,
    skip: Sequence[int] = (),
) -> Node:
    """Connect ``node`` (a class or an instance) to the bus of ``config`` and run it.

    Returns the node when ``stop`` is set or on SIGINT/SIGTERM (when called from the main
    thread). Errors from handlers propagate after the client is closed (under the default
    fail-stop policy; ``node.stats.failure`` names the message).

    The error policy comes from the configuration (``node.on_error``, ``[node.accounts.NAME]
    on_error`` and ``skip``), else from the node (``ON_ERROR``, its constructor); ``on_error``
    here overrides it and ``skip`` adds sequences. Every instance of an account must run with
    the same policy, or their states part at the first error.
    """
    obj = node() if isinstance(node, type) else node
    event = stop if stop is not None else threading.Event()
    spec = NodeSpec(obj, account, instance, start, listen, on_error, tuple(skip))
    with stop_on_signals(event):
        _loop(obj, spec, str(config), event)
    return obj


def run_many(
    specs: Sequence[NodeSpec],
    config: str | PathLike[str],
    *,
    stop: threading.Event | None = None,
) -> list[Node]:
    """Run several nodes in this process, one thread each (their handlers never overlap with
    each other's in a way that matters: each node sees its own stream in order).

    The first error of any node stops them all and is raised here.
    """
    nodes = [s.node() if isinstance(s.node, type) else s.node for s in specs]
    event = stop if stop is not None else threading.Event()
    errors: list[BaseException] = []

    def body(node: Node, spec: NodeSpec) -> None:
        try:
            _loop(node, spec, str(config), event)
        except BaseException as exc:  # handed to the caller below
            errors.append(exc)
            event.set()

    threads = [
        threading.Thread(target=body, args=(n, s), name=f"seqbus-{s.account}-{s.instance}")
        for n, s in zip(nodes, specs, strict=True)
    ]
    with stop_on_signals(event):
        for t in threads:
            t.start()
        while any(t.is_alive() for t in threads):
            for t in threads:
                t.join(POLL_TIMEOUT_S)
    if errors:
        raise errors[0]
    return nodes
