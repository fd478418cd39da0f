"""Beyond one LAN (docs/sites.md), measured against baselines of the same run:

* **bridge latency**: a command's round trip (send → seen in the stream) from a node at site B
  (commands to the bridge, the stream from site B's multicast, which the bridge republishes)
  beside a node logged in directly to the same first-tier replayer's SoupBinTCP server, and a
  node on site A's own multicast: the bridge's added latency is the difference.
* **bridge throughput**: how fast a new bridge catches up a session (its journal complete,
  every message republished on site B's multicast) beside a plain SoupBinTCP client of the same
  replayer that only journals what it reads (a second-tier replayer); timed from the first
  byte each journals (and, printed beside, from its process's start).
* **MAC cost**: the round trip and a sender's command rate on a bus with ``[auth]`` beside a
  bus of the same shape (a sequencer, nothing following it) without keys.

Both sites run on this host's loopback (site B on its own multicast group). Nodes are the
Python SDK's ``NodeClient`` with the hybrid idle strategy; the sequencers, replayer and bridge
are ``seqbus`` processes. Run inside a private network namespace (``make bench``):
``python -m benchmarks.sites [--quick]``.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from seqbus import _core
from seqbus.demo import free_tcp_port as tcp, free_udp_port as udp
from seqbus.errors import BackPressureError

ROOT = Path(__file__).resolve().parents[1]
KEY = "5a" * 32
SESSION = "BENCH00001"
CREDS = """
[tcp]
credentials = [{ username = "bench", password = "bench" }]
username = "bench"
password = "bench"
"""


def bus(
    d: Path,
    *,
    group: str,
    journal: str,
    upstream: int,
    replayer: int,
    extra: str = "",
    session: str = SESSION,
) -> str:
    return f"""
[bus]
session = "{session}"
[sequencer]
upstream = "127.0.0.1:{upstream}"
journal_dir = "{d / journal}"
clock_tick_ms = 0
[downstream]
transport = "udp-multicast"
group = "{group}"
[replayer]
listen = "127.0.0.1:{replayer}"
[node]
replayers = ["127.0.0.1:{replayer}"]
{extra}
"""


def percentiles(xs: list[int]) -> dict[str, float]:
    s = sorted(xs)
    at = lambda q: s[min(len(s) - 1, int(q * len(s)))] / 1000  # noqa: E731
    return {
        "p50_us": at(0.5),
        "p90_us": at(0.9),
        "p99_us": at(0.99),
        "mean_us": statistics.fmean(s) / 1000,
    }


def mine(batch: bytes, account: bytes) -> list[int]:
    """Command sequences of this account's messages in a batch."""
    out = []
    at = 0
    while at < len(batch):
        length = int.from_bytes(batch[at : at + 4], "little")
        if (
            int.from_bytes(batch[at + 4 : at + 6], "little") == 1
            and batch[at + 32 : at + 40] == account
        ):
            out.append(int.from_bytes(batch[at + 24 : at + 32], "little"))
        at += length
    return out


BODY = (
    (16).to_bytes(2, "little")
    + (1).to_bytes(2, "little")
    + (9).to_bytes(2, "little")
    + (1).to_bytes(2, "little")
    + bytes(16)
)


