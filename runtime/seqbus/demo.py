"""``seqbus demo``: a sequencer and two Python nodes ping-ponging through it.

Multicast needs a private network namespace; the demo re-executes itself inside one
(``unshare -n``, ``-rn`` when not root, loopback brought up) unless it already runs in one
(``SEQBUS_IN_NETNS=1``), and falls back to UDP unicast, saying so, when none can be made. It
starts every process itself and kills each by its PID at the end, on error and on Ctrl-C.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

__all__ = ["bus_config", "main", "percentiles"]

NETNS_ENV = "SEQBUS_IN_NETNS"


def _netns_flags() -> list[str] | None:
    """unshare's flags for a private network namespace, or None when none can be made."""
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return None
    flags = ["-n"] if os.geteuid() == 0 else ["-r", "-n"]
    probe = subprocess.run(["unshare", *flags, "true"], capture_output=True, check=False)
    return flags if probe.returncode == 0 else None


def _reexec_in_netns(argv: list[str]) -> None:
    flags = _netns_flags()
    if flags is None:
        return
    script = 'ip link set lo up && exec "$@"'
    command = [sys.executable, "-m", "seqbus.cli", *argv]
    os.execvp(
        "unshare",
        ["unshare", *flags, "--", "env", f"{NETNS_ENV}=1", "bash", "-c", script, "_", *command],
    )


#: Every port :func:`free_udp_port` and :func:`free_tcp_port` handed out in this process.
_handed_out: set[int] = set()

#: Where hand-picked ports start; they end below the kernel's ephemeral range.
_PORTS_FROM = 10000


@functools.cache
def _ephemeral_start() -> int:
    """The first port the kernel hands to sockets bound to port 0 (and to connecting ones)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default


def _free_port(kind: socket.SocketKind) -> int:
    """A port on loopback no socket holds now and this process has not handed out before,
    taken from below the kernel's ephemeral range: a port from that range (what binding to
    port 0 returns) can be given to another process's socket — a node's, a connecting
    client's — between this call and its owner's bind, and a follower then fails with
    "Address already in use". Hand-picked ports are random, so that two processes picking at
    once rarely try the same one; where the ephemeral range leaves no room below it, the
    kernel's choice is taken."""
    start = _ephemeral_start()
    pick = random.SystemRandom()
    for _ in range(1000):
        port = pick.randrange(_PORTS_FROM, start) if start - _PORTS_FROM >= 1000 else 0
        with socket.socket(socket.AF_INET, kind) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:  # taken
                continue
            port = int(s.getsockname()[1])
        if port not in _handed_out:
            _handed_out.add(port)
            return port
    raise RuntimeError("no free port on 127.0.0.1 in 1000 tries")


def free_udp_port() -> int:
    return _free_port(socket.SOCK_DGRAM)


def free_tcp_port() -> int:
    return _free_port(socket.SOCK_STREAM)


def cluster_config(members: int) -> tuple[str, dict[int, str]]:
    """A ``[cluster]`` of ``members`` sequencers on loopback (docs/ha.md), each with its
    in-process replayer and status endpoint; returns the section and each member's status
    address."""
    lines, status = [], {}
    for i in range(1, members + 1):
        status[i] = f"127.0.0.1:{free_tcp_port()}"
        lines.append(
            f'  {{ id = {i}, upstream = "127.0.0.1:{free_udp_port()}", '
            f'peer = "127.0.0.1:{free_udp_port()}", publish = "127.0.0.1:{free_udp_port()}", '
            f'replayer = "127.0.0.1:{free_udp_port()}", status = "{status[i]}" }},'
        )
    return "[cluster]\nmembers = [\n" + "\n".join(lines) + "\n]\n", status


