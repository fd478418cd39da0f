"""``seqbus up``: a development bus in the foreground.

It runs a configuration file (``-c``; by default ``bus.toml``, or ``cluster.toml`` with
``--cluster``, in the working directory, written first when it is not there): one sequencer, or
every member of its ``[cluster]``, and a replayer, each a process of its own started with
``python -m seqbus.cli`` and stopped by its PID. The configurations it writes (and ``seqbus
new`` puts in a project) need neither root nor a network namespace: the stream goes to each node
by UDP unicast on loopback, so the sequencer must know every node's address up front. They
reserve ``--nodes`` addresses for that, the *slots* (``downstream.subscribers``): each node
process listens on one of its own (``seqbus node ... --listen ADDRESS``), and ``seqbus tail``
takes a free one by itself. ``seqbus up`` prints them when the bus is ready.

On a terminal a status line shows the bus (who leads, the next sequence, messages per second,
slots in use); elsewhere only the events are written, one line each, through :mod:`logging`:
processes started and stopped, leader changes, a process that exited, the sequencers' own
output.
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import logging
import os
import selectors
import signal
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from seqbus.errors import ConfigError, SeqbusError
from seqbus.logs import LEVELS

__all__ = [
    "DEFAULT_NODES",
    "DEFAULT_PORT_BASE",
    "Layout",
    "bound_udp_ports",
    "config_text",
    "free_slots",
    "layout",
    "main",
]

log = logging.getLogger("seqbus.up")
#: The sequencers' and the replayer's own output, relayed line by line.
relay = logging.getLogger("seqbus.up.output")

#: Where the ports of a configuration ``seqbus up`` writes start (below the kernel's ephemeral
#: range, which starts at 32768 by default).
DEFAULT_PORT_BASE = 31100
#: Node slots (``downstream.subscribers``) a written configuration reserves by default.
DEFAULT_NODES = 8
#: Ports above the base: the node slots start here, and at most this many fit after them.
SLOTS_FROM = 40
MAX_NODES = 60
#: A stopping process is sent SIGTERM, then SIGKILL after this long.
STOP_TIMEOUT_S = 5.0
#: How long the bus may take to be ready (a sequencer answering, a leader elected).
READY_TIMEOUT_S = 30.0
#: How often the status endpoints are read.
STATUS_EVERY_S = 0.5


def config_text(
    *,
    cluster: bool,
    nodes: int = DEFAULT_NODES,
    port_base: int = DEFAULT_PORT_BASE,
    session: str = "DEV",
) -> str:
    """A development bus on loopback (keys: docs/configuration.md): one sequencer with a
    replayer of its own process, or (``cluster``) three sequencers, each with a replayer in
    its process, and a replayer following the stream into a journal of its own. The stream
    goes by UDP unicast to ``nodes`` slots; every port is ``port_base`` plus a fixed offset
    (``seqbus up`` and ``seqbus new`` write it). Journals go to ``.seqbus/bus/`` or
    ``.seqbus/cluster/`` beside the file."""
    if not 1 <= nodes <= MAX_NODES:
        raise SeqbusError(f"--nodes: between 1 and {MAX_NODES}, not {nodes}")
    if not 1024 <= port_base <= 65535 - SLOTS_FROM - MAX_NODES:
        raise SeqbusError(
            f"--port-base: between 1024 and {65535 - SLOTS_FROM - MAX_NODES}, not {port_base}"
        )

    def at(offset: int) -> str:
        return f'"127.0.0.1:{port_base + offset}"'

    slots = ", ".join(at(SLOTS_FROM + i) for i in range(nodes))
    state = ".seqbus/cluster" if cluster else ".seqbus/bus"
    what = ("three sequencers (a [cluster]: a leader and two standbys,\n# docs/ha.md) and a "
            "replayer" if cluster else "one sequencer and a replayer")
    command = "seqbus up --cluster" if cluster else "seqbus up"
    head = f"""\
# A development bus on this host's loopback: {what}. `{command}` runs it.
# No root and no network namespace needed: the stream goes to each node by UDP unicast, so
# the sequencer must know every node's address up front. Those are the slots of
# downstream.subscribers: each node process listens on one of its own
# (`seqbus node ... --listen 127.0.0.1:{port_base + SLOTS_FROM}`); `seqbus tail` takes a free one.
# Every key: docs/configuration.md of seqbus. Journals: {state}/ (delete it to start afresh).

