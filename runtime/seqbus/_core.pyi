"""Type stubs of ``seqbus._core``, the Rust extension (rust/crates/py)."""

from collections.abc import Mapping, Sequence
from typing import Literal, final

__version__: str
#: Stream-time slot of "time advanced" records (a filtered message entering a new slot).
TIME_GRID_NS: int

_Body = bytes | bytearray | memoryview

@final
class NodeClient:
    """A node's connection to the bus: sockets, gap fill, rewind and topic filter in Rust."""

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
    def send(self, body: _Body) -> int:
        """Queue a command; its command sequence. BackPressureError when the window is full."""
    def is_rewinding(self) -> bool: ...
    def is_ready(self) -> bool:
        """True once the node may send (it knows its next command sequence)."""
    def flush(self) -> None: ...
    def stats(self) -> dict[str, int]: ...
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
class TopicFilter:
    """The live topic filter, for batches built elsewhere (the offline replay): what a node of
    ``topics`` and ``account`` sees of records as the core delivers them."""

    def __new__(cls, topics: list[tuple[int, int]] | None, account: str) -> TopicFilter: ...
    def apply(self, records: bytes) -> bytes:
        """DecodeError when a record's length is wrong."""

@final
class Dispatcher:
    """This host's dispatcher (reads the downstream, writes the shared-memory ring local nodes
    read) running on its own Rust thread until ``stop()``."""

    def __new__(cls, config: str, id: int | None = None) -> Dispatcher: ...
    def stop(self) -> None: ...
    def join(self, timeout: float) -> bool: ...

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
class Cursor:
    """The sequence and sequencer time of the message a node is handling."""

    def __new__(cls) -> Cursor: ...

    @property
    def sequence(self) -> int: ...
    @property
    def time_ns(self) -> int: ...
    def set(self, sequence: int, time_ns: int) -> None: ...
    @property
    def deadline_ns(self) -> int | None:
        """Earliest deterministic timer; walk_batch stops at the first record reaching it."""
    @deadline_ns.setter
    def deadline_ns(self, value: int | None) -> None: ...

STOP_END: int
STOP_RECORD: int
STOP_TIMER: int
STOP_UNKNOWN: int

def walk_batch(
    batch: bytes,
    offset: int,
    node: object,
    dispatchers: Mapping[int, object],
    account: bytes,
    cursor: Cursor,
) -> tuple[int, int, int]:
    """Dispatch the message records of ``batch`` from ``offset`` without returning to Python;
    ``(offset, stop, dispatched)`` where it stopped at a record Python must handle."""

@final
class SimBus:
    """A sequencer, a replayer and nodes over a simulated network with a virtual clock."""

    def __new__(
        cls,
        *,
        seed: int = 1,
        start_ns: int = 1_700_000_000_000_000_000,
        min_delay_ns: int = 20_000,
        max_delay_ns: int = 60_000,
        upstream_loss_pct: float = 0.0,
        clock_tick_ns: int = 10_000_000,
        heartbeat_ns: int = 1_000_000,
        window: int = 64,
    ) -> SimBus: ...
    @property
    def now_ns(self) -> int: ...
    @property
    def next_seq(self) -> int: ...
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
#: Template ids of bus.AdminCommand and bus.AdminReply: the topic filter hands a node the
#: AdminCommands of its own account whatever its topics.
ADMIN_COMMAND_TEMPLATE_ID: int
ADMIN_REPLY_TEMPLATE_ID: int
