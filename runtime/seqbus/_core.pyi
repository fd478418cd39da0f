"""Type stubs of ``seqbus._core``, the Rust extension (rust/crates/py)."""

from collections.abc import Mapping, Sequence
from typing import Literal, final

__all__ = [
    "__version__",
    "log_to_python",
    "Clock",
    "NodeClient",
    "LoopClient",
    "Sequencer",
    "Replayer",
    "Dispatcher",
    "Bridge",
    "SimBus",
    "Delivery",
    "check_config",
    "status_endpoints",
    "error_policy",
    "verify_journal",
    "repair_journal",
    "walk_batch",
    "TIME_GRID_NS",
    "BUS_SCHEMA_ID",
    "ADMIN_COMMAND_TEMPLATE_ID",
    "ADMIN_REPLY_TEMPLATE_ID",
    "RECORD_MESSAGE",
    "RECORD_CAUGHT_UP",
    "RECORD_TIME",
    "RECORD_HEADER_LEN",
    "STOP_END",
    "STOP_RECORD",
    "STOP_TIMER",
    "STOP_UNKNOWN",
    "STOP_SKIP",
    "STOP_ERROR",
    "ArchiveWriter",
    "JournalArchiver",
    "ArchiveReader",
    "ArchiveVerifier",
    "archive_segment_info",
    "archive_bus_ir",
]

__version__: str
#: Stream-time slot of "time advanced" records (a filtered message entering a new slot).
TIME_GRID_NS: int
#: The batch layout (seqbus_core::delivery::batch; docs/architecture.md): record types and the
#: length of a record header (length, type, reserved, sequence, envelope).
RECORD_MESSAGE: int
RECORD_CAUGHT_UP: int
RECORD_TIME: int
RECORD_HEADER_LEN: int

_Body = bytes | bytearray | memoryview

@final
class NodeClient:
    """A node's connection to the bus: sockets, gap fill, rewind and delivery (topics, admin
    routing, reassembly, time records) in Rust."""

    def __new__(
        cls,
        config: str,
        account: str,
        instance: int = 1,
        *,
        start: Literal["live", "rewind"] | int | None = None,
        topics: Sequence[tuple[int, int]] | None = None,
        window: int | None = None,
        listen: str | None = None,
    ) -> NodeClient: ...
    def poll(self, max_records: int, timeout: float) -> bytes:
        """Wait at most ``timeout`` s (GIL released) and return one batch; b"" when none."""
    def poll_walk(
        self,
        max_records: int,
        timeout: float,
        node: object,
        dispatchers: Mapping[int, object],
        account: bytes,
        clock: Clock,
        skip_from: int = ...,
    ) -> tuple[bytes, int, int, int, BaseException | None] | None:
        """``poll``, the batch walked as ``walk_batch`` does, then what the handlers sent
        flushed: None when nothing came, else ``(batch, offset, stop, dispatched, error)``."""
    def send(self, body: _Body) -> int:
        """Queue a command; its command sequence. BackPressureError when the window is full."""
    def is_rewinding(self) -> bool: ...
    def is_ready(self) -> bool:
        """True once the node may send (it knows its next command sequence)."""
    def flush(self) -> None: ...
    def stats(self) -> dict[str, int]:
        """The node's counters (``NodeStats`` of Rust, and ``downstream_forged``: datagrams
        dropped for a missing or wrong MAC of ``downstream.key``)."""
    def close(self) -> None: ...

