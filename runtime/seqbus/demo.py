"""``seqbus demo``: a sequencer and two Python nodes ping-ponging through it.

Multicast needs a private network namespace; the demo re-executes itself inside one
(``unshare -n``, ``-rn`` when not root, loopback brought up) unless it already runs in one
(``SEQBUS_IN_NETNS=1``), and falls back to UDP unicast, saying so, when none can be made. It
starts every process itself and kills each by its PID at the end, on error and on Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
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


def free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def bus_config(
    workdir: Path, multicast: bool, subscribers: list[str], idle: str = "block"
) -> str:
    """The demo bus (keys: docs/configuration.md): one sequencer on loopback, journal in
    ``workdir``, a replayer beside it; ``subscribers`` are the nodes' unicast addresses;
    ``idle`` the idle strategy of the sequencer and the nodes."""
    upstream, downstream, replayer = free_udp_port(), free_udp_port(), free_udp_port()
    if multicast:
        down = f'transport = "udp-multicast"\ngroup = "239.7.7.7:{downstream}"\n'
        down += 'interface = "127.0.0.1"'
    else:
        down = 'transport = "udp-unicast"\nsubscribers = ['
        down += ", ".join(f'"{a}"' for a in subscribers) + "]"
    return f"""\
[bus]
session = "DEMO000001"

[sequencer]
upstream = "127.0.0.1:{upstream}"
journal_dir = "{workdir / "journal"}"
idle = "{idle}"

[downstream]
{down}

[replayer]
listen = "127.0.0.1:{replayer}"

[node]
replayers = ["127.0.0.1:{replayer}"]
idle = "{idle}"
"""


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


def _argv(args: argparse.Namespace) -> list[str]:
    argv = ["demo", "--count", str(args.count), "--timeout", str(args.timeout)]
    argv += ["--idle", args.idle]
    if not getattr(args, "report", True):
        argv.append("--no-report")
    if args.json:
        argv.append("--json")
    if args.unicast:
        argv.append("--unicast")
    argv += ["--exchange", "--orders", str(args.orders)] if args.exchange else ["--pingpong"]
    return argv


def _check(procs: dict[str, subprocess.Popen[bytes]], deadline: float, what: str) -> None:
    """Fail when a process of ``procs`` has exited or the deadline has passed."""
    for name, proc in procs.items():
        if proc.poll() is not None:
            raise RuntimeError(f"the {name} exited with status {proc.returncode}")
    if time.monotonic() > deadline:
        raise TimeoutError(f"no {what} before the timeout")


def _wait_for(path: Path, procs: dict[str, subprocess.Popen[bytes]], deadline: float) -> None:
    """Wait until ``path`` exists, failing when a process of ``procs`` died or time ran out."""
    while not path.exists():
        _check(procs, deadline, path.name)
        time.sleep(0.02)


def exchange(args: argparse.Namespace, multicast: bool, notes: list[str]) -> int:
    """Sequencer (with its replayer), gateway, matching engine primary and hot backup, market
    data; the primary is killed mid-run, then a late joiner rewinds the session. Prints
    throughput, latency percentiles and the engines' state hashes."""
    root = Path.cwd()
    if not (root / "examples" / "exchange" / "engine.py").exists():
        print(
            "seqbus demo --exchange: run it from the repository root (needs examples/)",
            file=sys.stderr,
        )
        return 1
    names = ["ME-1", "ME-2", "MD-1", "GW-1", "ME-3"]
    with tempfile.TemporaryDirectory(prefix="seqbus-exchange-") as tmp:
        workdir = Path(tmp)
        reports = workdir / "reports"
        reports.mkdir()
        listen = {n: f"127.0.0.1:{free_udp_port()}" for n in names}
        config = workdir / "bus.toml"
        config.write_text(bus_config(workdir, multicast, list(listen.values()), args.idle))
        env = dict(os.environ, EXCHANGE_REPORT_DIR=str(reports), EXCHANGE_ORDERS=str(args.orders))
        cli = [sys.executable, "-m", "seqbus.cli"]
        procs: dict[str, subprocess.Popen[bytes]] = {}
        # with --json, stdout carries only the summary object: the nodes talk on stderr
        out_to = sys.stderr if args.json else None

        def node(name: str, target: str, *extra: str) -> None:
            account, instance = name.split("-")
            cmd = [*cli, "node", f"examples.exchange.{target}", "-c", str(config)]
            cmd += ["--account", account, "--instance", instance, "--path", str(root), *extra]
            if not multicast:
                cmd += ["--listen", listen[name]]
            procs[name] = subprocess.Popen(cmd, env=env, stdout=out_to)

        deadline = time.monotonic() + args.timeout
        try:
            procs["sequencer"] = subprocess.Popen(
                [*cli, "sequencer", "-c", str(config)], env=env, stdout=out_to
            )
            node("ME-1", "demo_nodes:DemoEngine", "--rewind")
            node("ME-2", "demo_nodes:DemoEngine", "--rewind")
            node("MD-1", "market_data:MarketDataPublisher", "--rewind")
            node("GW-1", "demo_nodes:DemoGateway", "--rewind")
            progress = reports / "progress"
            answered = 0
            while answered < args.orders // 2:
                _wait_for(progress, procs, deadline)
                _check(procs, deadline, "progress")
                try:
                    answered = int(json.loads(progress.read_text())["answered"])
                except (ValueError, KeyError):
                    answered = 0
                time.sleep(0.01)
            primary = procs["ME-1"]
            primary.kill()  # the primary dies mid-run; the hot backup's commands count now
            primary.wait()
            alive = {k: v for k, v in procs.items() if k != "ME-1"}
            killed_at = answered
            _wait_for(reports / "GW-1.json", alive, deadline)
            procs["GW-1"].wait(10)
            del alive["GW-1"]
            _wait_for(reports / "ME-2.json", alive, deadline)  # the backup saw the end marker
            node("ME-3", "demo_nodes:DemoEngine", "--rewind")  # a late joiner
            _wait_for(reports / "ME-3.json", {**alive, "late joiner": procs["ME-3"]}, deadline)
            procs["ME-3"].wait(10)
            gateway = json.loads((reports / "GW-1.json").read_text())
            backup_state = json.loads((reports / "ME-2.json").read_text())
            late_state = json.loads((reports / "ME-3.json").read_text())
        except (RuntimeError, TimeoutError, subprocess.TimeoutExpired) as exc:
            print(f"seqbus demo: error: {exc}", file=sys.stderr)
            return 1
        finally:
            _stop(list(procs.values()))

    latency = percentiles(gateway["latency_ns"], (50, 90, 99, 99.9, 100))
    summary: dict[str, Any] = {
        "transport": "udp-multicast" if multicast else "udp-unicast",
        "orders": gateway["orders"],
        "answered": gateway["answered"],
        "lost_orders": gateway["lost"],
        "accepted": gateway["accepted"],
        "rejected": gateway["rejected"],
        "trades": gateway["trades"],
        "orders_per_s": round(gateway["orders"] / gateway["elapsed_s"]),
        "order_to_answer_us": {k: round(v, 1) for k, v in latency.items()},
        "primary_killed_after_answers": killed_at,
        "backup_state_hash": backup_state["state_hash"],
        "late_joiner_state_hash": late_state["state_hash"],
        "hashes_equal": backup_state["state_hash"] == late_state["state_hash"],
        "notes": notes,
    }
    if args.json:
        print(json.dumps(summary))
    else:
        print(f"transport        {summary['transport']}")
        print(
            f"orders           {summary['orders']} answered {summary['answered']}, "
            f"lost {summary['lost_orders']} (accepted {summary['accepted']}, "
            f"rejected {summary['rejected']}, trades {summary['trades']})"
        )
        print(f"throughput       {summary['orders_per_s']} orders/s")
        print("order → answer   " + "  ".join(f"{k}={v}µs" for k, v in latency.items()))
        print(f"failover         primary ME/1 killed after {killed_at} answers; ME/2 took over")
        print(f"state hash       backup ME/2   {summary['backup_state_hash']}")
        print(f"state hash       late ME/3     {summary['late_joiner_state_hash']}")
        print("                 " + ("equal" if summary["hashes_equal"] else "DIFFERENT"))
    return 0 if summary["hashes_equal"] and summary["lost_orders"] == 0 else 1


