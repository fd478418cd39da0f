"""Bus configurations for the end-to-end tests (keys: docs/configuration.md)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import free_udp_port, udp_bound


@dataclass
class Bus:
    path: Path
    upstream: int
    downstream: int
    replayer: int
    group: str = "239.7.7.7"


def wait_udp_bound(port: int, timeout: float) -> bool:
    """True once something has bound ``port``, False after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if udp_bound(port):
            return True
        time.sleep(0.05)
    return False


def write_bus_config(workdir: Path, *, multicast: bool = True, session: str = "E2E0000001") -> Bus:
    upstream, downstream, replayer = free_udp_port(), free_udp_port(), free_udp_port()
    if multicast:
        down = f'transport = "udp-multicast"\ngroup = "239.7.7.7:{downstream}"\ninterface = "127.0.0.1"'
    else:
        down = 'transport = "udp-unicast"\nsubscribers = []'
    text = f"""\
[bus]
session = "{session}"

[sequencer]
upstream = "127.0.0.1:{upstream}"
journal_dir = "{workdir / 'journal'}"

[downstream]
{down}

[replayer]
listen = "127.0.0.1:{replayer}"

[node]
replayers = ["127.0.0.1:{replayer}"]
"""
    path = workdir / "bus.toml"
    path.write_text(text)
    return Bus(path, upstream, downstream, replayer)