[bus]
session = "{session}"
"""
    if not cluster:
        return head + f"""
[sequencer]
upstream = {at(0)}
status = {at(1)}
journal_dir = "{state}/journal"
# the replayer is a process of its own (seqbus up starts it: seqbus replayer -c THIS)
replayer_in_process = false
# stream time moves at least every 10 ms, so deterministic timers fire on time
clock_tick_ms = 10

[downstream]
transport = "udp-unicast"
subscribers = [{slots}]

[replayer]
listen = {at(2)}

[node]
replayers = [{at(2)}]
"""
    members = "\n".join(
        f"  {{ id = {m}, upstream = {at(10 * m)}, peer = {at(10 * m + 1)}, "
        f"publish = {at(10 * m + 2)}, replayer = {at(10 * m + 3)}, status = {at(10 * m + 4)} }},"
        for m in (1, 2, 3)
    )
    return head + f"""
[sequencer]
# member N journals into {state}/journal-N
journal_dir = "{state}/journal"
# stream time moves at least every 10 ms, so deterministic timers fire on time
clock_tick_ms = 10

[downstream]
transport = "udp-unicast"
# the node slots, then the following replayer's own address (replayer.follow_listen)
subscribers = [{slots}, {at(3)}]

[replayer]
# a replayer of its own process following the stream (seqbus up starts it)
listen = {at(2)}
follow = true
follow_listen = {at(3)}
journal_dir = "{state}/replayer"

[node]
# gap fills and rewinds: the following replayer first, then the members' own
replayers = [{at(2)}]

