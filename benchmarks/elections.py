"""Elections nobody caused: ``python -m benchmarks.elections [--seconds S] [--loops N]``.

A three-member cluster (``seqbus sequencer`` processes at normal priority, the bus idle but
for the cluster's heartbeats, udp-unicast downstream) runs for S seconds while N busy loops
(default 4: two per core on this project's 2-core machine) compete for the CPU, and nobody
kills anything. Every leader after the first is an election a slow member caused, taken for a
dead one: the count is read from each member's status endpoint (``takeovers``), beside what
the failure detector did (docs/ha.md, "Failure detection"). The baseline, in the same run, is
the same cluster with the detector off (``cluster.suspicion_phi = 0``: the election timeout
alone decides, as before it). Each election is listed with what its member logged when it
asked for votes (how long its leader had been silent, and the silence it tolerated) and each
leader's step-down with its reason; ``--logs DIR`` keeps the members' whole logs. Not a test:
the numbers depend on the machine.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

from seqbus.demo import _stop, bus_config, cluster_config, free_udp_port

#: The members' log lines worth listing: elections and their reasons, leaders stepping down.
WHY = ("asks for votes", "stopped leading")
FIELDS = ("takeovers", "elections", "held_suspicions", "own_pauses", "quorum_stepdowns")


def _status(address: str) -> dict[str, Any]:
    try:
        with urllib.request.urlopen(f"http://{address}/status", timeout=1) as r:
            doc: dict[str, Any] = json.loads(r.read()).get("cluster") or {}
            return doc
    except (OSError, ValueError):
        return {}


def run(phi: float, seconds: float, loops: int, logs: Path | None = None) -> dict[str, Any]:
    """One cluster for ``seconds`` under ``loops`` busy loops; the summed counters, and the
    members' lines of :data:`WHY` (``why``). Their logs go to ``logs`` when given."""
    with tempfile.TemporaryDirectory(prefix="seqbus-elections-") as tmp:
        work = Path(tmp)
        cluster, status = cluster_config(3)
        logdir = logs if logs is not None else work
        logdir.mkdir(parents=True, exist_ok=True)
        names = {m: logdir / f"phi{phi:g}-member{m}.log" for m in status}
        cluster = cluster.replace("[cluster]\n", f"[cluster]\nsuspicion_phi = {phi}\n", 1)
        config = work / "bus.toml"
        config.write_text(bus_config(work, False, [f"127.0.0.1:{free_udp_port()}"],
                                     cluster=cluster))
        cli = [sys.executable, "-m", "seqbus.cli"]
        procs = []
        for m in status:
            with open(names[m], "wb") as log:
                procs.append(subprocess.Popen(
                    [*cli, "sequencer", "-c", str(config), "--id", str(m)],
                    stdout=log, stderr=subprocess.STDOUT))
        busy: list[subprocess.Popen[bytes]] = []
        try:
            deadline = time.monotonic() + 30
            while not any(_status(a).get("role") == "leader" for a in status.values()):
                if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                    raise SystemExit("benchmarks.elections: no leader within 30 s")
                time.sleep(0.05)
            busy = [subprocess.Popen(["sh", "-c", "while :; do :; done"]) for _ in range(loops)]
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                dead = [p.args for p in procs if p.poll() is not None]
                if dead:
                    raise SystemExit(f"benchmarks.elections: a sequencer exited: {dead}")
                time.sleep(min(1.0, max(0.0, end - time.monotonic())))
            _stop(busy)
            docs = [_status(a) for a in status.values()]
        finally:
            _stop(busy)
            _stop(procs)
        why = [f"member {m}: {line.strip()}" for m, path in names.items()
               for line in path.read_text(errors="replace").splitlines()
               if any(w in line for w in WHY)]
    out: dict[str, Any] = {f: sum(int(d.get(f, 0)) for d in docs) for f in FIELDS}
    out["unforced_elections"] = max(0, out["takeovers"] - 1)
    out["answered"] = sum(1 for d in docs if d)
    out["why"] = why
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=300.0,
                    help="how long each cluster runs under the busy loops (default 300)")
    ap.add_argument("--baseline-seconds", type=float, default=None,
                    help="how long the baseline (detector off) runs (default: --seconds)")
    ap.add_argument("--loops", type=int, default=4, help="busy loops (default 4)")
    ap.add_argument("--quick", action="store_true", help="30 s each")
    ap.add_argument("--json", action="store_true", help="one JSON object on stdout")
    ap.add_argument("--logs", type=Path, default=None,
                    help="keep the members' logs in this directory")
    args = ap.parse_args(argv)
    seconds = 30.0 if args.quick else args.seconds
    base_s = 30.0 if args.quick else (args.baseline_seconds or seconds)
    rows = {
        "detector off (suspicion_phi = 0)": (base_s, run(0.0, base_s, args.loops, args.logs)),
        "detector on (suspicion_phi = 8)": (seconds, run(8.0, seconds, args.loops, args.logs)),
    }
    if args.json:
        print(json.dumps({k: {"seconds": s, **r} for k, (s, r) in rows.items()}))
        return 0
    print(f"three sequencers, idle bus, {args.loops} busy loops, no kill "
          "(counters summed over the members; idle strategy: the default, hybrid)")
    print(f"{'':36}{'s':>6}{'unforced':>10}" + "".join(f"{f:>18}" for f in FIELDS[1:]))
    for name, (s, r) in rows.items():
        print(f"{name:36}{s:>6.0f}{r['unforced_elections']:>10}"
              + "".join(f"{r[f]:>18}" for f in FIELDS[1:]))
    for name, (_, r) in rows.items():
        print(f"\n{name}: what the members logged ({len(r['why'])} lines)")
        for line in r["why"]:
            print(f"  {line}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
