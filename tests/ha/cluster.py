"""A cluster of sequencer processes for the high-availability tests (docs/ha.md), and nodes
that record every record they are handed."""

from __future__ import annotations

import json
import signal
import struct
import subprocess
import time
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from collections.abc import Callable
from typing import Any, Literal

from seqbus import _core
from seqbus.errors import BackPressureError
from tests.conftest import Processes, free_tcp_port, free_udp_port, seqbus_cli

#: IDL header of the test bodies (block 16, template 1, schema 9, version 1), then tag, counter.
HEADER = struct.pack("<HHHH", 16, 1, 9, 1)
BODY = struct.Struct("<8sQ")
RECORD = struct.Struct("<IHHQ")  # length, type, reserved, sequence (docs/architecture.md)
MESSAGE, CAUGHT_UP = 1, 2


def body(tag: str, n: int) -> bytes:
    return HEADER + BODY.pack(tag.encode().ljust(8, b"\0"), n)


@dataclass
class Member:
    id: int
    upstream: int
    peer: int
    publish: int
    replayer: int
    status: int


@dataclass
class Cluster:
    path: Path
    workdir: Path
    members: dict[int, Member]
    group: int
    processes: Processes
    running: dict[int, subprocess.Popen[bytes]] = field(default_factory=dict)
    starts: dict[int, int] = field(default_factory=dict)

    def start(self, member: int, wrap: list[str] | None = None) -> subprocess.Popen[bytes]:
        """Starts sequencer ``member`` (``wrap``: a command line it runs inside, e.g. a mount
        namespace)."""
        self.starts[member] = self.starts.get(member, 0) + 1
        name = f"seq{member}-{self.starts[member]}"
        argv = [*seqbus_cli(), "sequencer", "-c", str(self.path), "--id", str(member)]
        proc = self.processes.start(name, [*(wrap or []), *argv])
        self.running[member] = proc
        return proc

    def log(self, member: int) -> str:
        return self.processes.log(f"seq{member}-{self.starts[member]}")

    def kill(self, member: int, sig: int = signal.SIGKILL) -> None:
        proc = self.running[member]
        self.processes.kill(proc, sig)
        if sig == signal.SIGKILL:
            proc.wait(timeout=10)
            del self.running[member]

    def status(self, member: int, timeout: float = 0.5) -> dict[str, Any] | None:
        url = f"http://127.0.0.1:{self.members[member].status}/status"
        try:
            with urllib.request.urlopen(url, timeout=timeout) as r:
                doc: dict[str, Any] = json.loads(r.read())
                return doc
        except OSError:
            return None

    def status_of(self, member: int, timeout: float = 20.0) -> dict[str, Any]:
        """The member's status document, asked again until one comes (one slow answer on a
        loaded host is not a state)."""
        deadline = time.monotonic() + timeout
        while (s := self.status(member)) is None:
            assert time.monotonic() < deadline, (
                f"member {member} gave no status within {timeout} s\n{self.processes.logs()}"
            )
            time.sleep(0.02)
        return s

    def leader(self, timeout: float = 20.0, exclude: int | None = None) -> int:
        """The member whose status says it leads (waits for one)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for m in self.running:
                if m == exclude:
                    continue
                s = self.status(m)
                if s and (s.get("cluster") or {}).get("role") == "leader":
                    return m
            time.sleep(0.02)
        raise AssertionError(f"no leader within {timeout} s\n{self.processes.logs()}")

    def settled(self, timeout: float = 20.0) -> tuple[int, dict[int, dict[str, Any]]]:
        """Waits until every running member answers, one leads and the others follow it in
        its term; returns the leader and each member's status. An election can happen in a
        healthy cluster on a loaded host (the election timeout is 40 ms by default), so a test
        that asserts on who leads takes the leader from one consistent picture."""
        deadline = time.monotonic() + timeout
        seen: dict[int, dict[str, Any]] = {}
        while time.monotonic() < deadline:
            seen = {m: s for m in self.running if (s := self.status(m)) is not None}
            leader = settled_leader({m: s.get("cluster") or {} for m, s in seen.items()})
            if len(seen) == len(self.running) and leader is not None:
                return leader, seen
            time.sleep(0.02)
        raise AssertionError(
            f"no settled leadership within {timeout} s: {seen}\n{self.processes.logs()}"
        )


def settled_leader(roles: dict[int, dict[str, Any]]) -> int | None:
    """The member that leads when, of these members' ``cluster`` status, exactly one leads and
    every other follows in its term; else None."""
    leaders = [m for m, c in roles.items() if c.get("role") == "leader"]
    if len(leaders) != 1:
        return None
    term = roles[leaders[0]].get("term")
    others = (c for m, c in roles.items() if m != leaders[0])
    return (
        leaders[0]
        if all(c.get("role") == "follower" and c.get("term") == term for c in others)
        else None
    )


def write_cluster(
    workdir: Path,
    processes: Processes,
    *,
    members: int = 3,
    session: str = "HA00000001",
    extra: str = "",
    journal_dirs: dict[int, Path] | None = None,
    election_timeout_ms: int | None = None,
    segment_size: int | None = None,
    sequencer: str = "",
) -> Cluster:
    group = free_udp_port()
    ms = {
        i: Member(
            i, free_udp_port(), free_udp_port(), free_udp_port(), free_udp_port(), free_tcp_port()
        )
        for i in range(1, members + 1)
    }
    lines = []
    for m in ms.values():
        jd = (
            f', journal_dir = "{journal_dirs[m.id]}"'
            if journal_dirs and m.id in journal_dirs
            else ""
        )
        lines.append(
            f'  {{ id = {m.id}, upstream = "127.0.0.1:{m.upstream}", peer = "127.0.0.1:{m.peer}", '
            f'publish = "127.0.0.1:{m.publish}", replayer = "127.0.0.1:{m.replayer}", '
            f'status = "127.0.0.1:{m.status}"{jd} }},'
        )
    members_text = "\n".join(lines)
    election = (
        f"election_timeout_ms = {election_timeout_ms}\n" if election_timeout_ms is not None else ""
    )
    text = f"""\
