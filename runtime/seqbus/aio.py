"""``seqbus.aio``: a node inside an asyncio event loop.

Gateways that speak HTTP, WebSocket or FIX to the outside run their bus node on the same loop
as their servers. The Rust core keeps the sockets: ``seqbus._core.LoopClient`` polls the node's
client on a Rust thread of its own (the configured idle strategy and transport, exactly as a
blocking node polls) and signals an eventfd the loop watches (``loop.add_reader``), so the
loop wakes only when there is something for it — a batch, room in the command window, the
node becoming ready, the error the client stopped with — and never polls.

What the node is handed and how is unchanged: each batch goes through :meth:`Node.handle_batch`
(``seqbus_core::delivery`` decided its records; the deterministic clock and timers move with
them, so a deterministic timer fires at the same point of the stream as in a blocking node or a
replay), and handlers, ``on_rewound`` and timer callbacks run on the loop's thread, one at a
time, in stream order. Handlers stay plain methods; what they send goes through ``post``. Code
outside the handlers (an HTTP request) sends with ``await connection.send(message)``, which
waits for room in the window instead of raising :class:`BackPressureError`, in call order.

::

    async with seqbus.aio.connect(Gateway, "bus.toml", account="GW") as bus:
        await bus.rewound()
        seq = await bus.send(NewOrder(...))
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import signal
import threading
import time
from collections import deque
from collections.abc import Generator, Iterator, Sequence
from os import PathLike
from types import TracebackType
from typing import Any, Generic, NoReturn, TypeVar

from seqbus import _core
from seqbus.errors import BackPressureError, SeqbusError, TransportError
from seqbus.node import Node, OnError, Sendable, _body_of
from seqbus.runner import (
    DRAIN_TIMEOUT_S,
    READY_TIMEOUT_S,
    Start,
    _start_arg,
    apply_error_policy,
)

__all__ = ["Connection", "close_on_signals", "connect", "run"]

N = TypeVar("N", bound=Node)

log = logging.getLogger("seqbus.aio")
node_log = logging.getLogger("seqbus.node")


class Connection(Generic[N]):
    """A node running inside the event loop; made by :func:`connect`."""

    def __init__(
        self,
        node: N,
        client: _core.LoopClient,
        account: str,
        instance: int,
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        #: The node whose handlers this connection calls.
        self.node = node
        self.account = account
        self.instance = instance
        #: Calls of :meth:`send` that waited for room in the window.
        self.send_waits = 0
        self._client = client
        self._loop = loop
        self._fd = client.fileno()
        self._attached = False
        self._early: list[bytes] = []
        self._opened = asyncio.Event()
        self._live = asyncio.Event()
        self._closed = asyncio.Event()
        #: Closing: delivering on until the stream confirms what the node sent or queued.
        self._closing = False
        self._drain_timer: asyncio.TimerHandle | None = None
        #: What closed it, as the node's last record says ("close()", "SIGTERM", ...).
        self._closed_by = "close()"
        self._error: BaseException | None = None
        #: Senders waiting for the window, in call order; only the first is woken.
        self._senders: deque[asyncio.Future[None]] = deque()
        self._local_timer: asyncio.TimerHandle | None = None
        loop.add_reader(self._fd, self._on_readable)

    # -- what applications call ----------------------------------------------------------------

    async def send(self, message: Sendable) -> int:
        """Send a command; its command sequence. Waits while the window of in-flight commands
        is full (or earlier calls wait), so commands go out in call order.

        ``message`` is what :meth:`Node.send` takes (a generated message or an encoded body;
        anything else is a ``TypeError``). Raises :class:`SeqbusError` when the connection is
        closing or closed (a send waiting when it closes included).
        """
        body = _body_of(message)
        self._check_open()
        if self._closing:
            raise SeqbusError(f"node {self.account}/{self.instance}: the connection is closing")
        node = self.node
        if not self._senders:
            try:
                return node.send(body)
            except BackPressureError:
                pass
        self.send_waits += 1
        waiter: asyncio.Future[None] = self._loop.create_future()
        self._senders.append(waiter)
        try:
            while True:
                await waiter
                try:
                    seq = node.send(body)
                except BackPressureError:
                    # still full: wait, first in line, for the next room the client reports
                    waiter = self._loop.create_future()
                    self._senders[0] = waiter
                    continue
                return seq
        finally:
            head = bool(self._senders) and self._senders[0] is waiter
            try:
                self._senders.remove(waiter)
            except ValueError:
                pass
            if head:
                self._wake_sender()

    async def rewound(self) -> None:
        """Return once the node has caught up with the live stream (at once for a node that
        started live); raises the connection's error if it closed first."""
        live = asyncio.ensure_future(self._live.wait())
        closed = asyncio.ensure_future(self._closed.wait())
        try:
            await asyncio.wait((live, closed), return_when=asyncio.FIRST_COMPLETED)
        finally:
            live.cancel()
            closed.cancel()
        if not self._live.is_set():
            self._raise_closed()

    async def wait_closed(self) -> N:
        """Return the node once the connection has closed (:meth:`close`, the node's
        ``stop()``); raises the error it closed with (a handler's, the client's)."""
        await self._closed.wait()
        if self._error is not None:
            raise self._error
        return self.node

    def close(self) -> None:
        """Close as ``seqbus.run`` stops a node: keep delivering until the stream confirms every
        command the node sent or queued (``post``, sends waiting for the window), at most
        ``seqbus.runner.DRAIN_TIMEOUT_S``; then ``on_closed`` and the client is closed. Returns
        at once; :meth:`wait_closed` (or :meth:`aclose`) waits for the end. New sends are
        refused from now on."""
        if self._closed.is_set() or self._closing:
            return
        self._closing = True
        if not self._attached:
            self._finish(None)
            return
        self._drain_timer = self._loop.call_later(DRAIN_TIMEOUT_S, self._drain_expired)
        self._check_drained()

    def _close_for(self, reason: str) -> None:
        """:meth:`close`, saying why in the node's last record."""
        if not (self._closed.is_set() or self._closing):
            self._closed_by = reason
        self.close()

    async def aclose(self) -> None:
        """:meth:`close` and wait until closed (without raising the error it closed with)."""
        self.close()
        await self._closed.wait()

    @property
    def closed(self) -> bool:
        return self._closed.is_set()

    def stats(self) -> dict[str, int]:
        """The client's counters (``NodeClient.stats``), plus ``loop_signals`` (times the loop
        was woken) and ``loop_batches`` (batches handed to it)."""
        self._check_open()
        return self._client.stats()

    async def __aenter__(self) -> Connection[N]:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    # -- the loop's side ---------------------------------------------------------------------

    def _on_readable(self) -> None:
        """The client's eventfd is readable: take one batch (one per turn of the loop, so the
        loop's other work runs between batches of a long replay)."""
        if self._closed.is_set():
            return
        node = self.node
        try:
            batch = self._client.take()
            if not self._attached:
                if batch:
                    self._early.append(batch)
                if self._client.is_ready():
                    self._attach()
            elif batch:
                node.handle_batch(batch)
            if node.posted:
                node.flush_outbox()
            self._wake_sender()
            if self._attached and not node.is_rewinding:
                self._live.set()
            if node.stopped and not self._closing:
                self._close_for("node.stop()")
            elif self._closing:
                self._check_drained()
        except Exception as exc:  # a handler's or the client's: wait_closed raises it
            self._finish(exc)

    def _attach(self) -> None:
        """The client may send: open the node (``on_opened`` may send), then hand it what came
        before, in order — as ``seqbus.run`` does."""
        node = self.node
        node.attach(
            self._client, self.account, self.instance, rewinding=self._client.is_rewinding()
        )
        node._on_local_timer = self._schedule_local_timer
        self._attached = True
        early, self._early = self._early, []
        for batch in early:
            node.handle_batch(batch)
        self._opened.set()
        self._schedule_local_timer()

    def _check_drained(self) -> None:
        """Closing: finish once nothing the node sent or queued waits for the stream and every
        batch handed over was handled."""
        if self._closed.is_set() or self.node.posted or self._senders:
            return
        try:
            # in flight first: the client's thread queues the batch that confirmed a command
            # before it lets the client go, so once none is in flight the last batch is queued
            # (or was handled); read the other way round, a batch queued between the two reads
            # would be left unhandled
            drained = self._client.stats()["in_flight"] == 0 and self._client.queued() == 0
        except Exception as exc:
            self._finish(exc)
            return
        if drained:
            self._finish(None)

    def _drain_expired(self) -> None:
        self._drain_timer = None
        if self._closed.is_set():
            return
        try:
            in_flight = self._client.stats()["in_flight"]
        except Exception as exc:
            self._finish(exc)
            return
        log.warning(
            "node %s/%s closes with %d commands in flight, %d queued and %d sends waiting, not "
            "confirmed by the stream within %g s",
            self.account,
            self.instance,
            in_flight,
            self.node.posted,
            len(self._senders),
            DRAIN_TIMEOUT_S,
        )
        self._finish(None)

    def _wake_sender(self) -> None:
        if self._senders and not self._senders[0].done():
            self._senders[0].set_result(None)

    def _schedule_local_timer(self) -> None:
        """Local (wall-clock) timers of the node fire from the loop: one loop timer at the
        earliest."""
        if self._local_timer is not None:
            self._local_timer.cancel()
            self._local_timer = None
        timers = self.node._local_timers
        if timers and not self._closed.is_set():
            delay = max(0.0, timers[0].at - time.monotonic())
            self._local_timer = self._loop.call_later(delay, self._fire_local_timers)

    def _fire_local_timers(self) -> None:
        self._local_timer = None
        try:
            self.node._fire_local_timers()
            self._schedule_local_timer()
            if self.node.stopped:
                self._close_for("node.stop()")
        except Exception as exc:
            self._finish(exc)

    def _finish(self, error: BaseException | None) -> None:
        if self._closed.is_set():
            return
        self._loop.remove_reader(self._fd)
        if self._drain_timer is not None:
            self._drain_timer.cancel()
            self._drain_timer = None
        if self._local_timer is not None:
            self._local_timer.cancel()
            self._local_timer = None
        self.node._on_local_timer = None
        if error is None and self._attached:
            try:
                self.node.on_closed()  # may post final commands: the close below sends them
            except Exception as exc:
                error = exc
            else:
                node = self.node
                node_log.info(
                    "node %s/%s: stopped at sequence %d (%s): %d messages handled, %d "
                    "commands sent", self.account, self.instance, node.sequence(),
                    self._closed_by, node.stats.messages, node.stats.sent,
                )
        try:
            self._client.close()
        except Exception as exc:
            error = error if error is not None else exc
        self._error = error
        self._closed.set()
        for waiter in self._senders:
            if not waiter.done():
                waiter.set_exception(self._closed_error())

    def _closed_error(self) -> SeqbusError:
        return SeqbusError(
            f"node {self.account}/{self.instance}: the connection closed"
            + (f" ({self._error})" if self._error is not None else "")
        )

    def _raise_closed(self) -> NoReturn:
        if self._error is not None:
            raise self._error
        raise self._closed_error()

    def _check_open(self) -> None:
        if self._closed.is_set():
            self._raise_closed()


