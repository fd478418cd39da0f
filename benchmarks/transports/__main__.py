"""Runs the transport benchmarks: ``python -m benchmarks.transports [--quick] [--json] [shm|tcp|rewind]``.

* shm round trip and throughput vs a raw two-process shared-memory ping-pong and SPSC ring
  (targets: p50 round trip <= 2x the raw one, throughput >= 50% of it);
* SoupBinTCP round trip vs a raw TCP echo (target <= 1.5x), rewind of 10M 32-byte messages
  (target >= 10M msg/s; also reported per CPU-second of the client, as a shared machine
  gives the processes only part of a core).

Not a test: the numbers depend on the machine; what matters is the ratio to the baseline.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def main(argv: list[str]) -> int:
    env = dict(os.environ, CARGO_TARGET_DIR=str(ROOT / "rust" / "target"))
    cmd = ["cargo", "bench", "-q", "-p", "seqbus-transport", "--bench", "transports", "--", *argv]
    return subprocess.run(cmd, cwd=ROOT / "rust", env=env, check=False).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