def round_trips(cfg: Path, account: str, count: int) -> list[int]:
    c = _core.NodeClient(str(cfg), account, 1, start="live")
    deadline = time.monotonic() + 20
    while not c.is_ready():
        if time.monotonic() > deadline:
            raise SystemExit(f"{cfg}: no SenderState")
        c.poll(64, 0.005)
    key = account.encode().ljust(8, b"\0")
    out = []
    for _ in range(count + count // 10):
        t0 = time.perf_counter_ns()
        seq = c.send(BODY)
        while seq not in mine(c.poll(64, 0.05), key):
            pass
        out.append(time.perf_counter_ns() - t0)
    c.close()
    return out[count // 10 :]  # the first tenth warms up


def send_rate(cfg: Path, account: str, count: int) -> float:
    """Commands per second one sender gets sequenced (send → all seen in the stream)."""
    c = _core.NodeClient(str(cfg), account, 1, start="live")
    while not c.is_ready():
        c.poll(64, 0.005)
    key = account.encode().ljust(8, b"\0")
    t0 = time.perf_counter()
    sent = last = 0
    while last < count:
        while sent < count:
            try:
                c.send(BODY)
                sent += 1
            except BackPressureError:
                break
        last += len(mine(c.poll(4096, 0.001), key))
    rate = count / (time.perf_counter() - t0)
    c.close()
    return rate


def wait(cond: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out: {what}")
        time.sleep(0.001)


def journal_len(d: Path) -> int:
    return sum(p.stat().st_size for p in d.glob("*.seg"))


def catch_up(
    journal: Path, total: int, start: Callable[[], object], what: str
) -> tuple[float, float]:
    """Starts a process that fills ``journal`` up to ``total`` bytes; returns the seconds from
    its start, and from the first byte it journaled (its start-up and login left out)."""
    t0 = time.perf_counter()
    start()
    wait(lambda: journal_len(journal) > 0, 60, what)
    t1 = time.perf_counter()
    wait(lambda: journal_len(journal) >= total, 300, what)
    t2 = time.perf_counter()
    return t2 - t0, t2 - t1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.sites", description=__doc__)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--count", type=int, default=5000, help="round trips per path")
    ap.add_argument("--messages", type=int, default=1_000_000, help="messages of the catch-up")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if args.quick:
        args.count, args.messages = 1000, 100_000
    cli = [sys.executable, "-m", "seqbus.cli"]
    procs: list[subprocess.Popen[bytes]] = []

    def start(*a: str) -> subprocess.Popen[bytes]:
        p = subprocess.Popen(
            [*cli, *a],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        procs.append(p)
        return p

    results: dict[str, object] = {}
    with tempfile.TemporaryDirectory(prefix="seqbus-bench-sites-") as tmp:
        d = Path(tmp)
        try:
            # site A: sequencer, a first-tier replayer serving SoupBinTCP
            a_up, a_rep, t1_rep, t1_tcp = udp(), udp(), udp(), tcp()
            a_group = f"239.8.1.1:{udp()}"
            a = d / "a.toml"
            a.write_text(bus(d, group=a_group, journal="journal", upstream=a_up, replayer=a_rep))
            t1 = d / "t1.toml"
            t1.write_text(
                bus(
                    d, group=a_group, journal="journal", upstream=a_up, replayer=t1_rep, extra=CREDS
                ).replace(
                    "[replayer]\n",
                    f'[replayer]\nfollow = true\njournal_dir = "{d / "journal-t1"}"\n'
                    f'sources = ["127.0.0.1:{a_rep}"]\ntcp_listen = "127.0.0.1:{t1_tcp}"\n',
                )
            )
            # a node logged in to the replayer directly over SoupBinTCP
            direct = d / "direct.toml"
            direct.write_text(
                bus(
                    d, group=a_group, journal="journal", upstream=a_up, replayer=t1_rep, extra=CREDS
                )
                .replace('transport = "udp-multicast"', 'transport = "tcp"')
                .replace("[tcp]\n", f'[tcp]\nconnect = "127.0.0.1:{t1_tcp}"\n')
            )
            # site B: the bridge
            b_up, b_rep = udp(), udp()
            b = d / "b.toml"
            b.write_text(
                bus(
                    d,
                    group=f"239.8.2.1:{udp()}",
                    journal="unused",
                    upstream=b_up,
                    replayer=b_rep,
                    extra=CREDS
                    + f'\n[bridge]\nchannels = ["127.0.0.1:{t1_tcp}"]\njournal_dir = "{d / "journal-bridge"}"\n',
                )
            )
            # a second bus with keys, for the MAC's cost
            k_up, k_rep = udp(), udp()
            k = d / "k.toml"
            k.write_text(
                bus(
                    d,
                    group=f"239.8.3.1:{udp()}",
                    journal="journal-k",
                    upstream=k_up,
                    replayer=k_rep,
                    session="BENCHKEYS",
                    extra=f'\n[auth]\naccounts = [{{ account = "PING", key = "{KEY}" }}, {{ account = "RATE", key = "{KEY}" }}]\n',
                )
            )
            # its baseline: a bus of the same shape without keys (site A's bus has a following
            # replayer and a bridge to feed, the keyed one has not)
            o_up, o_rep = udp(), udp()
            o = d / "o.toml"
            o.write_text(
                bus(
                    d,
                    group=f"239.8.4.1:{udp()}",
                    journal="journal-o",
                    upstream=o_up,
                    replayer=o_rep,
                    session="BENCHOPEN",
                )
            )
            start("sequencer", "-c", str(a))
            start("sequencer", "-c", str(k))
            start("sequencer", "-c", str(o))
            start("replayer", "-c", str(t1))
            start("bridge", "-c", str(b))
            time.sleep(0.5)
            paths = {
                "site A multicast (UDP)": a,
                "direct SoupBinTCP to the replayer": direct,
                "site B through the bridge": b,
            }
            rtt: dict[str, list[int]] = {n: [] for n in paths}
            # interleaved rounds, so that drift of the machine falls on every path alike
            rounds = 5
            for r in range(rounds):
                for name, cfg in paths.items():
                    rtt[name] += round_trips(
                        cfg, f"RT{r}{list(paths).index(name)}", args.count // rounds
                    )
            results["round_trip"] = {n: percentiles(v) for n, v in rtt.items()}
            base = results["round_trip"]["direct SoupBinTCP to the replayer"]  # type: ignore[index]
            via = results["round_trip"]["site B through the bridge"]  # type: ignore[index]
            results["bridge_added_p50_us"] = via["p50_us"] - base["p50_us"]
            # catch-up: history of N messages, then a direct client rewinds it and a new bridge
            # fills its journal from the same replayer
            rate_cfg = a
            c = _core.NodeClient(str(rate_cfg), "HIST", 1, start="live")
            while not c.is_ready():
                c.poll(64, 0.005)
            sent = 0
            while sent < args.messages:
                try:
                    c.send(BODY)
                    sent += 1
                except BackPressureError:
                    c.poll(4096, 0.001)
            while c.stats()["in_flight"]:
                c.poll(4096, 0.01)
            c.close()
            wait(
                lambda: journal_len(d / "journal-t1") >= journal_len(d / "journal"),
                60,
                "the replayer",
            )
            total = journal_len(d / "journal")
            # a second-tier replayer: a SoupBinTCP client that only journals what it reads
            t2 = d / "t2.toml"
            t2.write_text(
                bus(
                    d, group=a_group, journal="journal", upstream=a_up, replayer=udp(), extra=CREDS
                ).replace(
                    "[replayer]\n",
                    f'[replayer]\nfollow = true\njournal_dir = "{d / "journal-t2"}"\n'
                    f'follow_tcp = ["127.0.0.1:{t1_tcp}"]\n',
                )
            )
            direct_all, direct_s = catch_up(
                d / "journal-t2", total, lambda: start("replayer", "-c", str(t2)), "the second tier"
            )
            b2 = d / "b2.toml"
            b2.write_text(
                b.read_text()
                .replace(str(d / "journal-bridge"), str(d / "journal-bridge2"))
                .replace(f"127.0.0.1:{b_up}", f"127.0.0.1:{udp()}")
                .replace(f"127.0.0.1:{b_rep}", f"127.0.0.1:{udp()}")
            )
            bridge_all, bridge_s = catch_up(
                d / "journal-bridge2",
                total,
                lambda: start("bridge", "-c", str(b2)),
                "the new bridge",
            )
            msgs = args.messages
            results["catch_up"] = {
                "messages": msgs,
                "SoupBinTCP client journaling it (a second-tier replayer), msgs/s": msgs / direct_s,
                "new bridge: journal and republish on multicast, msgs/s": msgs / bridge_s,
                "the same two, start-up and login included, msgs/s": (
                    msgs / direct_all,
                    msgs / bridge_all,
                ),
            }
            # the MAC: round trips and a sender's rate, keys on beside keys off
            mac: dict[str, list[int]] = {"keys off": [], "keys on": []}
            rates: dict[str, list[float]] = {"keys off": [], "keys on": []}
            for _ in range(rounds):
                mac["keys off"] += round_trips(o, "PING", args.count // rounds)
                # a new client is a new start of its sender: a later boot, a fresh window
                mac["keys on"] += round_trips(k, "PING", args.count // rounds)
            for _ in range(3):
                rates["keys off"].append(send_rate(o, "RATE", args.messages // 4))
                rates["keys on"].append(send_rate(k, "RATE", args.messages // 4))
            results["mac"] = {
                "round_trip": {n: percentiles(v) for n, v in mac.items()},
                "commands_per_s_median": {n: statistics.median(v) for n, v in rates.items()},
            }
        finally:
            for p in procs:
                if p.poll() is None:
                    os.killpg(p.pid, signal.SIGTERM)
            for p in procs:
                try:
                    p.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    os.killpg(p.pid, signal.SIGKILL)
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(
        "round trip of a command (send -> seen in the stream), Python NodeClient, idle hybrid, µs"
    )
    print(f"  {'path':40} {'p50':>8} {'p90':>8} {'p99':>8}")
    for name, p in results["round_trip"].items():  # type: ignore[attr-defined]
        print(f"  {name:40} {p['p50_us']:8.1f} {p['p90_us']:8.1f} {p['p99_us']:8.1f}")
    print(
        f"  the bridge adds {results['bridge_added_p50_us']:.1f} µs at the median over the direct SoupBinTCP client"
    )
    cu = results["catch_up"]
    print(f"catch-up of {cu['messages']:,} messages from the replayer:")  # type: ignore[index]
    for k_, v in cu.items():  # type: ignore[attr-defined]
        if isinstance(v, tuple):
            print(f"  {k_:66} {v[0]:12,.0f} {v[1]:12,.0f}")
        elif k_ != "messages":
            print(f"  {k_:66} {v:12,.0f}")
    m = results["mac"]
    print("MAC (BLAKE3 keyed, 128-bit tag) beside keys off:")
    for name, p in m["round_trip"].items():  # type: ignore[index]
        print(
            f"  round trip {name:10} p50 {p['p50_us']:8.1f}  p90 {p['p90_us']:8.1f}  p99 {p['p99_us']:8.1f} µs"
        )
    for name, v in m["commands_per_s_median"].items():  # type: ignore[index]
        print(f"  one sender, {name:10} {v:12,.0f} commands/s (median of 3)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