[bus]
session = "{session}"

[sequencer]
journal_dir = "{workdir / "journal"}"
clock_tick_ms = 50
{f"segment_size = {segment_size}" if segment_size else ""}
{sequencer}

[downstream]
transport = "udp-multicast"
group = "239.7.7.8:{group}"
interface = "127.0.0.1"

[node]
retry_ms = 20

[cluster]
{election}members = [
{members_text}
]
{extra}
"""
    path = workdir / "bus.toml"
    path.write_text(text)
    return Cluster(path, workdir, ms, group, processes)


class Stream:
    """A node that records every record it is handed, and sends tagged bodies."""

    def __init__(
        self, config: Cluster | Path, account: str, start: Literal["live", "rewind"] | int = "rewind"
    ) -> None:
        """``config``: a cluster, or the path of any bus configuration."""
        self.account = account
        path = config.path if isinstance(config, Cluster) else config
        self.client = _core.NodeClient(str(path), account, 1, start=start)
        self.records: list[tuple[int, int, bytes]] = []  # (type, sequence, envelope + body)
        self.sent = 0
        self.caught_up = False

    def poll(self, timeout: float = 0.002) -> int:
        batch = self.client.poll(4096, timeout)
        at = 0
        while at < len(batch):
            length, kind, _, seq = RECORD.unpack_from(batch, at)
            if kind == CAUGHT_UP:
                self.caught_up = True
            else:
                self.records.append((kind, seq, bytes(batch[at + 16 : at + length])))
            at += length
        return len(batch)

    def send_upto(self, n: int) -> None:
        while self.sent < n:
            try:
                self.client.send(body(self.account, self.sent))
            except BackPressureError:
                return
            self.sent += 1

    def send_all(self, n: int, check: Callable[[], None]) -> None:
        """Sends until ``n`` bodies are out, polling between tries (back pressure clears only
        while polled); ``check()`` raises when it has taken too long."""
        while self.sent < n:
            check()
            self.send_upto(n)
            self.poll()

    def has(self, tag: str, n: int) -> bool:
        """Polls once; whether ``n`` of ``tag``'s messages have come."""
        return self.poll() >= 0 and len(self.from_tag(tag)) >= n

    def messages(self) -> list[tuple[int, bytes]]:
        return [(seq, data) for kind, seq, data in self.records if kind == MESSAGE]

    def from_tag(self, tag: str) -> list[int]:
        """The counters of ``tag``'s messages, in stream order."""
        out = []
        for _, data in self.messages():
            t, n = BODY.unpack_from(data, 32 + 8)
            if t.rstrip(b"\0").decode() == tag:
                out.append(n)
        return out


def pump(streams: list[Stream], until: Any, timeout: float, what: str, cluster: Cluster) -> None:
    """Polls every node in turn (senders keep retrying only while polled) until ``until()``."""
    deadline = time.monotonic() + timeout
    while not until():
        if time.monotonic() > deadline:
            raise AssertionError(
                f"{what}: not within {timeout} s: "
                + ", ".join(f"{s.account} {len(s.messages())} {s.client.stats()}" for s in streams)
                + "\n"
                + cluster.processes.logs()
            )
        for s in streams:
            s.poll()