@final
class LoopClient:
    """A node's connection to the bus for an event loop (``seqbus.aio``): the client polls on
    a Rust thread of its own and ``fileno()`` (an eventfd) is readable while ``take()`` has
    something for the loop."""

    def __new__(
        cls,
        config: str,
        account: str,
        instance: int = 1,
        *,
        start: Literal["live", "rewind"] | int | None = None,
        topics: Sequence[tuple[int, int]] | None = None,
        window: int | None = None,
        listen: str | None = None,
    ) -> LoopClient: ...
    def fileno(self) -> int:
        """The eventfd to watch (``loop.add_reader``)."""
    def take(self) -> bytes:
        """The next batch, b"" when none; raises the error the client stopped with."""
    def poll(self, max_records: int, timeout: float) -> bytes:
        """Wait at most ``timeout`` s (GIL released) for a batch; b"" when none. Batches hold
        at most 4096 records whatever ``max_records`` says."""
    def send(self, body: _Body) -> int:
        """Queue a command (the client's thread sends it at once); its command sequence.
        BackPressureError when the window is full."""
    def queued(self) -> int:
        """Batches waiting to be taken."""
    def is_ready(self) -> bool: ...
    def is_rewinding(self) -> bool: ...
    def stats(self) -> dict[str, int]:
        """``NodeClient.stats()`` plus ``loop_signals`` and ``loop_batches``."""
    def close(self) -> None: ...

@final
class Sequencer:
    """A sequencer running on its own Rust thread until ``stop()``; ``id`` names which member
    of ``[cluster]`` it is (docs/ha.md)."""

    def __new__(cls, config: str, id: int | None = None) -> Sequencer: ...
    def stop(self) -> None: ...
    def join(self, timeout: float) -> bool:
        """True once stopped; re-raises the error the sequencer stopped with."""

@final
class Replayer:
    """A replayer running on its own Rust thread until ``stop()``."""

    def __new__(cls, config: str, id: int | None = None) -> Replayer: ...
    def stop(self) -> None: ...
    def join(self, timeout: float) -> bool: ...

@final
class Delivery:
    """The core's delivery model (what a node of ``account`` and ``topics`` is handed) over the
    records of a session archive: the offline replay."""

    def __new__(cls, account: str, topics: Sequence[tuple[int, int]] | None) -> Delivery: ...
    def archive(
        self, path: str, lo: int, hi: int
    ) -> tuple[bytes, list[tuple[str, int, int, str]]]:
        """The batch the records ``[lo, hi]`` of the archive at ``path`` make, read in order
        (fragments included), and the archive's problems met: (file, offset, sequence,
        message). OSError/ValueError when the archive cannot be opened."""
    def caught_up(self, sequence: int) -> bytes:
        """The caught-up record after ``sequence``."""
    def stats(self) -> dict[str, int]: ...

@final
class Dispatcher:
    """This host's dispatcher (reads the downstream, writes the shared-memory ring local nodes
    read) running on its own Rust thread until ``stop()``."""

    def __new__(cls, config: str, id: int | None = None) -> Dispatcher: ...
    def stop(self) -> None: ...
    def join(self, timeout: float) -> bool: ...

@final
class Bridge:
    """This site's end of a bridge to a bus at another site (``[bridge]``, docs/sites.md)
    running on its own Rust thread until ``stop()`` or the end of the session."""

    def __new__(cls, config: str, id: int | None = None) -> Bridge: ...
    def stop(self) -> None: ...
    def join(self, timeout: float) -> bool: ...

def log_to_python(on: bool) -> None:
    """Whether the core's log records (the roles' and node clients' events, targets
    ``seqbus::...``) go to Python ``logging`` as the ``seqbus.*`` loggers (on from the import;
    ``seqbus.node`` turns it off when the interpreter exits)."""

def check_config(config: str) -> None:
    """Parse and validate a configuration file; ConfigError naming the key when invalid."""

def status_endpoints(config: str) -> list[tuple[int, str | None, str | None]]:
    """``(member id, "host:port" or None, token or None)`` of every sequencer of the bus."""

def verify_journal(dir: str) -> dict[str, object]:
    """Check every record of a journal: ``session``, ``first_sequence``, ``next_sequence``,
    ``messages``, ``segments``, ``torn_tail`` (file, offset) or None. JournalError naming the
    file and offset when a record is damaged."""

def repair_journal(dir: str, peer: str) -> dict[str, object]:
    """Rewrite the damaged segments of ``dir`` from the peer's journal ``peer``:
    ``rewritten`` [(file, offset)], ``kept`` [files], ``messages``."""

