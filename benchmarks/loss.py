"""The exchange under packet loss: ``python -m benchmarks.loss [--orders N] [--loss 0,1,5,20]``.

Each run is ``seqbus demo --no-sequencer-kill`` (the exchange: three sequencers, gateway,
matching engine and hot backup, market data, a late joiner; the primary engine is killed at
half way, the sequencers are left alone so that the latencies show loss recovery, not a
takeover) in a private network namespace of its own where nftables drops the given percent of
every UDP datagram (downstream, upstream, replayer and sequencer-to-sequencer traffic alike).
The lossless run of the same invocation is the baseline: orders/s and order → answer p50/p99
beside it, what recovery cost — messages retransmitted (replayer answers) and commands
resent per datagram lost — and what the late joiner's rewind received per message of the
stream (its duplicates included). Every run must lose no order and end with equal state hashes.
Not a test: numbers depend on the machine; read the ratios.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
from typing import Any

INNER = r"""
set -e
ip link set lo up
if [ "$LOSS" != 0 ]; then
  nft add table inet loss
  nft add chain inet loss in '{ type filter hook input priority 0; }'
  nft add rule inet loss in meta l4proto udp numgen random mod 100 '<' "$LOSS" counter drop
fi
set +e
"$@" > "$OUT"
code=$?
if [ "$LOSS" != 0 ]; then nft list table inet loss > "$OUT.nft"; fi
exit $code
"""


def run(loss: int, orders: int, idle: str, workdir: str) -> dict[str, Any]:
    out = os.path.join(workdir, f"loss{loss}.json")
    cmd = [
        sys.executable,
        "-m",
        "seqbus.cli",
        "demo",
        "--json",
        "--orders",
        str(orders),
        "--no-report",
        "--idle",
        idle,
        "--timeout",
        "600",
        "--no-sequencer-kill",
    ]
    env = dict(os.environ, SEQBUS_IN_NETNS="1", LOSS=str(loss), OUT=out)
    flags = ["-n"] if os.geteuid() == 0 else ["-r", "-n"]
    proc = subprocess.run(
        ["unshare", *flags, "--", "bash", "-c", INNER, "_", *cmd],
        env=env,
        stderr=subprocess.PIPE,
        text=True,
        check=False,
        timeout=900,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{loss}% loss: the demo failed:\n{proc.stderr[-3000:]}")
    with open(out) as f:
        summary: dict[str, Any] = json.load(f)
    dropped = 0
    if loss:
        with open(out + ".nft") as f:
            for line in f:
                if "counter packets" in line:
                    dropped = int(line.split("counter packets")[1].split()[0])
    summary["datagrams_dropped"] = dropped
    return summary


def _median_run(rs: list[dict[str, Any]]) -> dict[str, Any]:
    """One row of medians over the runs of one loss rate; lost orders summed, hashes equal
    only if equal in every run."""

    def med(values: list[float]) -> float:
        return float(statistics.median(values))

    return {
        "orders_per_s": med([r["orders_per_s"] for r in rs]),
        "order_to_answer_us": {
            k: med([r["order_to_answer_us"][k] for r in rs]) for k in ("p50", "p99")
        },
        "recovery": {
            k: med([r["recovery"][k] for r in rs])
            for k in ("retransmitted_messages", "resent_commands")
        },
        "datagrams_dropped": int(med([r["datagrams_dropped"] for r in rs])),
        # the late joiner's rewind: messages received per message of the stream it walked
        "late_joiner_ratio": med(
            [r["late_joiner"]["received"] / max(1, r["final_sequence"]) for r in rs]
        ),
        "late_joiner_duplicates": med([r["late_joiner"]["duplicates"] for r in rs]),
        "lost_orders": sum(r["lost_orders"] for r in rs),
        "hashes_equal": all(r["hashes_equal"] for r in rs),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.loss", description=__doc__)
    ap.add_argument("--orders", type=int, default=20000)
    ap.add_argument(
        "--repeat",
        type=int,
        default=3,
        help="runs per loss rate, interleaved; the table shows the median of each column",
    )
    ap.add_argument("--loss", default="0,1,5,20", help="loss rates in percent (0 first)")
    ap.add_argument("--idle", default="hybrid")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    if shutil.which("nft") is None or shutil.which("unshare") is None:
        print("benchmarks.loss: needs nft and unshare (scripts/system-deps.sh)", file=sys.stderr)
        return 1
    import tempfile

    rates = [int(x) for x in args.loss.split(",")]
    runs: dict[int, list[dict[str, Any]]] = {loss: [] for loss in rates}
    load = [os.getloadavg()[0]]
    with tempfile.TemporaryDirectory(prefix="seqbus-loss-") as workdir:
        for _ in range(max(1, args.repeat)):
            for loss in rates:
                runs[loss].append(run(loss, args.orders, args.idle, workdir))
    load.append(os.getloadavg()[0])
    if args.json:
        print(json.dumps(runs))
        return 0
    results = {loss: _median_run(rs) for loss, rs in runs.items()}
    base = results[rates[0]]
    print(
        f"exchange demo, {args.orders:,} orders, idle {args.idle}, {max(1, args.repeat)} runs "
        f"per rate interleaved (median of each column); baseline: {rates[0]}% loss in the same "
        f"invocation; load average {load[0]:.1f} at start, {load[1]:.1f} at end"
    )
    print(
        "| loss | orders/s | vs lossless | order → answer p50 | p99 | p50 ratio | p99 ratio | "
        "datagrams lost | retransmitted msgs + resent cmds per lost | late joiner: received per "
        "stream message | its duplicates | lost orders | hashes |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for loss in rates:
        r = results[loss]
        lat = r["order_to_answer_us"]
        rec = r["recovery"]
        lost = r["datagrams_dropped"]
        per = ((rec["retransmitted_messages"] + rec["resent_commands"]) / lost) if lost else 0.0
        print(
            f"| {loss}% | {r['orders_per_s']:,.0f} | {r['orders_per_s'] / base['orders_per_s']:.2f}× | "
            f"{lat['p50'] / 1000:.2f} ms | {lat['p99'] / 1000:.2f} ms | "
            f"{lat['p50'] / base['order_to_answer_us']['p50']:.2f}× | "
            f"{lat['p99'] / base['order_to_answer_us']['p99']:.2f}× | {lost:,} | {per:.1f} | "
            f"{r['late_joiner_ratio']:.3f}× | {r['late_joiner_duplicates']:,.0f} | "
            f"{r['lost_orders']} | {'equal' if r['hashes_equal'] else 'DIFFERENT'} |"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