def main(args: argparse.Namespace) -> int:
    notes: list[str] = []
    in_netns = os.environ.get(NETNS_ENV) == "1"
    if not args.unicast and not in_netns:
        _reexec_in_netns(_argv(args))  # returns only when no namespace could be made
        notes.append("no private network namespace could be made: using UDP unicast")
    multicast = not args.unicast and in_netns
    for note in notes:
        print(f"seqbus demo: {note}", file=sys.stderr)
    if args.exchange:
        return exchange(args, multicast, notes)

    with tempfile.TemporaryDirectory(prefix="seqbus-demo-") as tmp:
        workdir = Path(tmp)
        config = workdir / "bus.toml"
        cli = [sys.executable, "-m", "seqbus.cli"]
        listen = {n: f"127.0.0.1:{free_udp_port()}" for n in ("PONGER", "PINGER")}
        config.write_text(bus_config(workdir, multicast, list(listen.values()), args.idle))

        def node(target: str, account: str, *extra: str) -> list[str]:
            args = [*cli, "node", target, "-c", str(config), "--account", account, *extra]
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
                    node("seqbus.demo_nodes:Ponger", "PONGER", "--rewind"), env=env, stdout=out_to
                )
            )
            pinger = subprocess.Popen(
                node("seqbus.demo_nodes:Pinger", "PINGER"), env=env, stdout=out_to
            )
            procs.append(pinger)
            deadline = time.monotonic() + args.timeout
            while pinger.poll() is None:
                for name, proc in zip(("sequencer", "ponger"), procs, strict=False):
                    if proc.poll() is not None:
                        raise RuntimeError(f"the {name} exited with status {proc.returncode}")
                if time.monotonic() > deadline:
                    raise TimeoutError(f"no result after {args.timeout} s")
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

            report = archive_and_report(workdir / "journal", workdir / "session.archive")

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
