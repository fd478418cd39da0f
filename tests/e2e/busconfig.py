"""Bus configurations for the end-to-end tests (keys: docs/configuration.md)."""

from __future__ import annotations

import errno
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from tests.conftest import free_udp_port


@dataclass
class Bus:
    path: Path
    upstream: int
    downstream: int
    replayer: int
    group: str = "239.7.7.7"


def udp_port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError as exc:
            return exc.errno == errno.EADDRINUSE
        return False


def wait_udp_bound(port: int, timeout: float) -> bool:
    """True once something has bound 127.0.0.1:port, False after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if udp_port_in_use(port):
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
