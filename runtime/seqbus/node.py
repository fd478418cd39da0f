"""``seqbus.Node``: the base of every application node.

A node is a deterministic state machine over the sequenced stream. The Rust core
(``seqbus._core``) owns the sockets and the protocol, decides what the node is handed (topics,
admin routing, reassembly, time records: ``seqbus_core::delivery``) and hands it one buffer per
batch (docs/architecture.md, "Batches from Rust to Python"). This module drives the walk over a
batch — in Rust, with the node's deterministic clock (``_core.Clock``, which says when timers
are due) — runs the timer callbacks and calls the generated dispatch of the node's IDL package,
which wraps each body in its typed view and calls ``on_<message>(msg, mine)``.

Generated bases (``ExchangeNode``, ``PingpongNode``…) subclass :class:`Node` and set
``SCHEMA_ID``, ``_seqbus_handlers_`` and ``_seqbus_dispatch_``; applications subclass those.
"""

from __future__ import annotations

import atexit
import bisect
import difflib
import heapq
import itertools
import logging
import mmap
import sys
import time
import traceback
import types
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from typing import Any, ClassVar, Literal, Protocol

from seqbus import _core
from seqbus._codec_support import Handler
from seqbus.admin import AdminCommandSpec, bus_dispatch, collect_admin_commands, run_admin_command
from seqbus.batch import (
    RECORD_REWOUND,
    RECORD_TIME,
    Buffer,
    Dispatch,
    account_key,
    message_type,
    record_at,
)
from seqbus.errors import BackPressureError, DecodeError, SeqbusError, UnknownMessageError

__all__ = [
    "Client",
    "HandlerFailure",
    "Message",
    "Node",
    "NodeStats",
    "OnError",
    "Sendable",
    "Timer",
    "Topic",
]

log = logging.getLogger("seqbus.node")

#: The latest stream time a deterministic timer can be set to (ns).
_LAST_NS = 2**64 - 2
#: A message type as the topic filter sees it: (schema id, template id).
Topic = tuple[int, int]
#: What ``send`` hands to the client.
Body = bytes | bytearray | memoryview


class Message(Protocol):
    """A message object of a generated package (``NewOrder(...)``): what :meth:`Node.send` and
    :meth:`Node.post` take besides an encoded body. Views (``NewOrderView``), structs and
    anything else with an ``encode()`` (a ``str`` has one) are not messages."""

    TEMPLATE_ID: ClassVar[int]
    SCHEMA_ID: ClassVar[int]

    def encode(self) -> bytes: ...


#: What ``send`` and ``post`` take: a generated message, or an encoded body (bytes-like).
Sendable = Message | bytes | bytearray | memoryview | mmap.mmap
#: What a node does when a handler raises: "stop" (fail-stop, the default) or "skip".
OnError = Literal["stop", "skip"]
_ON_ERROR = ("stop", "skip")
#: ``skip_from`` of ``walk_batch`` when no sequence is to be skipped: past any sequence a
#: stream reaches, and a machine-word int (2**64 - 1 took a slow conversion on every walk).
_NO_SKIP = 2**63 - 1
_walk = _core.walk_batch
_STOP_END, _STOP_TIMER, _STOP_SKIP = _core.STOP_END, _core.STOP_TIMER, _core.STOP_SKIP
_STOP_ERROR, _STOP_UNKNOWN = _core.STOP_ERROR, _core.STOP_UNKNOWN


#: What ``seqbus._core.NodeClient.poll_walk`` returns when a batch came:
#: ``(batch, offset, stop, dispatched, error)``.
PollWalked = tuple[bytes, int, int, int, object]


def _no_flush() -> None:
    """A client without ``flush`` sends at its next poll."""


class Client(Protocol):
    """What a node needs from the transport: ``seqbus._core.NodeClient`` or the test harness."""

    def poll(self, max_records: int, timeout: float) -> bytes: ...

    def send(self, body: Body) -> int: ...

    def is_rewinding(self) -> bool: ...


