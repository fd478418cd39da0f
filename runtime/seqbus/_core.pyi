"""Type stubs of ``seqbus._core``, the Rust extension (rust/crates/py)."""

from collections.abc import Mapping, Sequence
from typing import Literal

__version__: str

_Body = bytes | bytearray | memoryview

class NodeClient:
    """A node's connection to the bus: sockets, gap fill, rewind and topic filter in Rust."""

    def __init__(
        self,
        config: str,
        account: str,
        instance: int = 1,
        *,
        start: Literal["live", "rewind"] | int | None = None,
        topics: Sequence[tuple[int, int]] | None = None,
        window: int | None = None,
    ) -> None: ...
    def poll(self, max_records: int, timeout: float) -> bytes:
        """Wait at most ``timeout`` s (GIL released) and return one batch; b"" when none."""
    def send(self, body: _Body) -> int:
        """Queue a command; its command sequence. BackPressureError when the window is full."""
    def set_timer_deadline(self, deadline_ns: int | None) -> None: ...
    def is_rewinding(self) -> bool: ...
    def is_ready(self) -> bool:
        """True once the node may send (it knows its next command sequence)."""
    def flush(self) -> None: ...
    def stats(self) -> dict[str, int]: ...
    def close(self) -> None: ...

class Sequencer:
    """A sequencer running on its own Rust thread until ``stop()``."""

    def __init__(self, config: str) -> None: ...
    def stop(self) -> None: ...
    def join(self, timeout: float) -> bool:
        """True once stopped; re-raises the error the sequencer stopped with."""

class Replayer:
    """A replayer running on its own Rust thread until ``stop()``."""

    def __init__(self, config: str) -> None: ...
    def stop(self) -> None: ...
    def join(self, timeout: float) -> bool: ...

def check_config(config: str) -> None:
    """Parse and validate a configuration file; ConfigError naming the key when invalid."""

class Cursor:
    """The sequence and sequencer time of the message a node is handling."""

    @property
    def sequence(self) -> int: ...
    @property
    def time_ns(self) -> int: ...
    def set(self, sequence: int, time_ns: int) -> None: ...

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
    deadline_ns: int | None,
    cursor: Cursor,
) -> tuple[int, int, int]:
    """Dispatch the message records of ``batch`` from ``offset`` without returning to Python;
    ``(offset, stop, dispatched)`` where it stopped at a record Python must handle."""
