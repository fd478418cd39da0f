"""Running the bus's roles on any transport for the transport tests.

The roles come from one small Rust program, `rust/crates/net/examples/transport_bus.rs`
(sequencer, replayer, dispatcher, a node that sends and checks the stream, and everything in
one process for the in-process transport), built once per test session.
"""

from __future__ import annotations

import json
from collections.abc import Callable
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path

from tests.conftest import ROOT, free_tcp_port, free_udp_port, udp_bound as udp_bound

TARGET = ROOT / "rust" / "target"
BINARY = TARGET / "release" / "examples" / "transport_bus"


@dataclass
class Bus:
    """A written configuration: the sequencer's file and one per node (unicast nodes differ)."""

    path: Path
    node_paths: dict[str, Path]
    upstream: int
    tcp: int
    ring: Path
    extra: dict[str, int] = field(default_factory=dict)


USER, PASSWORD = "node", "s3cret"
NODES = ("LISTEN", "SEND0", "SEND1")


def write_config(
    workdir: Path,
    transport: str,
    session: str = "TRANSPORT",
    clock_tick_ms: int = 50,
    pipeline: str = "auto",
) -> Bus:
    """`transport`: udp-multicast, udp-unicast, tcp, shm, memory, or shm-via-tcp /
    shm-via-multicast (nodes read this host's ring, written by a dispatcher). `pipeline`:
    `sequencer.pipeline`."""
    upstream, replayer, tcp = free_udp_port(), free_udp_port(), free_tcp_port()
    ring = workdir / "bus.ring"
    node_listen = {n: free_udp_port() for n in NODES}
    dispatcher_port = free_udp_port()
    down = {
        "udp-multicast": f'transport = "udp-multicast"\ngroup = "239.7.7.8:{free_udp_port()}"',
        "udp-unicast": 'transport = "udp-unicast"\nsubscribers = ['
        + ", ".join(f'"127.0.0.1:{p}"' for p in node_listen.values())
        + "]",
        "tcp": 'transport = "tcp"',
        "shm": 'transport = "shm"',
        "memory": 'transport = "memory"',
        "shm-via-tcp": 'transport = "tcp"',
        "shm-via-multicast": f'transport = "udp-multicast"\ngroup = "239.7.7.9:{free_udp_port()}"',
    }[transport]
    node_transport = 'transport = "shm"\n' if transport.startswith("shm-via") else ""
    base = f"""\
[bus]
session = "{session}"

[sequencer]
upstream = "127.0.0.1:{upstream}"
journal_dir = "{workdir / "journal"}"
clock_tick_ms = {clock_tick_ms}
pipeline = "{pipeline}"

[downstream]
{down}

[replayer]
listen = "127.0.0.1:{replayer}"

[tcp]
listen = "127.0.0.1:{tcp}"
credentials = [{{ username = "{USER}", password = "{PASSWORD}" }}, {{ username = "other", password = "x" }}]
username = "{USER}"
password = "{PASSWORD}"
client_buffer = 8388608

[shm]
path = "{ring}"
capacity = 16777216
dispatcher_listen = "127.0.0.1:{dispatcher_port}"

[memory]
capacity = 16777216

[node]
{node_transport}replayers = ["127.0.0.1:{replayer}"]
"""
    path = workdir / "bus.toml"
    path.write_text(base)
    node_paths = {}
    for n in NODES:
        p = workdir / f"{n}.toml"
        text = base
        if transport == "udp-unicast":
            text = base.replace("[node]\n", f'[node]\nlisten = "127.0.0.1:{node_listen[n]}"\n')
        p.write_text(text)
        node_paths[n] = p
    return Bus(path, node_paths, upstream, tcp, ring)


def tcp_listening(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


def wait_for(check: Callable[[], bool], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return False


def read_reports(workdir: Path) -> dict[str, dict[str, object]]:
    return {n: json.loads((workdir / f"{n}.json").read_text()) for n in NODES}