[cluster]
# a standby takes over after 300-450 ms without a leader: longer than the 40 ms default, so
# that a busy development machine starving a sequencer for a moment does not change leaders
election_timeout_ms = 300
heartbeat_ms = 10
members = [
{members}
]
"""


# -- what a configuration asks for ----------------------------------------------------------


@dataclass
class Layout:
    """What ``seqbus up`` reads from a configuration besides what ``seqbus._core`` checks."""

    path: Path
    session: str
    #: ``[cluster]`` member ids; empty without a cluster (one sequencer).
    members: list[int]
    #: The node slots: ``downstream.subscribers`` other than a replayer's or a dispatcher's
    #: own address (empty unless the transport is ``udp-unicast``).
    slots: list[str]
    transport: str
    #: Whether a replayer process of its own is to run (``replayer.follow``, or a sequencer
    #: without ``replayer_in_process``).
    replayer_process: bool
    #: (address, key, "udp" or "tcp") of every socket the sequencers and replayer bind.
    binds: list[tuple[str, str, str]] = field(default_factory=list)
    #: ``node.listen``: where every node of this configuration receives, if it says.
    node_listen: str | None = None

    @property
    def cluster(self) -> bool:
        return bool(self.members)


def _table(doc: dict[str, Any], key: str) -> dict[str, Any]:
    value = doc.get(key, {})
    return value if isinstance(value, dict) else {}


def layout(config: Path) -> Layout:
    """The configuration's processes and addresses (checked by ``seqbus._core`` first, which
    names a bad key)."""
    from seqbus import _core

    _core.check_config(str(config))
    doc = tomllib.loads(config.read_text())
    bus, seq, down = _table(doc, "bus"), _table(doc, "sequencer"), _table(doc, "downstream")
    rep, node, shm = _table(doc, "replayer"), _table(doc, "node"), _table(doc, "shm")
    transport = str(down.get("transport", ""))
    own = {rep.get("follow_listen"), shm.get("dispatcher_listen")}
    slots = [str(a) for a in down.get("subscribers", []) if a not in own]
    members = [int(m["id"]) for m in _table(doc, "cluster").get("members", [])]
    follow = bool(rep.get("follow", False))
    binds: list[tuple[str, str, str]] = []
    if members:
        for m in _table(doc, "cluster")["members"]:
            i = m["id"]
            for key, kind in (("upstream", "udp"), ("peer", "udp"), ("publish", "udp"),
                              ("replayer", "udp"), ("status", "tcp")):
                if key in m:
                    binds.append((str(m[key]), f"cluster.members (id {i}) {key}", kind))
    else:
        binds.append((str(seq.get("upstream", "127.0.0.1:31000")), "sequencer.upstream", "udp"))
        if "status" in seq:
            binds.append((str(seq["status"]), "sequencer.status", "tcp"))
    in_process = bool(seq.get("replayer_in_process", True))
    replayer_process = follow or (not members and not in_process)
    if replayer_process or (not members and in_process):
        binds.append((str(rep.get("listen", "127.0.0.1:31002")), "replayer.listen", "udp"))
    if follow and transport == "udp-unicast":
        listen = rep.get("follow_listen", node.get("listen"))
        if listen:
            binds.append((str(listen), "replayer.follow_listen", "udp"))
    return Layout(config, str(bus.get("session", "")), members, slots if transport ==
                  "udp-unicast" else [], transport, replayer_process, binds,
                  str(node["listen"]) if node.get("listen") else None)


# -- ports ----------------------------------------------------------------------------------


def _proc_ports(files: tuple[str, ...], listening_only: bool) -> set[int] | None:
    ports: set[int] = set()
    try:
        for name in files:
            if not os.path.exists(name):
                continue
            with open(name) as f:
                next(f, None)  # the header
                for line in f:
                    cols = line.split()
                    if len(cols) > 3 and (not listening_only or cols[3] == "0A"):
                        ports.add(int(cols[1].rsplit(":", 1)[1], 16))
    except (OSError, ValueError, IndexError):
        return None
    return ports


def bound_udp_ports() -> set[int] | None:
    """The UDP ports sockets of this network namespace are bound to, read from
    ``/proc/net/udp`` (not probed with a bind, which would hold a port for a moment: a node
    binding it then would fail to start); None when that cannot be read."""
    return _proc_ports(("/proc/net/udp", "/proc/net/udp6"), listening_only=False)


def _listening_tcp_ports() -> set[int] | None:
    return _proc_ports(("/proc/net/tcp", "/proc/net/tcp6"), listening_only=True)


def _port(address: str) -> int:
    return int(address.rsplit(":", 1)[1])


def free_slots(slots: list[str]) -> list[str] | None:
    """The slots no socket of this host is bound to (None when that cannot be read)."""
    bound = bound_udp_ports()
    return None if bound is None else [s for s in slots if _port(s) not in bound]


def listen_candidates(config: str | Path, *, last_first: bool = False) -> list[str | None]:
    """Where a node or ``seqbus tail`` may receive the stream of ``config``'s bus: ``[None]``
    when the configuration says (``node.listen``) or its transport needs no address, else the
    node slots of its ``udp-unicast`` downstream that no socket of this host holds (all of them
    when that cannot be read), in order or the last first (``seqbus tail`` takes the last ones,
    leaving the first to nodes). Every slot in use is an error naming them."""
    plan = layout(Path(config))
    if plan.transport != "udp-unicast" or plan.node_listen:
        return [None]
    free = free_slots(plan.slots)
    candidates: list[str | None] = list(plan.slots if free is None else free)
    if not candidates:
        raise SeqbusError(
            f"{config}: every node slot of downstream.subscribers is in use "
            f"({', '.join(plan.slots)}): stop a node, or add an address to the list and restart "
            "the bus"
        )
    return candidates[::-1] if last_first else candidates


def _check_ports(plan: Layout) -> None:
    """Every address the bus binds must be free: a bus already running on this configuration
    (another ``seqbus up``, or processes it left) is named before anything starts."""
    bound = {"udp": bound_udp_ports() or set(), "tcp": _listening_tcp_ports() or set()}
    taken = [f"{address} ({key})" for address, key, kind in plan.binds
             if _port(address) in bound[kind]]
    if taken:
        raise SeqbusError(
            f"{plan.path}: in use already: {', '.join(taken)}. Is a bus running on it (another "
            "seqbus up, or its processes)? Stop it, or write a configuration on other ports "
            "(seqbus up -c other.toml --port-base PORT)"
        )


# -- the console: events one per line, and a status line on a terminal ----------------------


class Console(logging.Handler):
    """Writes each record as one line on ``stream``; on a terminal it keeps a status line
    under them, rewritten in place (cleared before a record is written, drawn again after)."""

    def __init__(self, stream: IO[str] | None = None) -> None:
        super().__init__()
        self.stream = stream if stream is not None else sys.stderr
        self.tty = self.stream.isatty()
        self.line = ""
        # the lines of seqbus.logs.Console, which the processes write theirs with
        self.setFormatter(logging.Formatter(
            "%(asctime)s.%(msecs)03d %(levelname)s up: %(message)s", "%Y-%m-%d %H:%M:%S"))

    def format(self, record: logging.LogRecord) -> str:
        if record.name == relay.name:
            return record.getMessage()  # a process's own line, as it wrote it
        return super().format(record)

    def _clear(self) -> None:
        if self.tty and self.line:
            self.stream.write("\r\x1b[K")

    def emit(self, record: logging.LogRecord) -> None:
        try:
            self.acquire()
            self._clear()
            self.stream.write(self.format(record) + "\n")
            if self.tty and self.line:
                self.stream.write(self.line)
            self.stream.flush()
        except Exception:  # noqa: BLE001 - logging must not raise
            self.handleError(record)
        finally:
            self.release()

    def status(self, text: str) -> None:
        if not self.tty:
            return
        width = max(20, _terminal_width() - 1)
        self.acquire()
        try:
            self._clear()
            self.line = text[:width]
            self.stream.write(self.line)
            self.stream.flush()
        finally:
            self.release()

    def print(self, text: str) -> None:
        """Output of the command (what nodes need), on stdout, under the status line."""
        self.acquire()
        try:
            self._clear()
            self.stream.flush()
            print(text, flush=True)
            if self.tty and self.line:
                self.stream.write(self.line)
                self.stream.flush()
        finally:
            self.release()


def _terminal_width() -> int:
    try:
        columns = os.get_terminal_size(sys.stderr.fileno()).columns
    except OSError:
        columns = 0
    return columns if columns >= 40 else 100


# -- the processes --------------------------------------------------------------------------

_libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In a child before exec: SIGTERM when ``seqbus up`` dies, even by SIGKILL, so that no
    sequencer outlives it holding the bus's ports."""
    _libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)


