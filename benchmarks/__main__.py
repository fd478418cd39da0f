"""Every benchmark, one after another: ``python -m benchmarks [--quick] [NAME ...]``.

Each compares seqbus with a baseline measured in the same run (msgspec, pyzmq, raw UDP, raw
shared memory, plain Parquet, ...) and prints its own table; docs/benchmarks.md explains them.
Run it inside a private network namespace for the multicast ones (``make bench`` does).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _bench(*args: str) -> tuple[list[str], Path]:
    """``seqbus-bench`` (rust/benches) with ``args``, run from the Rust workspace."""
    return (["cargo", "run", "-q", "--release", "-p", "seqbus-bench", "--", *args], ROOT / "rust")


def _commands(quick: bool) -> dict[str, tuple[list[str], Path]]:
    py = sys.executable
    q = ["--quick"] if quick else []
    return {
        "codec": ([py, "-m", "benchmarks.codec", *q], ROOT),
        "sdk": ([py, "-m", "benchmarks.sdk", *q], ROOT),
        "aio": ([py, "-m", "benchmarks.aio", *q], ROOT),
        "archive": (
            [py, "-m", "benchmarks.archive.decode", *(["--messages", "1000000"] if quick else [])],
            ROOT,
        ),
        "transports": ([py, "-m", "benchmarks.transports", *q], ROOT),
        "loss": (
            [
                py,
                "-m",
                "benchmarks.loss",
                *(["--orders", "2000", "--repeat", "1"] if quick else []),
            ],
            ROOT,
        ),
        "spark": ([py, "-m", "benchmarks.spark", *q], ROOT),
        "elections": ([py, "-m", "benchmarks.elections", *q], ROOT),
        "sites": ([py, "-m", "benchmarks.sites", *q], ROOT),
        "mac": _bench(
            "--mac",
            *(
                ["--messages", "300000", "--samples", "3000"]
                if quick
                else ["--messages", "1000000", "--samples", "10000"]
            ),
        ),
        "core": _bench(*(["--messages", "200000", "--samples", "5000"] if quick else [])),
        "ha": _bench(
            "--ha",
            *(
                ["--messages", "300000", "--samples", "3000", "--kills", "5"]
                if quick
                else ["--messages", "1000000", "--samples", "10000", "--kills", "20"]
            ),
        ),
    }


def main(argv: list[str] | None = None) -> int:
    commands = _commands(False)
    ap = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    ap.add_argument("--quick", action="store_true", help="fewer iterations everywhere")
    ap.add_argument(
        "names", nargs="*", metavar="NAME", help=f"any of {', '.join(commands)} (default: all)"
    )
    args = ap.parse_args(argv)
    unknown = [n for n in args.names if n not in commands]
    if unknown:
        ap.error(f"unknown benchmark {', '.join(unknown)}; choose from {', '.join(commands)}")
    commands = _commands(args.quick)
    env = dict(os.environ, CARGO_TARGET_DIR=str(ROOT / "rust" / "target"))
    failed = []
    for name in args.names or list(commands):
        cmd, cwd = commands[name]
        print(f"\n=== {name}: {' '.join(cmd)}", flush=True)
        if subprocess.run(cmd, cwd=cwd, env=env, check=False).returncode != 0:
            failed.append(name)
    if failed:
        print(f"\nfailed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