class _Connect(Generic[N]):
    """What :func:`connect` returns: await it, or use it with ``async with``."""

    def __init__(self, opening: Generator[Any, None, Connection[N]]) -> None:
        self._opening = opening
        self._connection: Connection[N] | None = None

    def __await__(self) -> Generator[Any, None, Connection[N]]:
        return self._opening

    async def __aenter__(self) -> Connection[N]:
        self._connection = await self
        return self._connection

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._connection is not None:
            await self._connection.aclose()


def connect(
    node: N | type[N],
    config: str | PathLike[str],
    account: str,
    instance: int = 1,
    *,
    start: Start = "live",
    listen: str | None = None,
    window: int | None = None,
    on_error: OnError | None = None,
    skip: Sequence[int] = (),
) -> _Connect[N]:
    """Connect ``node`` (a class or an instance) to the bus of ``config`` inside the running
    event loop; the connection is returned once the node is open (``on_opened`` was called,
    it may send). ``window`` overrides ``node.window`` (most commands in flight); the error
    policy (``on_error``, ``skip``) is read and applied as :func:`seqbus.run` does.

    Raises :class:`TransportError` when the sequencer does not answer within 10 s, and the
    errors of :class:`seqbus.NodeClient` for a bad configuration.
    """
    return _Connect(
        _open(
            node, str(config), account, instance, start, listen, window, on_error, tuple(skip)
        ).__await__()
    )


