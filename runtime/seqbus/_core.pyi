"""Type stubs of ``seqbus._core``, the Rust extension (rust/crates/py)."""

from collections.abc import Sequence
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
        start: Literal["live", "rewind"] | int = "live",
        topics: Sequence[tuple[int, int]] | None = None,
    ) -> None: ...
    def poll(self, max_records: int, timeout: float) -> bytes:
        """Wait at most ``timeout`` s (GIL released) and return one batch; b"" when none."""
    def send(self, body: _Body) -> int:
        """Queue a command; its command sequence. BackPressureError when the window is full."""
    def set_timer_deadline(self, deadline_ns: int | None) -> None: ...
    def is_rewinding(self) -> bool: ...
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