@dataclass
class Proc:
    """One process ``seqbus up`` started."""

    name: str
    popen: subprocess.Popen[bytes]
    member: int | None = None
    buffered: bytes = b""
    reported: bool = False

    @property
    def pid(self) -> int:
        return self.popen.pid

    def exit_text(self) -> str:
        code = self.popen.returncode
        if code is None:
            return "running"
        if code < 0:
            try:
                return f"killed by {signal.Signals(-code).name}"
            except ValueError:
                return f"killed by signal {-code}"
        return f"exit status {code}"


class Bus:
    """The processes of one development bus and what is known of them."""

    def __init__(self, plan: Layout, console: Console) -> None:
        self.plan = plan
        self.console = console
        self.procs: list[Proc] = []
        self.selector = selectors.DefaultSelector()
        self.leader: int | None = None
        self.term: int | None = None
        self.next_sequence = 0
        self.rate = 0.0
        self._last_status = 0.0
        self._last_seq: tuple[float, int] | None = None
        self.started = time.monotonic()

    def start(self, name: str, args: list[str], member: int | None = None) -> Proc:
        env = dict(os.environ, PYTHONUNBUFFERED="1")
        popen = subprocess.Popen(
            [sys.executable, "-m", "seqbus.cli", *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=self.plan.path.parent,
            env=env,
            # its own session: a Ctrl-C at the terminal reaches seqbus up alone, which stops
            # the processes itself, by PID
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )
        proc = Proc(name, popen, member)
        assert popen.stdout is not None
        os.set_blocking(popen.stdout.fileno(), False)
        self.selector.register(popen.stdout, selectors.EVENT_READ, proc)
        self.procs.append(proc)
        log.info("started %s: pid %d (%s)", name, popen.pid, " ".join(["seqbus", *args]))
        return proc

    def pump(self, timeout: float) -> None:
        """Relay what the processes wrote (a line at a time), waiting at most ``timeout``."""
        for key, _ in self.selector.select(timeout):
            proc: Proc = key.data
            stream = key.fileobj
            assert hasattr(stream, "read")
            try:
                chunk = stream.read()
            except OSError:
                chunk = b""
            if chunk:
                proc.buffered += chunk
                *lines, proc.buffered = proc.buffered.split(b"\n")
                for line in lines:
                    relay.info("%s", line.decode(errors="replace").rstrip())
            elif chunk is not None:  # end of file: the process closed its output
                self.selector.unregister(stream)
                if proc.buffered:
                    relay.info("%s", proc.buffered.decode(errors="replace").rstrip())
                    proc.buffered = b""

    def running(self) -> list[Proc]:
        return [p for p in self.procs if p.popen.poll() is None]

    def sequencers(self) -> list[Proc]:
        return [p for p in self.procs if p.name.startswith("sequencer")]

    def statuses(self) -> dict[int, dict[str, Any]]:
        """Each running sequencer's /status document, by member (1 without a cluster)."""
        from seqbus.status import member_statuses

        alive = {p.member or 1 for p in self.sequencers() if p.popen.poll() is None}
        try:
            found = member_statuses(str(self.plan.path), timeout=0.3)
        except SeqbusError:
            return {}
        return {e.member: s for e, s in found if isinstance(s, dict) and e.member in alive}

    def watch_status(self, force: bool = False) -> None:
        """Read the status endpoints (every :data:`STATUS_EVERY_S`): log leader changes and
        draw the status line."""
        now = time.monotonic()
        if not force and now - self._last_status < STATUS_EVERY_S:
            return
        self._last_status = now
        statuses = self.statuses()
        leader, term = None, None
        for member, s in statuses.items():
            cluster = s.get("cluster")
            if not cluster:
                leader, term = member, None
            elif cluster.get("role") == "leader":
                leader, term = member, int(cluster.get("term", 0))
        if leader is not None:
            nxt = _counter(statuses[leader], "next_sequence")
            if self._last_seq is not None and now > self._last_seq[0]:
                self.rate = max(0.0, (nxt - self._last_seq[1]) / (now - self._last_seq[0]))
            self._last_seq = (now, nxt)
            self.next_sequence = nxt
        if self.plan.cluster and leader is not None and leader != self.leader:
            pid = next((p.pid for p in self.sequencers() if p.member == leader), 0)
            was = f" (was sequencer {self.leader})" if self.leader is not None else ""
            log.info("sequencer %d (pid %d) leads the bus, term %s%s", leader, pid, term, was)
        if leader is not None:
            self.leader, self.term = leader, term
        self.console.status(self.status_line(leader))

    def status_line(self, leader: int | None) -> str:
        seqs = self.sequencers()
        up = sum(1 for p in seqs if p.popen.poll() is None)
        parts = [f"bus {self.plan.session}"]
        if self.plan.cluster:
            parts.append(f"sequencers {up}/{len(seqs)} up")
            parts.append(f"leader {leader}" if leader is not None else "no leader")
        else:
            parts.append("sequencer up" if up else "sequencer DOWN")
        parts.append(f"next sequence {self.next_sequence:,}")
        parts.append(f"{self.rate:,.0f} msg/s")
        replayers = [p for p in self.procs if p.name == "replayer"]
        if replayers:
            parts.append("replayer up" if replayers[0].popen.poll() is None else "replayer DOWN")
        if self.plan.slots:
            free = free_slots(self.plan.slots)
            if free is not None:
                parts.append(f"slots {len(self.plan.slots) - len(free)}/{len(self.plan.slots)}"
                             " in use")
        parts.append(f"{time.monotonic() - self.started:,.0f} s")
        return " | ".join(parts)

    def reap(self) -> None:
        """Say so of every process that exited on its own since the last look."""
        for proc in self.procs:
            if proc.reported or proc.popen.poll() is None:
                continue
            proc.reported = True
            self.pump(0)
            seqs = self.sequencers()
            up = sum(1 for p in seqs if p.popen.poll() is None)
            what = f"{proc.name} (pid {proc.pid}) exited: {proc.exit_text()}"
            if proc.name == "replayer":
                log.warning("%s; rewinds and gap fills %s", what,
                            "come from the sequencers' own replayers now" if self.plan.cluster
                            else "are not served until it is back (restart seqbus up)")
            elif self.plan.cluster:
                majority = len(seqs) // 2 + 1
                state = ("the bus goes on" if up >= majority else
                         "no majority: the bus stands still until one is back")
                log.warning("%s; %d of %d sequencers running: %s", what, up, len(seqs), state)
            else:
                log.error("%s; the bus has no sequencer", what)

    def stop(self, why: str) -> None:
        """SIGTERM to every running process by its PID (the replayer first), SIGKILL to any
        still running after :data:`STOP_TIMEOUT_S`; says what became of each."""
        running = self.running()
        order = sorted(running, key=lambda p: p.name != "replayer")
        if order:
            log.info("%s: stopping %s", why,
                     ", ".join(f"{p.name} (pid {p.pid})" for p in order))
        for proc in order:
            try:
                os.kill(proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + STOP_TIMEOUT_S
        while any(p.popen.poll() is None for p in order) and time.monotonic() < deadline:
            self.pump(0.05)
        for proc in order:
            if proc.popen.poll() is None:
                log.warning("%s (pid %d) did not stop within %g s: SIGKILL", proc.name,
                            proc.pid, STOP_TIMEOUT_S)
                try:
                    os.kill(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.popen.wait(5)
        self.pump(0)
        for proc in order:
            proc.reported = True
            log.info("stopped %s (pid %d): %s", proc.name, proc.pid, proc.exit_text())
        self.selector.close()


def _counter(status: dict[str, Any], name: str) -> int:
    counters = status.get("counters", {})
    value = counters.get(name) if isinstance(counters, dict) else None
    return int(value) if isinstance(value, int | str) else 0


# -- seqbus up ------------------------------------------------------------------------------


def join_text(plan: Layout) -> str:
    """What a node needs to join the bus: the configuration and, on a unicast bus, a slot."""
    config = os.path.relpath(plan.path)
    lines = [f"Nodes join the bus with -c {config}."]
    if plan.slots:
        free = free_slots(plan.slots)
        lines.append(
            "The stream goes to each node by UDP unicast: each node process listens on a slot "
            "of its own, one of"
        )
        for slot in plan.slots:
            taken = free is not None and slot not in free
            lines.append(f"  {slot}" + ("   (in use)" if taken else ""))
        lines.append("for example (each takes a free slot itself; --listen HOST:PORT chooses one):")
        lines.append(f"  seqbus node MODULE:CLASS -c {config} --account NAME --rewind")
        lines.append(f"  seqbus tail -c {config}")
        lines.append(
            f"More slots: a configuration with more (seqbus up -c new.toml --nodes N), or add "
            f"addresses to downstream.subscribers in {config} and restart seqbus up."
        )
    else:
        lines.append("for example:")
        lines.append(f"  seqbus node MODULE:CLASS -c {config} --account NAME --rewind")
        lines.append(f"  seqbus tail -c {config}")
    return "\n".join(lines)


def _wait_ready(bus: Bus, stop: list[int]) -> bool:
    """Until a sequencer answers on its status endpoint as the bus's (single) sequencer or
    leader; False when stopped or a sequencer died first. Logs what it waits for every 5 s."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    said = time.monotonic()
    has_status = any(key.endswith("status") for _, key, _ in bus.plan.binds)
    while not stop:
        bus.pump(0.05)
        if any(p.popen.poll() is not None for p in bus.sequencers()):
            bus.reap()
            return False
        if has_status:
            bus.watch_status(force=True)
            if bus.leader is not None:
                return True
        else:
            udp = bound_udp_ports()
            if udp is None or all(_port(a) in udp for a, k, kind in bus.plan.binds
                                  if kind == "udp" and not k.startswith("replayer")):
                return True
        if time.monotonic() > deadline:
            raise SeqbusError(
                f"no sequencer {'leads' if bus.plan.cluster else 'answers'} after "
                f"{READY_TIMEOUT_S:g} s (their output is above)"
            )
        if time.monotonic() - said > 5:
            said = time.monotonic()
            log.info("waiting for %s", "a leader among the sequencers" if bus.plan.cluster
                     else "the sequencer to answer on its status endpoint")
    return False


def _start_replayer(bus: Bus, stop: list[int]) -> bool:
    """Start the replayer process (when the configuration has one) and wait until it holds
    its addresses; False when stopped, or when it exited first (said by :meth:`Bus.reap`)."""
    if not bus.plan.replayer_process:
        return True
    proc = bus.start("replayer", ["replayer", "-c", str(bus.plan.path)])
    ports = [_port(a) for a, key, kind in bus.plan.binds if key.startswith("replayer.")]
    deadline = time.monotonic() + READY_TIMEOUT_S
    while not stop:
        bus.pump(0.05)
        if proc.popen.poll() is not None:
            bus.reap()
            return False
        bound = bound_udp_ports()
        if bound is None or all(p in bound for p in ports):
            return True
        if time.monotonic() > deadline:
            raise SeqbusError(f"the replayer holds no {', '.join(map(str, ports))} after "
                              f"{READY_TIMEOUT_S:g} s (its output is above)")
    return False


def _setup_logging(level: str) -> Console:
    console = Console()
    for name in (log.name, relay.name):
        logger = logging.getLogger(name)
        logger.handlers[:] = [console] if name == log.name else []
        logger.setLevel(level)
    log.propagate = False  # its records (and the relayed lines) are written here, once
    return console


def main(args: argparse.Namespace) -> int:
    console = _setup_logging(args.log_level)
    default = "cluster.toml" if args.cluster else "bus.toml"
    path = Path(args.config or default)
    written = False
    if not path.exists():
        text = config_text(cluster=args.cluster, nodes=args.nodes or DEFAULT_NODES,
                           port_base=args.port_base or DEFAULT_PORT_BASE,
                           session=args.session or "DEV")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written = True
    elif args.nodes or args.port_base or args.session:
        raise ConfigError(
            f"{path} exists: --nodes, --port-base and --session make a new configuration; "
            f"edit {path}, or give -c a new file name"
        )
    plan = layout(path.resolve())
    if written:
        log.info("wrote %s: %s, %d node slots", path,
                 "three sequencers" if plan.cluster else "one sequencer", len(plan.slots))
    if args.cluster and not plan.cluster:
        raise ConfigError(f"{path}: --cluster, but it has no [cluster] of sequencers")
    if not plan.members and plan.transport not in ("udp-unicast", "udp-multicast", "tcp",
                                                   "shm"):
        raise ConfigError(f"{path}: downstream.transport {plan.transport!r}: the in-process "
                          "bus cannot be reached by other processes")
    _check_ports(plan)
    needs = ("UDP multicast, which needs a network that carries it (on one host: a network "
             "namespace, docs/transports.md)" if plan.transport == "udp-multicast" else
             f"{plan.transport}: no root or network namespace needed")
    log.info("bus %s from %s: %s and a replayer; %s", plan.session, path,
             f"{len(plan.members)} sequencers" if plan.cluster else "one sequencer", needs)

    stop: list[int] = []

    def on_signal(signum: int, _frame: object) -> None:
        stop.append(signum)

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    bus = Bus(plan, console)
    config = str(plan.path)
    code = 0
    try:
        if plan.cluster:
            for member in plan.members:
                bus.start(f"sequencer {member}", ["sequencer", "-c", config, "--id",
                                                  str(member)], member)
        else:
            bus.start("sequencer", ["sequencer", "-c", config], 1)
        if _wait_ready(bus, stop) and _start_replayer(bus, stop):
            lead = (f"sequencer {bus.leader} leads, term {bus.term}" if plan.cluster
                    else "the sequencer answers")
            if plan.replayer_process:
                lead += ", and the replayer listens"
            log.info("ready: %s; stop with Ctrl-C (or SIGTERM to pid %d)", lead, os.getpid())
            console.print(join_text(plan))
        while not stop:
            bus.pump(0.1)
            bus.reap()
            if not any(p.popen.poll() is None for p in bus.sequencers()):
                log.error("no sequencer is running: stopping the bus")
                code = 1
                break
            bus.watch_status()
    finally:
        why = (f"{signal.Signals(stop[0]).name}" if stop else "stopping")
        try:
            bus.stop(why)
        finally:
            console.status("")
            console.line = ""
            for s, handler in previous.items():
                signal.signal(s, handler)
    return code


def add_command(sub: Any) -> None:
    """``seqbus up`` in the CLI's subparsers."""
    p = sub.add_parser(
        "up",
        help="a development bus in the foreground: one sequencer (or three with --cluster) and "
        "a replayer on loopback, no root or network namespace needed; prints what nodes need "
        "to join it",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    p.add_argument(
        "-c", "--config", metavar="FILE",
        help="the bus to run (default: bus.toml, or cluster.toml with --cluster, in the working "
        "directory; written first when it is not there)",
    )
    p.add_argument("--cluster", action="store_true",
                   help="three sequencers (a leader and two standbys) instead of one")
    p.add_argument("--nodes", type=int, metavar="N",
                   help=f"node slots a written configuration reserves (default {DEFAULT_NODES})")
    p.add_argument("--port-base", type=int, metavar="PORT",
                   help="first port of a written configuration (default "
                   f"{DEFAULT_PORT_BASE}; it uses the next {SLOTS_FROM + MAX_NODES})")
    p.add_argument("--session", help="session name of a written configuration (default DEV)")
    p.add_argument("--log-level", choices=LEVELS, default="INFO", type=str.upper,
                   help="the least level of the lines written to stderr (default INFO: every "
                   "event; WARNING: only what needs a look); the processes' own lines all pass")
    p.set_defaults(func=main)
