#!/usr/bin/env python3
"""The project's wheels, and the third-party wheels a clean environment needs beside them.

``wheels.py build DIR`` (``make wheels``: ``dist/``) builds the ``seqbus`` and ``seqc`` wheels.
Both go through their PEP 517 backends as ``pip wheel`` calls them (``seqbus``: the backend in
``scripts/backend/``, maturin then the Cython; ``seqc``: setuptools), without build isolation:
the pinned tools of the project's virtual environment build them and nothing is downloaded.
``pip wheel .`` with isolation builds the same wheels from the ``[build-system]`` tables.

``wheels.py deps DIR`` (``make wheelhouse``: ``var/wheelhouse/``) downloads what installing
those wheels, and building an application with the seqc build hook, takes from the package
index — at the versions requirements-dev.txt pins — so that the packaging tests install into
fresh environments with ``--no-index`` (pytest runs in a network namespace with loopback only).

docs/packaging.md describes what each wheel holds.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: distribution → its source directory
PROJECTS = {"seqbus": ROOT, "seqc": ROOT / "compiler"}
#: What seqc needs at run time, and hatchling (with editables, for editable installs) for
#: the build hook; pytest and mypy, which a project ``seqbus new`` writes tests and type-checks
#: itself with (its ``dev`` extra); the ``archive`` and ``http-gateway`` extras, which the docs
#: install (tests/packaging/test_docs.py); pip resolves their own dependencies.
THIRD_PARTY = ("lark", "jinja2", "cython", "setuptools", "hatchling", "editables", "pytest",
               "mypy", "pyarrow", "tqdm", "aiohttp", "msgspec")


def build(out: Path, *, quiet: bool = True) -> dict[str, Path]:
    """Build every wheel into ``out``; distribution name → wheel file."""
    out.mkdir(parents=True, exist_ok=True)
    wheels = {}
    for name, source in PROJECTS.items():
        for old in out.glob(f"{name}-*.whl"):
            old.unlink()
        cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
               "-w", str(out), str(source)]
        # the environment's tools (maturin's PEP 517 hook runs the `maturin` command)
        path = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
        run = subprocess.run(cmd, capture_output=quiet, text=True, check=False,
                             env={**os.environ, "PATH": path})
        if run.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{run.stdout}\n{run.stderr}")
        (wheel,) = out.glob(f"{name}-*.whl")
        wheels[name] = wheel
    return wheels


def pins() -> dict[str, str]:
    """Name → version of every ``name==version`` line of requirements-dev.txt."""
    out = {}
    for line in (ROOT / "requirements-dev.txt").read_text().splitlines():
        name, sep, version = line.split("#", 1)[0].strip().partition("==")
        if sep:
            out[name.lower()] = version
    return out


def deps(out: Path) -> None:
    """Download the wheels of :data:`THIRD_PARTY` (pinned where requirements-dev.txt pins
    them) and of their dependencies into ``out``."""
    pinned = pins()
    wanted = [f"{n}=={pinned[n]}" if n in pinned else n for n in THIRD_PARTY]
    subprocess.run([sys.executable, "-m", "pip", "download", "-q", "--only-binary", ":all:",
                    "-d", str(out), *wanted], check=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=["build", "deps"],
                    help="build: the seqbus and seqc wheels; deps: the third-party wheels")
    ap.add_argument("out", type=Path, help="directory the wheels are written to")
    args = ap.parse_args(argv)
    t0 = time.monotonic()
    if args.what == "deps":
        deps(args.out.resolve())
        print(f"{len(list(args.out.glob('*.whl')))} wheels in {args.out}")
        return 0
    wheels = build(args.out.resolve(), quiet=False)
    for wheel in wheels.values():
        print(f"{wheel} ({wheel.stat().st_size / 1e6:.1f} MB)")
    print(f"built in {time.monotonic() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