@dataclass(frozen=True)
class HandlerFailure:
    """A handler (or timer callback) that raised: the message, the handler, the error."""

    #: Sequence of the message being handled (a timer: of the message that made it due).
    sequence: int
    #: The message type (its generated class name), or "timer".
    message_type: str
    #: The handler (``on_transfer``) or the timer callback's name.
    handler: str
    #: ``ValueError: ...``
    error: str
    #: The formatted traceback.
    traceback: str
    #: What was done: "stopped" or "skipped".
    action: str
    schema_id: int = 0
    template_id: int = 0

    def describe(self) -> str:
        """One line: what raised where and what was done."""
        return (
            f"{self.handler} raised at #{self.sequence} ({self.message_type}): {self.error}; "
            f"{self.action}"
        )


@dataclass
class NodeStats:
    """Counters a node keeps about what crossed into Python."""

    messages: int = 0
    batches: int = 0
    unknown: int = 0
    timers_fired: int = 0
    sent: int = 0
    #: Admin commands of this node's account it ran (``help`` and refused ones included).
    admin_commands: int = 0
    #: Admin commands whose handler raised (other than ``AdminError``) or that were corrupt.
    admin_errors: int = 0
    #: Messages not handled: their sequence was configured to be skipped, or (``on_error =
    #: "skip"``) their handler raised. Every instance of the account skips the same ones.
    skipped: int = 0
    #: The sequences of those messages, in stream order (a timer callback that raised under
    #: "skip" is counted in ``skipped`` and named by ``last_error``, not listed here).
    skipped_sequences: list[int] = field(default_factory=list)
    #: The last handler error, skipped or not.
    last_error: HandlerFailure | None = None
    #: The handler error that stopped the node (fail-stop); None while it runs.
    failure: HandlerFailure | None = None


@dataclass(order=True)
class Timer:
    """A pending timer; ``cancel()`` stops it from firing.

    Deterministic timers (``Node.set_timer``) fire at a point of the stream; local timers
    (``Node.set_local_timer``) fire on this machine's monotonic clock and are therefore not
    reproduced by a replay (``deterministic`` is False).
    """

    at: int | float
    order: int
    callback: Callable[[], None] = field(compare=False)
    deterministic: bool = field(compare=False, default=True)
    cancelled: bool = field(compare=False, default=False)
    #: Told of a cancel (a deterministic timer's node: its clock drops the deadline at once).
    on_cancel: Callable[[int], None] | None = field(compare=False, default=None, repr=False)

    def cancel(self) -> None:
        if not self.cancelled and self.on_cancel is not None:
            self.on_cancel(self.order)
        self.cancelled = True


def _body_of(message: object, method: str = "send") -> Body:
    """The body to send: an encoded body (bytes-like) as it is, a generated message encoded.
    A generated message is a class with ``TEMPLATE_ID`` and ``SCHEMA_ID`` and ``encode()``;
    anything else (a ``str`` has an ``encode()`` too) is refused with a ``TypeError`` naming
    ``method`` and what it was given."""
    if isinstance(message, (bytes, bytearray, memoryview)):
        return message
    cls = type(message)
    if hasattr(cls, "TEMPLATE_ID") and hasattr(cls, "SCHEMA_ID") and hasattr(cls, "encode"):
        body: Body = message.encode()  # type: ignore[attr-defined]
        return body
    if isinstance(message, mmap.mmap):
        return memoryview(message)
    given = cls.__qualname__
    if cls.__module__ != "builtins":
        given = f"{cls.__module__}.{given}"
    hint = ""
    if isinstance(message, str):
        hint = " (encode text into a message field, or pass bytes)"
    elif hasattr(cls, "TEMPLATE_ID") and hasattr(message, "to_value"):
        hint = " (a view of a received message: send its to_value(), or the bytes it reads)"
    raise TypeError(
        f"{method}() takes a generated message or an encoded body (bytes, bytearray, "
        f"memoryview), not {given}{hint}"
    )


#: The hooks of :class:`Node` whose names begin like handlers'.
_HOOKS = frozenset({"on_opened", "on_rewound", "on_batch", "on_closed"})