async def _open(
    node: N | type[N],
    config: str,
    account: str,
    instance: int,
    start: Start,
    listen: str | None,
    window: int | None,
    on_error: OnError | None,
    skip: Sequence[int],
) -> Connection[N]:
    loop = asyncio.get_running_loop()
    obj: N = node() if isinstance(node, type) else node
    apply_error_policy(obj, config, account, on_error, skip)
    client = _core.LoopClient(
        config,
        account,
        instance,
        start=_start_arg(start),
        topics=type(obj).topics(),
        window=window,
        listen=listen,
    )
    conn = Connection(obj, client, account, instance, loop)
    opened = asyncio.ensure_future(conn._opened.wait())
    closed = asyncio.ensure_future(conn._closed.wait())
    try:
        await asyncio.wait(
            (opened, closed), timeout=READY_TIMEOUT_S, return_when=asyncio.FIRST_COMPLETED
        )
    except BaseException:
        conn.close()
        raise
    finally:
        opened.cancel()
        closed.cancel()
    if conn._opened.is_set():
        return conn
    if not conn.closed:
        conn._finish(
            TransportError(
                f"node {account}/{instance}: no answer from the sequencer within "
                f"{READY_TIMEOUT_S:g} s (is it running? see [sequencer] upstream in {config})"
            )
        )
    conn._raise_closed()


