#!/usr/bin/env python3
"""Fail if generated/ differs from what seqc makes from schemas/ today.

Regenerates every schema in schemas/ into a temporary directory (sources only, no build) and
compares it with the committed generated/ tree: any changed, missing or extra source file is
printed as a unified diff and the exit status is 1.
"""

from __future__ import annotations

import difflib
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SOURCE_SUFFIXES = {".pyx", ".py", ".pyi", ".rs", ".typed", ".toml"}
LANGS = ["python", "rust"]


def sources(root: Path) -> dict[str, Path]:
    out = {}
    for p in sorted(root.rglob("*")):
        if not p.is_file() or "__pycache__" in p.parts or "target" in p.parts:
            continue
        if p.suffix in SOURCE_SUFFIXES:
            out[str(p.relative_to(root))] = p
    return out


def main() -> int:
    schemas = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "schemas").glob("*.idl"))
    with tempfile.TemporaryDirectory(prefix="seqc-check-") as tmp:
        cmd = [sys.executable, "-m", "seqc.cli", "generate", *schemas, "-o", tmp, "--no-build"]
        for lang in LANGS:
            cmd += ["--lang", lang]
        res = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        if res.returncode != 0:
            sys.stderr.write(res.stderr)
            print("check-generated: seqc failed", file=sys.stderr)
            return 1
        fresh = sources(Path(tmp))
        committed = {k: v for k, v in sources(ROOT / "generated").items()
                     if k.split("/", 1)[0] in LANGS}
        failed = False
        for rel in sorted(set(fresh) | set(committed)):
            new = fresh[rel].read_text(encoding="utf-8").splitlines(True) if rel in fresh else []
            old = committed[rel].read_text(encoding="utf-8").splitlines(True) \
                if rel in committed else []
            if new != old:
                failed = True
                sys.stdout.writelines(difflib.unified_diff(
                    old, new, f"generated/{rel}", f"seqc output/{rel}"))
                if not new or not old:
                    print(f"{'extra' if not new else 'missing'} file: generated/{rel}")
    if failed:
        print("generated/ is out of date: run `make generate` and commit the result",
              file=sys.stderr)
        return 1
    print(f"generated/ is up to date ({len(fresh)} files)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