def _close_handlers(name: str, handlers: list[str]) -> list[str]:
    """The handler names ``name`` may have meant: the one it is but for underscores and
    case, else the closest (difflib, on the names after ``on_``)."""
    bare = name.removeprefix("on_")
    squeezed = bare.replace("_", "").lower()
    same = [h for h in handlers if h.removeprefix("on_").replace("_", "").lower() == squeezed]
    if same:
        return same
    stems = {h.removeprefix("on_"): h for h in handlers}
    return [stems[s] for s in difflib.get_close_matches(bare, list(stems), n=2, cutoff=0.7)]


def _check_handlers(cls: type[Node]) -> None:
    """Every method ``on_<name>`` that ``cls`` itself defines must be the handler of a message
    type of the node's generated bases (or a hook, or override what a base defines): a
    misspelt handler would otherwise never be called. Raises ``TypeError`` with the closest
    handler names (difflib)."""
    handlers: dict[str, str] = {}  # handler name -> its message type
    for base in reversed(cls.__mro__):
        names: dict[int, str] = base.__dict__.get("_seqbus_handlers_", {})
        if not names:
            continue
        dispatch = base.__dict__.get("_seqbus_dispatch_")
        dispatch = getattr(dispatch, "__func__", dispatch)
        module = sys.modules.get(getattr(dispatch, "__module__", None) or "")
        messages: dict[int, type] = getattr(module, "MESSAGES", {})
        for template_id, name in names.items():
            message = messages.get(template_id)
            handlers[name] = message.__name__ if message is not None else f"template {template_id}"
    for name, value in cls.__dict__.items():
        if not name.startswith("on_") or name in handlers or name in _HOOKS:
            continue
        if not (callable(value) or isinstance(value, (staticmethod, classmethod))):
            continue
        if any(name in base.__dict__ for base in cls.__mro__[1:]):
            continue  # overrides a method a base defines
        close = _close_handlers(name, list(handlers))
        bases = [
            base.__name__ for base in cls.__mro__[1:] if base.__dict__.get("_seqbus_handlers_")
        ]
        if close:
            guess = " or ".join(f"{n} (the handler of {handlers[n]})" for n in close)
            why = f"did you mean {guess}?"
        elif handlers:
            why = f"the handlers of {', '.join(bases)} are {', '.join(sorted(handlers))}"
        else:
            why = (
                f"{cls.__name__} subclasses no generated node base (e.g. ExchangeNode): "
                "it is handed no message"
            )
        raise TypeError(
            f"{cls.__qualname__}.{name} handles no message type of this node: {why} "
            "(a method whose name begins with on_ is a handler, on_<message in snake_case>; "
            "name a method that is not one otherwise)"
        )


