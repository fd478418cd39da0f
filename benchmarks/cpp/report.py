"""The C++ codec benchmark's results (Google Benchmark JSON) as a table: per message and
operation the median time of seqc's codecs and of SBE's in the same run, and SBE's time over
ours (1.0: as fast as SBE; the target is 0.8 or more), by CPU time and by wall time.

Usage: report.py RESULTS.json LOAD_BEFORE LOAD_AFTER
"""

from __future__ import annotations

import json
import os
import sys


def main() -> int:
    path, load_before, load_after = sys.argv[1], sys.argv[2], sys.argv[3]
    with open(path, encoding="utf-8") as f:
        data = json.load(f)
    medians: dict[str, dict[str, float]] = {}
    reps = 0
    for b in data["benchmarks"]:
        if b.get("aggregate_name") != "median":
            continue
        name = b["run_name"]
        medians[name] = {"cpu": b["cpu_time"], "real": b["real_time"]}
        reps = int(b.get("repetitions", reps))
    ctx = data["context"]
    print(f"C++ codecs, {ctx.get('num_cpus')} CPUs at {ctx.get('mhz_per_cpu')} MHz, "
          f"{os.cpu_count()} online; load average {load_before} before, {load_after} after; "
          f"medians of {reps} repetitions, interleaved at random")
    print()
    print("| benchmark | seqbus CPU ns | SBE CPU ns | SBE/seqbus (CPU) "
          "| seqbus wall ns | SBE wall ns | SBE/seqbus (wall) |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for op in ("EncodeNewOrder", "DecodeNewOrder", "EncodeBookUpdate", "DecodeBookUpdate"):
        ours, sbe = medians.get(f"{op}_seqbus"), medians.get(f"{op}_SBE")
        if ours is None or sbe is None:
            print(f"| {op} | missing from {path} |")
            continue
        print(f"| {op} | {ours['cpu']:.1f} | {sbe['cpu']:.1f} | {sbe['cpu'] / ours['cpu']:.2f} "
              f"| {ours['real']:.1f} | {sbe['real']:.1f} | {sbe['real'] / ours['real']:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