def bus_config(
    workdir: Path,
    multicast: bool,
    subscribers: list[str],
    idle: str = "hybrid",
    *,
    standalone_replayer: bool = False,
    cluster: str = "",
) -> str:
    """The demo bus (keys: docs/configuration.md): one sequencer on loopback, journal in
    ``workdir``, a replayer on a thread of the sequencer (or, with ``standalone_replayer``, in
    its own process: ``seqbus replayer``); ``subscribers`` are the nodes' unicast addresses;
    ``idle`` the idle strategy of the sequencer and the nodes. With ``cluster`` (a
    ``[cluster]`` section, :func:`cluster_config`) the sequencers are its members, each
    journaling into ``sequencer-journal-<id>``, and the standalone replayer follows the stream
    into ``journal`` (what was published, for the archive)."""
    upstream, downstream, replayer = free_udp_port(), free_udp_port(), free_udp_port()
    replayer_keys = ""
    if cluster:
        replayer_keys = f'follow = true\njournal_dir = "{workdir / "journal"}"'
        if not multicast:
            # the following replayer receives the stream as a subscriber of its own
            feed = f"127.0.0.1:{free_udp_port()}"
            subscribers = [*subscribers, feed]
            replayer_keys += f'\nfollow_listen = "{feed}"'
    if multicast:
        down = f'transport = "udp-multicast"\ngroup = "239.7.7.7:{downstream}"\n'
        down += 'interface = "127.0.0.1"'
    else:
        down = 'transport = "udp-unicast"\nsubscribers = ['
        down += ", ".join(f'"{a}"' for a in subscribers) + "]"
    if cluster:
        sequencer = f'journal_dir = "{workdir / "sequencer-journal"}"'
    else:
        sequencer = f'upstream = "127.0.0.1:{upstream}"\njournal_dir = "{workdir / "journal"}"'
        sequencer += f"\nreplayer_in_process = {'false' if standalone_replayer else 'true'}"
    return f"""\
[bus]
session = "DEMO000001"

[sequencer]
{sequencer}
idle = "{idle}"

[downstream]
{down}

[replayer]
listen = "127.0.0.1:{replayer}"
{replayer_keys}

[node]
replayers = ["127.0.0.1:{replayer}"]
idle = "{idle}"

{cluster}"""


def percentiles(values: list[int], points: tuple[float, ...]) -> dict[str, float]:
    """Nearest-rank percentiles of ``values`` (ns) in µs, keyed ``p50``, ``p99``, ``p99.9``…"""
    ordered = sorted(values)
    result: dict[str, float] = {}
    for p in points:
        rank = max(0, min(len(ordered) - 1, int(round(p / 100 * len(ordered))) - 1))
        key = f"p{p:g}"
        result[key] = ordered[rank] / 1000 if ordered else float("nan")
    return result