async def run(
    node: N | type[N],
    config: str | PathLike[str],
    account: str,
    instance: int = 1,
    *,
    start: Start = "live",
    listen: str | None = None,
    window: int | None = None,
    on_error: OnError | None = None,
    skip: Sequence[int] = (),
) -> N:
    """The asyncio counterpart of :func:`seqbus.run`: connect ``node`` and run it until it
    stops (``stop()``) or the task is cancelled; SIGINT and SIGTERM close it cleanly when the
    loop runs in the main thread. Returns the node; raises the error it stopped with."""
    async with connect(
        node,
        config,
        account,
        instance,
        start=start,
        listen=listen,
        window=window,
        on_error=on_error,
        skip=skip,
    ) as conn:
        with close_on_signals(conn):
            return await conn.wait_closed()


@contextlib.contextmanager
def close_on_signals(connection: Connection[Any]) -> Iterator[None]:
    """Close ``connection`` cleanly on SIGINT or SIGTERM while the block runs (when its loop
    runs in the main thread; elsewhere signals stay as they are)."""
    loop = connection._loop
    signals: list[signal.Signals] = []
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGINT, signal.SIGTERM):
            try:
                loop.add_signal_handler(sig, connection._close_for, sig.name)
            except (NotImplementedError, RuntimeError, ValueError):
                continue
            signals.append(sig)
    try:
        yield
    finally:
        for sig in signals:
            loop.remove_signal_handler(sig)
