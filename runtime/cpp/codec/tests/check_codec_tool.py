"""ctest: the C++ codec tool (seqbus-cpp-codec) against the shared vectors.

Usage: check_codec_tool.py TOOL VECTORS_DIR. For each package, every vector's hex goes in on
one line, followed by malformed lines (a truncated message, an unknown template id, a line
that is not hex); the tool must answer each with one line: the vector's name, canonical JSON
and the same hex, or an error. Exit status 0 when all of it holds.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def main() -> int:
    tool, vectors = sys.argv[1], Path(sys.argv[2])
    failures = []
    for pkg_dir in sorted(p for p in vectors.iterdir() if p.is_dir()):
        bins = sorted(pkg_dir.glob("*.bin"))
        lines = [b.read_bytes().hex() for b in bins]
        first = bins[0].read_bytes()
        bad = [first[:-1].hex(), (first[:2] + b"\xff\xff" + first[4:]).hex(), "zz", "abc"]
        proc = subprocess.run([tool, pkg_dir.name], input="\n".join(lines + bad) + "\n",
                              capture_output=True, text=True, timeout=120, check=False)
        if proc.returncode != 0:
            failures.append(f"{pkg_dir.name}: exit status {proc.returncode}: {proc.stderr}")
            continue
        out = proc.stdout.splitlines()
        if len(out) != len(lines) + len(bad):
            failures.append(f"{pkg_dir.name}: {len(out)} lines for {len(lines) + len(bad)}")
            continue
        for b, line in zip(bins, out):
            # the canonical JSON compared as text: the same bytes, floats written alike
            want = (f'{{"name":"{b.name.split(".")[0]}","json":'
                    f'{b.with_suffix(".json").read_text(encoding="utf-8").strip()},'
                    f'"hex":"{b.read_bytes().hex()}"}}')
            if line != want:
                failures.append(f"{b}: {line}\n  expected {want}")
        for line in out[len(lines):]:
            if "error" not in json.loads(line):
                failures.append(f"{pkg_dir.name}: a malformed line decoded: {line}")
        print(f"{pkg_dir.name}: {len(bins)} vectors and {len(bad)} malformed lines checked")
    for f in failures:
        print("FAIL", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