@final
class Clock:
    """A node's deterministic clock and timers (seqbus_core::Clock): the sequence and
    sequencer time of the record being handled, and the deadlines of its timers; it says when
    they are due, the node runs the callbacks."""

    def __new__(cls) -> Clock: ...
    @property
    def sequence(self) -> int: ...
    @property
    def time_ns(self) -> int: ...
    def enter(self, sequence: int, time_ns: int) -> bool:
        """Move to a record; True when timers are due before it is handled."""
    def set_timer(self, at_ns: int) -> int:
        """A timer at ``at_ns`` of stream time; its id."""
    def cancel(self, id: int) -> bool: ...
    def pop_due(self) -> tuple[int, int] | None:
        """``(id, deadline)`` of the next timer due now, earliest first; None when none is."""
    @property
    def deadline_ns(self) -> int | None:
        """Earliest pending deadline."""
    @property
    def pending(self) -> int: ...

STOP_END: int
STOP_RECORD: int
STOP_TIMER: int
STOP_UNKNOWN: int
STOP_SKIP: int
STOP_ERROR: int

def walk_batch(
    batch: bytes,
    offset: int,
    node: object,
    dispatchers: Mapping[int, object],
    account: bytes,
    clock: Clock,
    skip_from: int = ...,
) -> tuple[int, int, int, BaseException | None]:
    """Dispatch the message records of ``batch`` from ``offset`` without returning to Python,
    moving ``clock`` record by record; ``(offset, stop, dispatched, error)`` where it stopped:
    timers due (``STOP_TIMER``), a record Python must handle, an unknown message, a message of
    sequence ``skip_from`` or later (``STOP_SKIP``), a dispatch that raised ``error``
    (``STOP_ERROR``)."""

def error_policy(config: str, account: str) -> tuple[str | None, list[int]]:
    """What ``config`` says the nodes of ``account`` do when a handler raises: ``on_error``
    ("stop", "skip" or None when not configured) and the sequences they skip."""

@final
class SimBus:
    """The simulated bus of seqbus-sim: a sequencer (or a cluster of them), replayers and nodes
    over a seeded lossy network with a virtual clock."""

    def __new__(
        cls,
        *,
        seed: int = 1,
        start_ns: int = 1_700_000_000_000_000_000,
        min_delay_ns: int = 20_000,
        max_delay_ns: int = 60_000,
        upstream_loss_pct: float = 0.0,
        loss_pct: float = 0.0,
        dup_pct: float = 0.0,
        clock_tick_ns: int = 10_000_000,
        heartbeat_ns: int = 1_000_000,
        window: int = 64,
        sequencers: int = 1,
        journal: str | None = None,
        replay_packet: int = 60_000,
    ) -> SimBus: ...
    @property
    def now_ns(self) -> int: ...
    @property
    def next_seq(self) -> int: ...
    @property
    def leader(self) -> int | None: ...
    def add_node(
        self,
        account: str,
        instance: int = 1,
        *,
        start: Literal["live", "rewind"] | int | None = None,
        topics: Sequence[tuple[int, int]] | None = None,
        window: int | None = None,
    ) -> int: ...
    def remove_node(self, id: int) -> None: ...
    def set_downstream_loss(self, id: int, pct: float) -> None: ...
    def drop_downstream(self, id: int, count: int) -> None: ...
    def kill_sequencer(self, id: int) -> None: ...
    def restart_sequencer(self, id: int) -> None: ...
    def process(self) -> None: ...
    def poll(self, id: int, max_records: int = 4096) -> bytes: ...
    def transmit(self) -> None: ...
    def advance(self, limit_ns: int) -> int: ...
    def send_command(self, id: int, body: bytes) -> int: ...
    def is_rewinding(self, id: int) -> bool: ...
    def is_ready(self, id: int) -> bool: ...
    def node_stats(self, id: int) -> dict[str, int]: ...
    def net_stats(self) -> dict[str, int]: ...