def _stop(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in reversed(procs):
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + 3.0
    for proc in reversed(procs):
        try:
            proc.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextmanager
def _workdir(args: argparse.Namespace, prefix: str) -> Iterator[Path]:
    """``--workdir`` (created, kept afterwards) or a temporary directory removed at the end."""
    keep: str | None = getattr(args, "workdir", None)
    if keep:
        path = Path(keep).resolve()
        path.mkdir(parents=True, exist_ok=True)
        if any(path.iterdir()):
            raise SystemExit(f"seqbus demo: --workdir {path} is not empty")
        yield path
        return
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        yield Path(tmp)


def _argv(args: argparse.Namespace) -> list[str]:
    argv = ["demo", "--count", str(args.count), "--timeout", str(args.timeout)]
    argv += ["--idle", args.idle]
    if getattr(args, "workdir", None):
        argv += ["--workdir", str(Path(args.workdir).resolve())]
    if not getattr(args, "report", True):
        argv.append("--no-report")
    if args.json:
        argv.append("--json")
    if not getattr(args, "sequencer_kill", True):
        argv.append("--no-sequencer-kill")
    if args.unicast:
        argv.append("--unicast")
    argv += ["--exchange", "--orders", str(args.orders)] if args.exchange else ["--pingpong"]
    return argv


class _Watch:
    """The demo's processes, and which of them may end and when.

    A node of the exchange stops by design once its work is done (the engines and market data
    at the end marker, the gateway when the engines' answer to it is in the stream), and it
    writes its report (``reports/<name>.json``, by rename) before it exits. Every other ending
    is a failure. The exit is read before the report is looked for: a node seen gone without
    its report has failed, and a node that writes its report and exits between two looks is
    never taken for one (looking for the report first raced the node's exit under load).
    """

    def __init__(
        self,
        procs: dict[str, subprocess.Popen[bytes]],
        deadline: float,
        reports: Path | None = None,
        finishers: frozenset[str] = frozenset(),
    ) -> None:
        self.procs = procs
        self.deadline = deadline
        self.reports = reports
        #: the processes that stop by design once their work is done; none of the others may
        self.finishers = finishers

    def finished(self, name: str) -> bool:
        """Whether ``name`` stops by design and wrote its final report (its work is done; it
        may be gone)."""
        return (
            name in self.finishers
            and self.reports is not None
            and (self.reports / f"{name}.json").exists()
        )

    def check(self, what: str, names: list[str] | None = None) -> None:
        """Fail when a process (of ``names``, or any) has ended other than by finishing its
        work, or when the deadline has passed; ``what`` is what the demo waits for."""
        for name in list(self.procs if names is None else names):
            proc = self.procs.get(name)
            if proc is None or proc.poll() is None:
                continue
            if proc.returncode == 0 and self.finished(name):
                continue
            raise RuntimeError(f"the {name} exited with status {proc.returncode}")
        if time.monotonic() > self.deadline:
            raise TimeoutError(f"no {what} before the timeout")


class _Progress:
    """One status line on stderr, rewritten in place on a terminal; on anything else (CI, a
    pipe) only the events are printed, one per line."""

    def __init__(self) -> None:
        self.tty = sys.stderr.isatty()
        self.width = 0

    def status(self, text: str) -> None:
        if self.tty:
            sys.stderr.write("\r" + text.ljust(self.width))
            sys.stderr.flush()
            self.width = len(text)

    def event(self, text: str) -> None:
        if self.tty and self.width:
            sys.stderr.write("\r" + " " * self.width + "\r")
            self.width = 0
        print(f"seqbus demo: {text}", file=sys.stderr, flush=True)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data


def _examples() -> tuple[str, list[str]]:
    """Where the example applications the demo runs are: their package (``seqbus.examples``
    in an installed wheel, which ships them; ``examples`` in a checkout, found in the current
    directory or the checkout this package runs from) and the ``seqbus node`` arguments that
    make it importable. Raises SeqbusError naming what is missing when there is neither."""
    import importlib.util

    from seqbus.errors import SeqbusError

    if importlib.util.find_spec("seqbus.examples") is not None:
        return "seqbus.examples", []
    for root in (Path.cwd(), Path(__file__).resolve().parents[2]):
        if (root / "examples" / "exchange" / "engine.py").exists():
            return "examples", ["--path", str(root)]
    raise SeqbusError(
        "the example applications are missing: this seqbus has no "
        "seqbus.examples (the wheels docs/packaging.md describes ship them) and there is no "
        "examples/ of a seqbus checkout in the current directory"
    )


def _status(address: str) -> dict[str, Any] | None:
    import urllib.request

    try:
        with urllib.request.urlopen(f"http://{address}/status", timeout=0.5) as r:
            doc: dict[str, Any] = json.loads(r.read())
            return doc
    except (OSError, ValueError):
        return None


def _sequencer_priority() -> None:
    """Runs in a sequencer's process before it starts: a higher scheduling priority when this
    user may set one (docs/ha.md: the sequencers are the bus's critical path; on a host with
    more busy processes than cores a leader starved of the CPU for an election timeout is
    taken for dead and replaced, which costs a pause)."""
    try:
        os.nice(-10)
    except OSError:
        pass


def _takeovers(status: dict[int, str], alive: dict[str, subprocess.Popen[bytes]]) -> dict[int, int]:
    """Times each live member became leader (its status endpoint's ``takeovers``)."""
    out = {}
    for member, address in status.items():
        if f"sequencer-{member}" in alive:
            s = _status(address)
            out[member] = int((s or {}).get("cluster", {}).get("takeovers", 0))
    return out


def _leader(status: dict[int, str], alive: dict[str, subprocess.Popen[bytes]]) -> int | None:
    for member, address in status.items():
        if f"sequencer-{member}" not in alive:
            continue
        s = _status(address)
        if s and (s.get("cluster") or {}).get("role") == "leader":
            return member
    return None


def exchange(args: argparse.Namespace, multicast: bool, notes: list[str]) -> int:
    """The exchange as separate processes: three sequencers (a leader and two standbys,
    docs/ha.md), a standalone replayer, an order gateway with its load generator, matching
    engine primary (ME/1) and hot backup (ME/2), market data. At the checkpoint (half the
    orders sent) every engine records its state hash; the primary engine is killed right after
    and a late joiner (ME/3) starts, rewinds the session and follows it live; at three quarters
    the leading sequencer is killed (kill -9) and a standby takes over. At the end: orders/s,
    trades, order → answer percentiles, the sequencer takeover time, the hashes (they must be
    equal) and, unless --no-report or --json, a Spark report over the session archive."""
    examples, path = _examples()
    progress = _Progress()
    names = ["ME-1", "ME-2", "MD-1", "GW-1", "ME-3"]
    with _workdir(args, "seqbus-exchange-") as workdir:
        reports = workdir / "reports"
        reports.mkdir()
        listen = {n: f"127.0.0.1:{free_udp_port()}" for n in names}
        config = workdir / "bus.toml"
        cluster, status = cluster_config(3)
        config.write_text(
            bus_config(
                workdir,
                multicast,
                list(listen.values()),
                args.idle,
                standalone_replayer=True,
                cluster=cluster,
            )
        )
        env = dict(
            os.environ,
            EXCHANGE_REPORT_DIR=str(reports),
            EXCHANGE_ORDERS=str(args.orders),
            EXCHANGE_CHECKPOINT_AT=str(max(1, args.orders // 2)),
            EXCHANGE_HOLD_AT=str(
                max(1, args.orders * 3 // 4) if getattr(args, "sequencer_kill", True) else 0
            ),
        )
        cli = [sys.executable, "-m", "seqbus.cli"]
        procs: dict[str, subprocess.Popen[bytes]] = {}
        # with --json, stdout carries only the summary object: the nodes talk on stderr
        out_to = sys.stderr if args.json else None

        def node(name: str, target: str) -> None:
            account, instance = name.split("-")
            cmd = [*cli, "node", f"{examples}.exchange.{target}", "-c", str(config), "--rewind"]
            cmd += ["--account", account, "--instance", instance, *path]
            if not multicast:
                cmd += ["--listen", listen[name]]
            procs[name] = subprocess.Popen(cmd, env=env, stdout=out_to)

        def answered() -> int:
            data = _read_json(reports / "progress")
            return int(data["answered"]) if data else 0

        # the gateway, the engines and market data stop by design at the end of the run
        watch = _Watch(procs, time.monotonic() + args.timeout, reports, frozenset(names))

        def wait_for(path: Path, what: str) -> None:
            while not path.exists():
                watch.check(what)
                progress.status(f"orders answered {answered():>8,} / {args.orders:,}")
                time.sleep(0.02)

        takeover: dict[str, Any] = {}
        try:
            for member in status:
                procs[f"sequencer-{member}"] = subprocess.Popen(
                    [*cli, "sequencer", "-c", str(config), "--id", str(member)],
                    env=env,
                    stdout=out_to,
                    preexec_fn=_sequencer_priority,
                )
            while _leader(status, procs) is None:
                watch.check("leader among the sequencers")
                time.sleep(0.01)
            procs["replayer"] = subprocess.Popen(
                [*cli, "replayer", "-c", str(config)], env=env, stdout=out_to
            )
            node("ME-1", "demo_nodes:DemoEngine")
            node("ME-2", "demo_nodes:DemoEngine")
            node("MD-1", "demo_nodes:DemoMarketData")
            node("GW-1", "demo_nodes:DemoGateway")
            progress.event(
                f"sequencer, replayer, gateway GW/1 ({args.orders:,} orders), matching engine "
                "ME/1 with hot backup ME/2, market data MD/1: running"
            )
            wait_for(reports / "ME-1.checkpoint.json", "checkpoint from the primary")
            primary = procs.pop("ME-1")
            primary.kill()  # the primary dies mid-run; the hot backup's commands count now
            primary.wait()
            killed_at = answered()
            progress.event(
                f"checkpoint passed; primary ME/1 killed (kill -9) after "
                f"{killed_at:,} answers; backup ME/2 carries on"
            )
            node("ME-3", "demo_nodes:DemoEngine")  # a late joiner: rewinds, then live
            progress.event("late joiner ME/3 started: rewinding the session")
            # the gateway holds at three quarters (two orders in flight) until released
            kill_sequencer = getattr(args, "sequencer_kill", True)
            if kill_sequencer:
                wait_for(reports / "hold-1", "three quarters of the orders answered")
            # the leading sequencer dies; a standby takes over
            old = _leader(status, procs) if kill_sequencer else None
            if old is not None:
                # the killed member's count of takeovers goes with it: read it first
                killed_takeovers = _takeovers(status, procs).get(old, 0)
                seq_proc = procs.pop(f"sequencer-{old}")
                answers_before = answered()
                seq_proc.kill()
                killed_ns = time.time_ns()
                seq_proc.wait()
                new = None
                while new is None:
                    watch.check("a new leader among the sequencers")
                    new = _leader(status, procs)
                    time.sleep(0.001)
                # the new leader leads once it has sequenced its first message (its Epoch)
                became = None
                while not became or int(became) < killed_ns:
                    watch.check("the new leader's first message")
                    became = (_status(status[new]) or {}).get("cluster", {}).get("last_takeover_ns")
                    time.sleep(0.001)
                takeover = {
                    "killed_takeovers": killed_takeovers,
                    "killed_member": old,
                    "new_leader": new,
                    "killed_ns": killed_ns,
                    "killed_after_answers": answers_before,
                    "became_leader_ns": became,
                }
                progress.event(
                    f"leading sequencer {old} killed (kill -9) after "
                    f"{answers_before:,} answers; sequencer {new} took over"
                )
            (reports / "release-1").write_text("")
            wait_for(reports / "GW-1.json", "end of the order flow")
            procs["GW-1"].wait(10)
            del procs["GW-1"]
            for name in ("ME-2", "ME-3", "MD-1"):  # each saw the end marker
                wait_for(reports / f"{name}.json", f"end marker at {name}")
            progress.event(
                "every order answered; backup, late joiner and market data at the end marker"
            )
            gateway = json.loads((reports / "GW-1.json").read_text())
            final = {
                n: json.loads((reports / f"{n}.json").read_text()) for n in ("ME-2", "ME-3", "MD-1")
            }
            checkpoint = {
                n: json.loads((reports / f"{n}.checkpoint.json").read_text())
                for n in ("ME-1", "ME-2", "ME-3")
            }
            # the replayer's journal (what was published, the archive's source) holds the
            # whole run before anything stops
            from seqbus import _core

            end = max(int(final[n]["last_sequence"]) for n in final)
            while True:
                try:
                    got = int(str(_core.verify_journal(str(workdir / "journal"))["next_sequence"]))
                except Exception:  # noqa: BLE001 - not yet created, or being written
                    got = 0
                if got > end:
                    break
                services = [n for n in procs if n.startswith("sequencer") or n == "replayer"]
                watch.check("the replayer's journal up to the end", services)
                time.sleep(0.01)
            # every leader the run had: the first, the kill's (if any), and any other is an
            # election nobody caused (docs/ha.md, "Failure detection")
            leaders = sum(_takeovers(status, procs).values()) + takeover.pop("killed_takeovers", 0)
            unforced = max(0, leaders - 1 - (1 if takeover else 0))
            if takeover:
                takeover.update(_takeover_times(takeover, gateway))
        except (RuntimeError, TimeoutError, subprocess.TimeoutExpired) as exc:
            progress.event(f"error: {exc}")
            return 1
        finally:
            _stop(list(procs.values()))

        report: list[str] = []
        if getattr(args, "report", True) and not args.json:
            from seqbus.spark.demo_report import archive_and_report

            progress.event("archiving the session and running a Spark report over it")
            report = archive_and_report(
                workdir / "journal", workdir / "session.archive", EXCHANGE_REPORT
            )

    latency = percentiles(gateway["latency_ns"], (50, 90, 99, 99.9, 100))
    for key in ("killed_ns", "became_leader_ns"):
        takeover.pop(key, None)
    check_hashes = {n: c["state_hash"] for n, c in checkpoint.items()}
    check_seqs = {c["last_sequence"] for c in checkpoint.values()}
    final_hashes = {n: final[n]["state_hash"] for n in ("ME-2", "ME-3")}
    equal = len(set(check_hashes.values())) == 1 and len(check_seqs) == 1
    equal = equal and len(set(final_hashes.values())) == 1
    summary: dict[str, Any] = {
        "transport": "udp-multicast" if multicast else "udp-unicast",
        "idle": args.idle,
        "orders": gateway["orders"],
        "answered": gateway["answered"],
        "lost_orders": gateway["lost"],
        "accepted": gateway["accepted"],
        "rejected": gateway["rejected"],
        "cancelled": gateway["cancelled"],
        "trades": gateway["trades"],
        "elapsed_s": round(gateway["elapsed_s"], 3),
        "orders_per_s": round(gateway["orders"] / gateway["elapsed_s"]),
        "order_to_answer_us": {k: round(v, 1) for k, v in latency.items()},
        "primary_killed_after_answers": killed_at,
        "checkpoint_sequence": min(check_seqs),
        "checkpoint_state_hash": {
            "primary": check_hashes["ME-1"],
            "backup": check_hashes["ME-2"],
            "late_joiner": check_hashes["ME-3"],
        },
        "final_state_hash": {"backup": final_hashes["ME-2"], "late_joiner": final_hashes["ME-3"]},
        "sequencer_takeover": takeover,
        "unforced_elections": unforced,
        # what loss recovery cost at the nodes that ran from the start (the late joiner's
        # rewind is history, not recovery)
        "recovery": {
            key: sum(
                int(r.get("bus", {}).get(field, 0)) for r in (gateway, final["ME-2"], final["MD-1"])
            )
            for key, field in (
                ("retransmitted_messages", "retransmits"),
                ("resent_commands", "resent"),
                ("naks", "naks"),
                ("probes", "probes"),
                ("gap_requests", "requests"),
                ("gaps", "gaps"),
            )
        },
        # what the late joiner's rewind received for what it delivered (duplicates and the
        # live stream it held while rewinding included)
        "late_joiner": {
            key: int(final["ME-3"].get("bus", {}).get(field, 0))
            for key, field in (
                ("received", "received"),
                ("delivered", "delivered"),
                ("retransmitted_messages", "retransmits"),
                ("duplicates", "duplicates"),
                ("gap_requests", "requests"),
                ("reorder_dropped", "reorder_dropped"),
            )
        },
        "final_sequence": final["ME-2"]["last_sequence"],
        "market_data_updates": final["MD-1"]["updates"],
        "hashes_equal": equal,
        "notes": notes,
    }
    ok = equal and summary["lost_orders"] == 0 and summary["answered"] == summary["orders"]
    if args.json:
        print(json.dumps(summary))
        return 0 if ok else 1
    print(f"transport        {summary['transport']}, idle strategy {args.idle}")
    print(
        f"orders           {summary['orders']:,} sent, {summary['answered']:,} answered, "
        f"{summary['lost_orders']} lost (accepted {summary['accepted']:,}, rejected "
        f"{summary['rejected']:,}); {summary['cancelled']:,} cancels, "
        f"{summary['trades']:,} trades"
    )
    print(
        f"throughput       {summary['orders_per_s']:,} orders/s "
        f"({summary['elapsed_s']} s, one gateway, 32 orders in flight)"
    )
    print(
        "order → answer   "
        + "  ".join(f"{k}={v:.1f}µs" for k, v in latency.items())
        + "  (gateway → sequencer → engine → sequencer → gateway)"
    )
    print(
        f"failover         primary ME/1 killed after {killed_at:,} answers; "
        "backup ME/2 took over with no gap"
    )
    if takeover:
        print(
            f"sequencer        leader {takeover['killed_member']} killed (kill -9) after "
            f"{takeover['killed_after_answers']:,} answers; sequencer {takeover['new_leader']} "
            f"took over: its first message {takeover['takeover_ms']:.1f} ms after the kill, "
            f"the first order answered {takeover['first_answer_ms']:.1f} ms after it"
        )
    print(
        f"elections        {unforced} that no kill caused (a leader taken for dead while "
        "alive: docs/ha.md)"
    )
    print(
        f"state hash       at checkpoint (sequence {summary['checkpoint_sequence']:,}): "
        f"primary {check_hashes['ME-1']}"
    )
    print(f"                 backup {check_hashes['ME-2']}  late joiner {check_hashes['ME-3']}")
    print(
        f"                 at the end (sequence {summary['final_sequence']:,}): "
        f"backup {final_hashes['ME-2']}  late joiner {final_hashes['ME-3']}"
    )
    print("                 " + ("all equal" if equal else "DIFFERENT"))
    print(f"market data      {summary['market_data_updates']:,} book updates published")
    for line in report:
        print(line)
    return 0 if ok else 1


def _takeover_times(takeover: dict[str, Any], gateway: dict[str, Any]) -> dict[str, float]:
    """How long the bus stood still: from the kill to the new leader's first message (its
    ``Epoch``, sequenced when it took over: its status endpoint's ``last_takeover_ns``), and
    to the first answer the gateway saw of those the new leader sequenced — the answers whose
    sequencer time is past the kill (the clocks are the same host's). An answer the old
    leader sequenced can reach the gateway after the kill; it does not count."""
    killed = int(takeover["killed_ns"])
    became = int(takeover.get("became_leader_ns") or 0)
    answered_after = [
        seen
        for seen, stamped in zip(
            gateway.get("answered_at_ns", []), gateway.get("answered_sequencer_ns", []), strict=True
        )
        if stamped >= killed
    ]
    return {
        "takeover_ms": round((became - killed) / 1e6, 2) if became else float("nan"),
        "first_answer_ms": round((min(answered_after) - killed) / 1e6, 2)
        if answered_after
        else float("nan"),
    }


#: The report the exchange demo runs over its archive: schemas and the latency pair.
EXCHANGE_REPORT = (("bus", "exchange"), ("exchange.NewOrder", "exchange.OrderAccepted", "order_id"))


#: The report the ping-pong demo runs over its archive.
PINGPONG_REPORT = (("bus", "pingpong"), ("pingpong.Ping", "pingpong.Pong", "id"))


def main(args: argparse.Namespace) -> int:
    notes: list[str] = []
    if args.timeout is None:  # a run of 300,000 orders takes minutes on a loaded machine
        args.timeout = 120.0 + (args.orders if args.exchange else args.count) / 500
    in_netns = os.environ.get(NETNS_ENV) == "1"
    if not args.unicast and not in_netns:
        _reexec_in_netns(_argv(args))  # returns only when no namespace could be made
        notes.append("no private network namespace could be made: using UDP unicast")
    multicast = not args.unicast and in_netns
    for note in notes:
        print(f"seqbus demo: {note}", file=sys.stderr)
    if args.exchange:
        return exchange(args, multicast, notes)
    examples, path = _examples()  # the ping-pong nodes are examples/pingpong/nodes.py

    with _workdir(args, "seqbus-demo-") as workdir:
        config = workdir / "bus.toml"
        cli = [sys.executable, "-m", "seqbus.cli"]
        listen = {n: f"127.0.0.1:{free_udp_port()}" for n in ("PONGER", "PINGER")}
        config.write_text(bus_config(workdir, multicast, list(listen.values()), args.idle))

        def node(target: str, account: str, *extra: str) -> list[str]:
            args = [
                *cli,
                "node",
                f"{examples}.{target}",
                "-c",
                str(config),
                "--account",
                account,
                *path,
                *extra,
            ]
            return args if multicast else [*args, "--listen", listen[account]]

        out = workdir / "summary.json"
        env = dict(os.environ, SEQBUS_DEMO_COUNT=str(args.count), SEQBUS_DEMO_OUT=str(out))
        procs: list[subprocess.Popen[bytes]] = []
        try:
            # with --json, stdout carries only the summary object: the nodes talk on stderr
            out_to = sys.stderr if args.json else None
            procs.append(
                subprocess.Popen([*cli, "sequencer", "-c", str(config)], env=env, stdout=out_to)
            )
            procs.append(
                subprocess.Popen(
                    node("pingpong.nodes:Ponger", "PONGER", "--rewind"),
                    env=env,
                    stdout=out_to,
                )
            )
            pinger = subprocess.Popen(
                node("pingpong.nodes:Pinger", "PINGER"), env=env, stdout=out_to
            )
            procs.append(pinger)
            watch = _Watch(
                {"sequencer": procs[0], "ponger": procs[1]}, time.monotonic() + args.timeout
            )
            while pinger.poll() is None:
                watch.check(f"result within {args.timeout} s")
                time.sleep(0.05)
            if pinger.returncode != 0 or not out.exists():
                raise RuntimeError(f"the pinger exited with status {pinger.returncode}")
            result: dict[str, Any] = json.loads(out.read_text())
        except (RuntimeError, TimeoutError) as exc:
            print(f"seqbus demo: error: {exc}", file=sys.stderr)
            return 1
        finally:
            _stop(procs)

        # The final step: archive this run's journal and run a Spark report over it (not in
        # --json mode, whose stdout is one JSON object).
        report: list[str] = []
        if getattr(args, "report", True) and not args.json:
            from seqbus.spark.demo_report import archive_and_report

            report = archive_and_report(
                workdir / "journal", workdir / "session.archive", PINGPONG_REPORT
            )

    rtts: list[int] = result["rtt_ns"]
    summary = {
        "transport": "udp-multicast" if multicast else "udp-unicast",
        "idle": args.idle,
        "round_trips": result["round_trips"],
        "elapsed_s": round(result["elapsed_s"], 3),
        "messages_per_s": round(2 * result["round_trips"] / result["elapsed_s"]),
        "rtt_us": {k: round(v, 1) for k, v in percentiles(rtts, (50, 90, 99, 99.9, 100)).items()},
        "notes": notes,
    }
    if args.json:
        print(json.dumps(summary))
    else:
        print(f"transport      {summary['transport']}")
        print(f"idle strategy  {summary['idle']} (sequencer and nodes; --idle to change)")
        print(f"round trips    {summary['round_trips']} in {summary['elapsed_s']} s")
        print(f"messages/s     {summary['messages_per_s']} (Ping + Pong, sequenced)")
        rtt = summary["rtt_us"]
        assert isinstance(rtt, dict)
        print("round trip µs  " + "  ".join(f"{k}={v}" for k, v in rtt.items()))
        for line in report:
            print(line)
    return 0