class Node:
    """Base class of application nodes; subclass a generated ``<Package>Node``.

    Handlers run one at a time, in stream order. Inside a handler, :meth:`sequencer_time` is the
    sequencer's timestamp of the message being handled, so a replay computes exactly what the
    live run computed. ``mine`` is True for messages sent under this node's account by any of its
    instances: hot-hot instances of one account are one logical node and must agree.
    """

    SCHEMA_ID: ClassVar[int] = 0
    _seqbus_handlers_: ClassVar[dict[int, str]] = {}
    #: Extra (schema id, template id) pairs to receive besides those the handlers imply.
    TOPICS: ClassVar[tuple[Topic, ...]] = ()
    #: What to do with a message no class of this node can decode: "skip" counts it in
    #: ``stats.unknown``; "raise" raises :class:`UnknownMessageError` from the loop.
    ON_UNKNOWN: ClassVar[Literal["skip", "raise"]] = "skip"
    #: What to do when a handler or timer callback raises (docs/sdk.md, "Errors in
    #: handlers"): "stop" (fail-stop: the error is recorded in ``stats.failure`` and raised
    #: from the loop) or "skip" (recorded, counted in ``stats.skipped``, the node goes on).
    #: The constructor's ``on_error`` and the configuration (``node.on_error``,
    #: ``[node.accounts.NAME] on_error``) override it.
    ON_ERROR: ClassVar[OnError] = "stop"
    #: Sender accounts allowed to send this node admin commands; None: any (seqbus.admin).
    ADMIN_SENDERS: ClassVar[frozenset[str] | None] = None
    #: The admin commands the class registered with ``@admin_command`` (set per class).
    _seqbus_admin_commands_: ClassVar[dict[str, AdminCommandSpec]] = {}

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "handle_batch" in cls.__dict__:
            raise TypeError(
                f"{cls.__qualname__} overrides handle_batch, which is how batches are fed to a "
                "node (a live node is fed by its client without it): to see every batch, "
                "override on_batch(batch) instead"
            )
        _check_handlers(cls)
        cls._seqbus_admin_commands_ = collect_admin_commands(cls)
        # The class's handlers become Handler descriptors: the generated dispatch then calls
        # them without a method lookup per message, and still sees one set on an instance.
        names = {
            name
            for base in cls.__mro__
            for name in base.__dict__.get("_seqbus_handlers_", {}).values()
        }
        for name in names:
            func = cls.__dict__.get(name)
            if type(func) is types.FunctionType:
                setattr(cls, name, Handler(func, name))

    @classmethod
    def admin_commands(cls) -> dict[str, AdminCommandSpec]:
        """The admin commands this class registered (``help``, built in, is not listed)."""
        return dict(cls._seqbus_admin_commands_)

    def __init__(self, *, on_error: OnError | None = None, skip: Iterable[int] = ()) -> None:
        """``on_error``: overrides :attr:`ON_ERROR`; ``skip``: sequences of messages not to
        hand to handlers (counted in ``stats.skipped``): how a node is started past a message
        that stopped it. Every instance of the account, and every replay, must be given the
        same ones: the configuration (``[node.accounts.NAME] skip``) is the place for them."""
        self.on_error: OnError = "stop"
        self._skips: list[int] = []
        self._skip_at = 0
        self.set_error_policy(on_error if on_error is not None else type(self).ON_ERROR, skip)
        self.account = ""
        self.instance = 0
        self.stats = NodeStats()
        self._account_key = b""
        self._client: Client | None = None
        #: The client's ``poll_walk`` (``seqbus._core.NodeClient``'s poll, walk and flush in
        #: one call) when it has one.
        self._poll_walk: Callable[..., PollWalked | None] | None = None
        #: :meth:`on_batch` when the class overrides it (no call per batch otherwise).
        self._on_batch = None if type(self).on_batch is Node.on_batch else self.on_batch
        self._flush: Callable[[], None] = _no_flush
        self._clock = _core.Clock()
        self._rewinding = False
        #: Deterministic timers by id: the clock holds their deadlines and says when.
        self._timers: dict[int, Timer] = {}
        self._local_timers: list[Timer] = []
        #: Told when a local timer is set (``seqbus.aio`` schedules it on its event loop).
        self._on_local_timer: Callable[[], None] | None = None
        self._order = itertools.count()
        self._stopping = False
        self._outbox: deque[Body] = deque()
        self._dispatchers = self._collect_dispatchers()

    def set_error_policy(self, on_error: OnError | None = None, skip: Iterable[int] = ()) -> None:
        """Set what a raising handler does (None: unchanged) and add sequences to skip; the
        runner applies the configuration's ``node.on_error`` and ``[node.accounts.NAME]``
        with it before the node opens."""
        if on_error is not None:
            if on_error not in _ON_ERROR:
                raise SeqbusError(f"on_error must be 'stop' or 'skip', not {on_error!r}")
            self.on_error = on_error
        added = set(self._skips)
        for seq in skip:
            if isinstance(seq, bool) or not isinstance(seq, int) or seq < 1:
                raise SeqbusError(f"skip: sequences are integers from 1, not {seq!r}")
            added.add(seq)
        self._skips = sorted(added)
        self._skip_at = bisect.bisect_right(self._skips, self._clock_sequence())

    def _clock_sequence(self) -> int:
        clock = getattr(self, "_clock", None)
        return clock.sequence if clock is not None else 0

    @property
    def skip_sequences(self) -> tuple[int, ...]:
        """The sequences this node is told to skip."""
        return tuple(self._skips)

    def status(self) -> dict[str, Any]:
        """The node's status as plain data (JSON-ready): who it is, where it stands in the
        stream, its error policy, its counters, and the handler error that stopped it."""
        return {
            "account": self.account,
            "instance": self.instance,
            "sequence": self._clock.sequence,
            "rewinding": self._rewinding,
            "stopped": self._stopping,
            "on_error": self.on_error,
            "skip": list(self._skips),
            **asdict(self.stats),
        }

    # -- the application's hooks -------------------------------------------------------------

    def on_opened(self) -> None:
        """Called once before the first message, with blank state."""

    def on_rewound(self) -> None:
        """Called when a rewinding node has caught up with the live stream."""

    def on_batch(self, batch: bytes) -> None:
        """Called with each batch the node was handed (``seqbus.batch`` reads its records),
        after its records went to the handlers: for a node that audits or records the stream
        as delivered. Not called unless a class overrides it."""

    def on_closed(self) -> None:
        """Called once when the loop running the node stops cleanly (``stop()``, a stop event,
        SIGINT or SIGTERM), after the last batch; not after an error."""

    # -- what handlers may call --------------------------------------------------------------

    def sequencer_time(self) -> int:
        """The sequencer's timestamp (ns since the epoch) of the message being handled."""
        return self._clock.time_ns

    def sequence(self) -> int:
        """The sequence number of the message being handled (0 before the first)."""
        return self._clock.sequence

    @property
    def is_rewinding(self) -> bool:
        """True while the node replays history, until :meth:`on_rewound`."""
        return self._rewinding

    def send(self, message: Sendable) -> int:
        """Send a command to the sequencer; returns this node's command sequence for it.

        ``message`` is a generated message object (:class:`Message`) or an already-encoded
        body (bytes-like); anything else (a ``str``, a view) is a ``TypeError``. Raises
        :class:`BackPressureError` when the window of in-flight commands is full (or commands
        queued by :meth:`post` are still waiting, which keeps the node's commands in order).
        """
        body = message if type(message) is bytes else _body_of(message)
        client = self._client
        if client is None:
            raise SeqbusError("the node is not connected to a bus; start it with seqbus.run")
        if self._outbox and not self.flush_outbox():
            raise BackPressureError(f"{len(self._outbox)} posted commands wait for the window")
        seq = client.send(body)
        self.stats.sent += 1
        return seq

    def post(self, message: Sendable) -> None:
        """Send a command, or queue it when the window is full; queued commands go out in
        order as the window drains (after each batch).

        For deterministic state machines: what a node sends and in which order depends only
        on the stream, never on how fast the sequencer acknowledges, so hot-hot instances and
        replays produce the same commands, which the sequencer deduplicates.
        """
        body = _body_of(message, "post")
        self._connected()
        self._outbox.append(body)
        self.flush_outbox()

    def flush_outbox(self) -> bool:
        """Send what :meth:`post` queued, as far as the window allows; True when all went."""
        client = self._connected()
        outbox = self._outbox
        while outbox:
            try:
                client.send(outbox[0])
            except BackPressureError:
                return False
            outbox.popleft()
            self.stats.sent += 1
        return True

    @property
    def posted(self) -> int:
        """Commands :meth:`post` queued that wait for the window."""
        return len(self._outbox)

    def _connected(self) -> Client:
        if self._client is None:
            raise SeqbusError("the node is not connected to a bus; start it with seqbus.run")
        return self._client

    def stop(self) -> None:
        """Ask the loop running this node to return after the current batch."""
        self._stopping = True

    @property
    def stopped(self) -> bool:
        """True once :meth:`stop` was called."""
        return self._stopping

    def set_timer(self, at_ns: int, callback: Callable[[], None]) -> Timer:
        """Fire ``callback`` at the first point of the stream whose time is at or after ``at_ns``.

        Deterministic: a replay fires it between the same two messages. During the callback
        :meth:`sequencer_time` is the time of the message that triggered it.
        """
        at = min(max(at_ns, 0), _LAST_NS)
        timer = Timer(at, self._clock.set_timer(at), callback, on_cancel=self._cancel_timer)
        self._timers[timer.order] = timer
        return timer

    def _cancel_timer(self, timer_id: int) -> None:
        self._clock.cancel(timer_id)
        self._timers.pop(timer_id, None)

    def set_timer_after(self, delay_ns: int, callback: Callable[[], None]) -> Timer:
        """:meth:`set_timer` at ``sequencer_time() + delay_ns``."""
        return self.set_timer(self._clock.time_ns + delay_ns, callback)

    def set_local_timer(self, delay_s: float, callback: Callable[[], None]) -> Timer:
        """Fire ``callback`` after ``delay_s`` seconds of this machine's clock.

        NOT deterministic: a replay or a hot backup will not fire it at the same point of the
        stream. Use it for housekeeping that does not change the node's state.
        """
        timer = Timer(time.monotonic() + delay_s, next(self._order), callback, False)
        heapq.heappush(self._local_timers, timer)
        if self._on_local_timer is not None:
            self._on_local_timer()
        return timer

    # -- the loop (driven by seqbus.run, seqbus.testing or a custom driver) -------------------

    @classmethod
    def topics(cls) -> list[Topic]:
        """The message types this node handles: every overridden ``on_*`` plus ``TOPICS``."""
        result: set[Topic] = set(cls.TOPICS)
        for base in cls.__mro__:
            if "SCHEMA_ID" not in base.__dict__ or "_seqbus_handlers_" not in base.__dict__:
                continue
            schema_id: int = base.__dict__["SCHEMA_ID"]
            handlers: dict[int, str] = base.__dict__["_seqbus_handlers_"]
            for template_id, name in handlers.items():
                if getattr(cls, name, None) is not getattr(base, name, None):
                    result.add((schema_id, template_id))
        return sorted(result)

    @classmethod
    def _collect_dispatchers(cls) -> dict[int, Dispatch | object]:
        """The dispatch of each schema the node's bases were generated for, as ``walk_batch``
        takes them: the generated C function (``_seqbus_dispatch_c_``, a capsule: no argument
        tuple per message) where the module has one, else the Python function."""
        found: dict[int, Dispatch | object] = {}
        python: dict[int, Dispatch] = {}
        for base in reversed(cls.__mro__):
            if "_seqbus_dispatch_" in base.__dict__ and "SCHEMA_ID" in base.__dict__:
                schema_id: int = base.__dict__["SCHEMA_ID"]
                python[schema_id] = getattr(base, "_seqbus_dispatch_")
                found[schema_id] = base.__dict__.get("_seqbus_dispatch_c_", python[schema_id])
        # every node runs the admin commands of its account (schema bus, seqbus.admin)
        found[_core.BUS_SCHEMA_ID] = bus_dispatch(python.get(_core.BUS_SCHEMA_ID))
        return found

    def _run_admin_command(self, buf: Buffer, offset: int, length: int) -> None:
        run_admin_command(self, buf, offset, length)

    def attach(
        self, client: Client, account: str, instance: int, *, rewinding: bool = False
    ) -> None:
        """Bind the node to a transport client and call :meth:`on_opened`."""
        self._account_key = account_key(account)
        self.account = account
        self.instance = instance
        self._client = client
        self._poll_walk = getattr(client, "poll_walk", None)
        self._flush = getattr(client, "flush", _no_flush)
        self._rewinding = rewinding
        self.on_opened()

    def poll_once(self, timeout: float, max_records: int = 4096) -> int:
        """Poll the client once (waiting at most ``timeout`` s) and handle what came."""
        client = self._client
        if client is None:
            raise SeqbusError("the node is not attached to a client")
        if self._local_timers:
            timeout = max(0.0, min(timeout, self._local_timers[0].at - time.monotonic()))
        poll_walk = self._poll_walk
        if poll_walk is not None:
            skips = self._skips
            got = poll_walk(
                max_records,
                timeout,
                self,
                self._dispatchers,
                self._account_key,
                self._clock,
                skips[self._skip_at] if skips and self._skip_at < len(skips) else _NO_SKIP,
            )
            handled = 0
            if got is not None:
                handled = self._walked(*got)
                if got[2] != _STOP_END:
                    # the walk stopped for this side (a time record, timers due, ...), which
                    # walked on from there: what those handlers sent goes now too
                    self._flush()
                if self._on_batch is not None:
                    self._on_batch(got[0])
        else:
            batch = client.poll(max_records, timeout)
            handled = self.handle_batch(batch) if batch else 0
        if self._outbox:
            self.flush_outbox()
        if self._local_timers:
            self._fire_local_timers()
        return handled

    def handle_batch(self, batch: Buffer) -> int:
        """Handle every record of one batch; returns the number of records.

        The batch is walked in Rust (``_core.walk_batch``, with the node's clock), which calls
        the generated dispatch for each message without returning here; what needs this side
        (timers due, rewound, time advanced, an unknown message) comes back one by one.
        A live node (``seqbus._core.NodeClient``) polls and walks in one call instead; either
        way the records go through the same walk and :meth:`on_batch` sees the batch after.
        This is how a batch is fed to a node (replays, tests, asyncio), not a hook: a class
        may not override it.
        """
        data = batch if type(batch) is bytes else bytes(batch)
        skips = self._skips
        offset, stop, records, error = _walk(
            data,
            0,
            self,
            self._dispatchers,
            self._account_key,
            self._clock,
            skips[self._skip_at] if skips and self._skip_at < len(skips) else _NO_SKIP,
        )
        handled = self._walked(data, offset, stop, records, error)
        if self._on_batch is not None:
            self._on_batch(data)
        return handled

    def _walked(self, data: bytes, offset: int, stop: int, records: int, error: object) -> int:
        """The rest of :meth:`handle_batch` once the walk from the batch's start returned."""
        stats = self.stats
        stats.messages += records
        if stop != _STOP_END:  # a record for this side: the rest of the batch from it
            records += self._handle_from(data, offset, stop, error)
        stats.batches += 1
        if self._outbox:
            self.flush_outbox()
        return records

    def _handle_from(self, data: bytes, offset: int, stop: int, error: object) -> int:
        """The rest of a batch whose walk stopped at ``offset`` for ``stop`` (not the end):
        handle that record here, walk on, and so on to the end; returns the records handled
        (the messages it counts in ``stats.messages``)."""
        end = len(data)
        records = 0
        skips = self._skips
        while True:
            if stop == _STOP_END:
                return records
            if stop == _STOP_TIMER:
                self._fire_timers()
            else:
                record = record_at(data, offset)
                length, kind, seq = record.length, record.record_type, record.sequence
                if stop == _STOP_SKIP:
                    # the clock stands at message #seq, at or past the next sequence to skip
                    self._skip_at = bisect.bisect_left(skips, seq)
                    if self._skip_at == len(skips) or skips[self._skip_at] != seq:
                        length = 0  # not one to skip: walk on from it
                    else:
                        self._skip_at += 1
                        self._skipped(seq)
                elif stop == _STOP_ERROR:
                    assert isinstance(error, BaseException)
                    self._handler_raised(error, data, offset, seq)
                if length:
                    records += 1
                    offset += length
                    if stop in (_STOP_SKIP, _STOP_ERROR):
                        self.stats.messages += 1
                    elif stop == _STOP_UNKNOWN:
                        schema_id, template_id = message_type(data, record)
                        self.stats.messages += 1
                        self._unknown(schema_id, template_id, seq)
                    elif kind == RECORD_TIME:
                        pass  # the clock stands at it; timers due before it have fired
                    elif kind == RECORD_REWOUND:
                        self._rewinding = False
                        self.on_rewound()
                    else:
                        raise DecodeError(
                            "Record", "record_type", offset - length + 4, f"unknown type {kind}"
                        )
            if offset >= end:
                return records
            skip_from = skips[self._skip_at] if skips and self._skip_at < len(skips) else _NO_SKIP
            offset, stop, dispatched, error = _walk(
                data, offset, self, self._dispatchers, self._account_key, self._clock, skip_from
            )
            records += dispatched
            self.stats.messages += dispatched

    # -- internals -------------------------------------------------------------------------

    def _skipped(self, sequence: int) -> None:
        self.stats.skipped += 1
        self.stats.skipped_sequences.append(sequence)

    def _message_type(self, schema_id: int, template_id: int) -> tuple[str, str]:
        """(message class name, handler name) of a message type this node dispatches."""
        handler = name = f"schema {schema_id} template {template_id}"
        for base in type(self).__mro__:
            if base.__dict__.get("SCHEMA_ID") == schema_id and "_seqbus_handlers_" in base.__dict__:
                handler = base.__dict__["_seqbus_handlers_"].get(template_id, handler)
                dispatch = base.__dict__.get("_seqbus_dispatch_")
                module = sys.modules.get(getattr(dispatch, "__module__", None) or "")
                cls = getattr(module, "MESSAGES", {}).get(template_id)
                if cls is not None:
                    name = cls.__name__
                break
        return name, handler

    def _handler_raised(self, error: BaseException, data: bytes, offset: int, seq: int) -> None:
        """The dispatch of the message record at ``offset`` raised ``error``: record it, then
        skip the message or stop (raise it), as the policy says."""
        schema_id, template_id = message_type(data, record_at(data, offset))
        type_name, handler = self._message_type(schema_id, template_id)
        self._failed(error, seq, type_name, handler, schema_id, template_id)
        self._skipped(seq)

    def _failed(
        self,
        error: BaseException,
        seq: int,
        message_type: str,
        handler: str,
        schema_id: int = 0,
        template_id: int = 0,
    ) -> None:
        """Record a handler error; under "stop" the node stops and ``error`` is raised (with a
        note naming the message), under "skip" it returns (the caller counts the skip)."""
        if isinstance(error, (KeyboardInterrupt, SystemExit)):
            raise error
        failure = HandlerFailure(
            sequence=seq,
            message_type=message_type,
            handler=handler,
            error=f"{type(error).__name__}: {error}",
            traceback="".join(traceback.format_exception(error)),
            action="stopped" if self.on_error == "stop" else "skipped",
            schema_id=schema_id,
            template_id=template_id,
        )
        self.stats.last_error = failure
        who = f"{self.account}/{self.instance}"
        if self.on_error == "skip":
            log.warning("node %s: %s", who, failure.describe())
            return
        self.stats.failure = failure
        self._stopping = True
        # marked, so that `seqbus node`, which prints the failure itself, leaves this one out
        log.error(
            "node %s: %s\n%s", who, failure.describe(), failure.traceback,
            extra={"seqbus_failure": failure},
        )
        error.add_note(f"seqbus: node {who}: {failure.describe()} (node.stats.failure)")
        raise error

    def _unknown(self, schema_id: int, template_id: int, sequence: int) -> None:
        self.stats.unknown += 1
        if self.ON_UNKNOWN == "raise":
            raise UnknownMessageError(schema_id, template_id, sequence)

    def _fire_timers(self) -> None:
        """Runs the callbacks of every timer the clock says is due, earliest first (one set
        by a callback for a time already reached fires in the same turn)."""
        timers = self._timers
        pop_due = self._clock.pop_due
        while (due := pop_due()) is not None:
            timer = timers.pop(due[0], None)
            if timer is not None and not timer.cancelled:
                self.stats.timers_fired += 1
                try:
                    timer.callback()
                except Exception as exc:
                    name = getattr(timer.callback, "__qualname__", repr(timer.callback))
                    self._failed(exc, self._clock.sequence, "timer", name)
                    self.stats.skipped += 1

    def _fire_local_timers(self) -> None:
        timers = self._local_timers
        now = time.monotonic()
        while timers and timers[0].at <= now:
            timer = heapq.heappop(timers)
            if not timer.cancelled:
                timer.callback()


# a Rust thread still running (a service, a node's client thread) when the interpreter exits
# must not log into it: the core's records go to Python `logging` until then
atexit.register(_core.log_to_python, False)


def handled_topics(nodes: Iterable[type[Node]]) -> list[Topic]:
    """The union of the topics of several node classes."""
    result: set[Topic] = set()
    for cls in nodes:
        result.update(cls.topics())
    return sorted(result)