#: Schema id of the bus's own messages (schemas/bus.idl).
BUS_SCHEMA_ID: int
#: Template ids of bus.AdminCommand and bus.AdminReply: delivery hands a node the
#: AdminCommands of its own account whatever its topics.
ADMIN_COMMAND_TEMPLATE_ID: int
ADMIN_REPLY_TEMPLATE_ID: int

# -- session archives (rust/crates/archive/src/python.rs; seqbus.archive wraps them) ------------

#: (file, byte offset, sequence, what is wrong)
_RawProblem = tuple[str, int, int, str]
#: An Arrow column as exported: (length, null count, validity bitmap or None, buffers, children)
_ColumnTree = tuple[int, int, bytes | None, list[bytes], list[object]]
_Bytes = bytes | bytearray | memoryview

@final
class ArchiveWriter:
    """Appends sequenced messages to a new archive (seqbus.archive.ArchiveWriter)."""

    def __new__(
        cls, dir: str, session: str, segment_bytes: int, schemas: list[tuple[int, str, str]]
    ) -> ArchiveWriter: ...
    @property
    def next_sequence(self) -> int | None: ...
    def append(self, sequence: int, message: _Bytes) -> None: ...
    def append_many(self, first_sequence: int, buf: _Bytes) -> int: ...
    def flush(self) -> None: ...
    def seal(self) -> str:
        """Seals the archive; returns its manifest as JSON."""

@final
class JournalArchiver:
    """Archives a sequencer's journal as it grows (seqbus.archive.JournalArchiver)."""

    def __new__(
        cls,
        journal_dir: str,
        out: str,
        segment_bytes: int,
        schemas: list[tuple[int, str, str]],
        start: int | None = None,
    ) -> JournalArchiver: ...
    def poll(self, max: int) -> int: ...
    def position(self) -> tuple[int, int | None]: ...
    def torn_tail(self) -> tuple[str, int] | None: ...
    def seal(self) -> str: ...

@final
class ArchiveReader:
    """Reads an archive over inclusive sequence ranges, across segments."""

    def __new__(cls, dir: str) -> ArchiveReader: ...
    def schemas(self) -> list[tuple[int, str, str, bool]]: ...
    def type_names(self) -> dict[tuple[int, int], str]: ...
    def segments(self) -> list[tuple[int, str, str, int, int, int, int]]: ...
    def bounds(self, seq_lo: int, seq_hi: int, ts_lo: int, ts_hi: int) -> tuple[int, int] | None: ...
    def plan(
        self, seq_lo: int, seq_hi: int, ts_lo: int, ts_hi: int, max_rows: int
    ) -> list[tuple[int, int]]: ...
    def envelopes(self, lo: int, hi: int) -> tuple[int, dict[str, object], list[_RawProblem]]: ...
    def raw(self, lo: int, hi: int) -> tuple[int, dict[str, object], list[_RawProblem]]: ...
    def typed(
        self, lo: int, hi: int, schema_id: int, message: str
    ) -> tuple[int, list[_ColumnTree], list[_RawProblem]]: ...
    def stream(self, lo: int, hi: int) -> tuple[list[tuple[int, int, bytes]], list[_RawProblem]]: ...

@final
class ArchiveVerifier:
    """Checks an archive's segments one by one, then what lies across them."""

    def __new__(cls) -> ArchiveVerifier: ...
    def segment(
        self, seg: str, idx: str, expect_first: int | None = None
    ) -> tuple[int, int, int, int, list[_RawProblem]]: ...
    def finish(self, sealed: bool) -> list[_RawProblem]: ...
    @property
    def fragmented_messages(self) -> int: ...
    @property
    def abandoned_messages(self) -> int: ...
    def take_warnings(self) -> list[_RawProblem]: ...

def archive_segment_info(seg: str, idx: str) -> tuple[int, int]:
    """(first sequence, record count) of a segment and its index."""

def archive_bus_ir() -> str:
    """The bus schema's IR (JSON) built into the archive readers."""
