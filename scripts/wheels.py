#!/usr/bin/env python3
"""The project's wheels, the environments that build them, and the third-party wheels a clean
environment needs beside them. Only the standard library: any Python 3.11+ runs it.

``wheels.py env DIR`` (``make build-env``: ``.venv-build/``) makes a build environment for each
CPython of :data:`SUPPORTED` found on this machine (``DIR/3.X``, with requirements-build.txt's
pinned tools: maturin, zig, cargo-zigbuild, Cython, setuptools, lark; nothing of
requirements-dev.txt), and has Maven fetch the Spark jars the Spark source compiles against.

``wheels.py build DIR`` (``make wheels``: ``dist/``) builds, in those environments, the ``seqc``
wheel and one ``seqbus`` wheel per interpreter. Each goes through its PEP 517 backend as ``pip
wheel`` calls it (``seqbus``: the backend in ``scripts/backend/``; ``seqc``: setuptools),
without build isolation: the build environment's pinned tools build them and nothing is
downloaded. The Rust core uses Python's stable ABI, so it is built once, by the first
interpreter's build, and shared with the others (the backend's ``seqbus.core-dir`` setting);
the Cython modules are compiled for each interpreter. ``pip wheel .`` with isolation builds
the same wheel for the interpreter that runs it from the ``[build-system]`` table.

``wheels.py deps DIR`` (``make wheelhouse``: ``var/wheelhouse/``) downloads, for each
interpreter with a build environment, what installing those wheels, and building an
application with the seqc build hook, takes from the package index (at the versions
requirements-dev.txt pins), so that the packaging tests install into fresh environments with
``--no-index`` (pytest runs in a network namespace with loopback only).

``wheels.py pythons`` says which interpreters were found, where.

docs/packaging.md describes what each wheel holds.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: The CPython versions a seqbus wheel is built for, where the machine has the interpreter.
SUPPORTED = ("3.11", "3.12", "3.13", "3.14")
#: Where ``make build-env`` puts the build environments (one per version).
BUILD_ENV = ROOT / ".venv-build"
#: The build environments' pinned tools.
BUILD_REQUIREMENTS = ROOT / "requirements-build.txt"
#: What seqc needs at run time, and hatchling (with editables, for editable installs) for
#: the build hook; pytest and mypy, which a project ``seqbus new`` writes tests and type-checks
#: itself with (its ``dev`` extra); the ``archive`` and ``http-gateway`` extras, which the docs
#: install (tests/packaging/test_docs.py); pip resolves their own dependencies.
THIRD_PARTY = ("lark", "jinja2", "cython", "setuptools", "hatchling", "editables", "pytest",
               "mypy", "pyarrow", "tqdm", "aiohttp", "msgspec")
#: What a probe of an interpreter prints: implementation, X.Y, free-threaded, the interpreter
#: itself (outside any virtual environment), whether its C headers are there.
_PROBE = (
    "import os, sys, sysconfig; print(sys.implementation.name, '%d.%d' % sys.version_info[:2], "
    "int(bool(sysconfig.get_config_var('Py_GIL_DISABLED'))), "
    "int(os.path.exists(os.path.join(sysconfig.get_paths()['include'], 'Python.h'))), "
    "getattr(sys, '_base_executable', sys.executable))"
)


def _candidates(version: str) -> list[Path]:
    """Where an interpreter of CPython ``version`` may be, in the order they are tried:
    ``pythonX.Y`` on ``PATH``, pyenv's installs of it (newest first), /usr/local/bin, /usr/bin."""
    out = []
    on_path = shutil.which(f"python{version}")
    if on_path:
        out.append(Path(on_path))
    versions = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    exact = re.compile(rf"{re.escape(version)}\.(\d+)")
    installs = [(int(m.group(1)), d) for d in versions.glob(f"{version}.*")
                if (m := exact.fullmatch(d.name))]
    out += [d / "bin" / f"python{version}" for _, d in sorted(installs, reverse=True)]
    out += [Path(d) / f"python{version}" for d in ("/usr/local/bin", "/usr/bin")]
    return out


def find_python(version: str) -> Path | None:
    """A CPython ``version`` interpreter of this machine (with GIL, with its C headers), not a
    virtual environment's; None when there is none. pyenv's shim of a version that is not
    selected refuses to run and is passed over."""
    for candidate in _candidates(version):
        if not candidate.exists():
            continue
        try:
            probe = subprocess.run([str(candidate), "-c", _PROBE], capture_output=True,
                                   text=True, timeout=60, check=False)
        except OSError:
            continue
        fields = probe.stdout.split(maxsplit=4)
        if probe.returncode == 0 and fields[:4] == ["cpython", version, "0", "1"]:
            return Path(fields[4].strip())
    return None


def where_looked(version: str) -> str:
    """Where :func:`find_python` looks for ``version``, in words."""
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    return (f"python{version} on PATH, {pyenv}/{version}.*, /usr/local/bin/python{version}, "
            f"/usr/bin/python{version}")


def pythons() -> dict[str, Path | None]:
    """Each supported version → its interpreter, or None where the machine has none."""
    return {v: find_python(v) for v in SUPPORTED}


def _env_python(envs: Path, version: str) -> Path:
    return envs / version / "bin" / "python"


def _env_stamp(python: Path) -> str:
    """What a build environment was made from: the interpreter and the pinned tools."""
    return f"{python}\n{BUILD_REQUIREMENTS.read_text()}"


def _clean_env(bindir: Path | None = None) -> dict[str, str]:
    """This process's environment without the development environment's (no ``.venv`` on
    ``PATH``, no ``VIRTUAL_ENV``, no ``PYTHONPATH``), ``bindir`` first on ``PATH``."""
    dev_bin = (ROOT / ".venv" / "bin").resolve()
    env = {k: v for k, v in os.environ.items()
           if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME")}
    path = [p for p in env.get("PATH", "").split(os.pathsep) if p and Path(p).resolve() != dev_bin]
    env["PATH"] = os.pathsep.join([*([str(bindir)] if bindir else []), *path])
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


def _run(cmd: list[str], *, env: dict[str, str], quiet: bool, what: str) -> None:
    done = subprocess.run(cmd, env=env, capture_output=quiet, text=True, check=False,
                          cwd=ROOT)
    if done.returncode != 0:
        output = f"\n{done.stdout[-6000:]}\n{done.stderr[-6000:]}" if quiet else ""
        raise RuntimeError(f"{what}: {' '.join(cmd)} exited with status {done.returncode}{output}")


def make_envs(envs: Path, *, quiet: bool = False) -> dict[str, Path]:
    """A build environment in ``envs/X.Y`` for each supported version found (remade when its
    interpreter or requirements-build.txt changed), and Spark's jars in Maven's local
    repository; version → the environment's python."""
    made = {}
    for version, python in pythons().items():
        if python is None:
            print(f"CPython {version}: none on this machine (looked at {where_looked(version)}): "
                  "no wheel for it", flush=True)
            continue
        env = envs / version
        stamp = env / ".built-from"
        if stamp.exists() and stamp.read_text() == _env_stamp(python):
            print(f"CPython {version}: {env} is up to date ({python})", flush=True)
        else:
            print(f"CPython {version}: making {env} with {python}", flush=True)
            shutil.rmtree(env, ignore_errors=True)
            clean = _clean_env()
            _run([str(python), "-m", "venv", str(env)], env=clean, quiet=quiet,
                 what=f"a build environment for CPython {version}")
            _run([str(_env_python(envs, version)), "-m", "pip", "install", "-q", "-r",
                  str(BUILD_REQUIREMENTS)], env=clean, quiet=quiet,
                 what=f"the build tools for CPython {version}")
            stamp.write_text(_env_stamp(python))
        made[version] = _env_python(envs, version)
    if not made:
        raise RuntimeError(f"no CPython of {', '.join(SUPPORTED)} on this machine")
    _run(["bash", str(ROOT / "rust" / "crates" / "spark" / "build-jar.sh"), "--resolve"],
         env=_clean_env(), quiet=quiet, what="Spark's jars from Maven")
    return made


def build_envs(envs: Path = BUILD_ENV) -> tuple[dict[str, Path], dict[str, str]]:
    """The build environments to build with: version → its python, and version → why there
    is no wheel for it (no such interpreter on the machine). An interpreter the machine has
    without an up-to-date environment is an error that names ``make build-env``."""
    ready, absent = {}, {}
    for version, python in pythons().items():
        if python is None:
            absent[version] = (f"no CPython {version} on this machine (looked at "
                               f"{where_looked(version)})")
            continue
        stamp = envs / version / ".built-from"
        if not stamp.exists() or stamp.read_text() != _env_stamp(python):
            raise RuntimeError(f"CPython {version} ({python}) has no up-to-date build environment "
                               f"in {envs}: run `make build-env` (scripts/wheels.py env {envs})")
        ready[version] = _env_python(envs, version)
    if not ready:
        raise RuntimeError(f"no CPython of {', '.join(SUPPORTED)} on this machine")
    return ready, absent


@dataclass
class Built:
    """What :func:`build` made."""

    seqc: Path
    #: version ("3.11") → its seqbus wheel
    seqbus: dict[str, Path]
    #: version → why there is no wheel for it
    absent: dict[str, str] = field(default_factory=dict)
    #: step → seconds
    times: dict[str, float] = field(default_factory=dict)


def build(out: Path, *, quiet: bool = True, envs: Path = BUILD_ENV) -> Built:
    """Build the seqc wheel and a seqbus wheel for each interpreter with a build environment
    into ``out`` (earlier ones there are removed)."""
    ready, absent = build_envs(envs)
    out.mkdir(parents=True, exist_ok=True)
    for old in [*out.glob("seqbus-*.whl"), *out.glob("seqc-*.whl")]:
        old.unlink()
    times = {}
    first = next(iter(ready.values()))
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="seqc-source-") as tmp:
        # setuptools builds in the source tree (build/): a copy lets two builds run at once
        source = Path(tmp) / "compiler"
        shutil.copytree(ROOT / "compiler", source, ignore=shutil.ignore_patterns(
            "build", "*.egg-info", "__pycache__"))
        _run([str(first), "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-w",
              str(out), str(source)], env=_clean_env(first.parent), quiet=quiet,
             what="the seqc wheel")
    (seqc,) = out.glob("seqc-*.whl")
    times["seqc"] = time.monotonic() - t0
    seqbus = {}
    with tempfile.TemporaryDirectory(prefix="seqbus-core-") as core:
        for version, python in ready.items():
            t0 = time.monotonic()
            # -v: pip shows what the backend says while it works (maturin, cargo, the jar,
            # the Cython), not only at the end
            _run([str(python), "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                  *([] if quiet else ["-v"]), "-C", f"seqbus.core-dir={core}", "-w", str(out),
                  str(ROOT)],
                 env=_clean_env(python.parent), quiet=quiet,
                 what=f"the seqbus wheel for CPython {version}")
            tag = "cp" + version.replace(".", "")
            (seqbus[version],) = out.glob(f"seqbus-*-{tag}-{tag}-*.whl")
            times[f"seqbus {version}"] = time.monotonic() - t0
    return Built(seqc, seqbus, absent, times)


def pins() -> dict[str, str]:
    """Name → version of every ``name==version`` line of requirements-dev.txt."""
    out = {}
    for line in (ROOT / "requirements-dev.txt").read_text().splitlines():
        name, sep, version = line.split("#", 1)[0].strip().partition("==")
        if sep:
            out[name.lower()] = version
    return out


def deps(out: Path, *, envs: Path = BUILD_ENV) -> None:
    """Download the wheels of :data:`THIRD_PARTY` (pinned where requirements-dev.txt pins
    them) and of their dependencies into ``out``, for each interpreter with a build
    environment (each downloads with its own pip, for its own tags)."""
    ready, absent = build_envs(envs)
    pinned = pins()
    wanted = [f"{n}=={pinned[n]}" if n in pinned else n for n in THIRD_PARTY]
    for version, python in ready.items():
        print(f"CPython {version}: third-party wheels into {out}", flush=True)
        _run([str(python), "-m", "pip", "download", "-q", "--only-binary", ":all:", "-d",
              str(out), *wanted], env=_clean_env(), quiet=False,
             what=f"the third-party wheels for CPython {version}")
    for version, why in absent.items():
        print(f"CPython {version}: {why}", flush=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=["env", "build", "deps", "pythons"],
                    help="env: the build environments; build: the seqbus and seqc wheels; "
                    "deps: the third-party wheels; pythons: the interpreters found")
    ap.add_argument("dir", type=Path, nargs="?",
                    help="env: where the build environments go (.venv-build); build, deps: "
                    "where the wheels go")
    ap.add_argument("--envs", type=Path, default=BUILD_ENV,
                    help=f"the build environments to use (default {BUILD_ENV})")
    args = ap.parse_args(argv)
    t0 = time.monotonic()
    if args.what == "pythons":
        for version, python in pythons().items():
            print(f"CPython {version}: {python or 'none (looked at ' + where_looked(version) + ')'}")
        return 0
    if args.dir is None:
        ap.error(f"{args.what} needs a directory")
    try:
        if args.what == "env":
            made = make_envs(args.dir.resolve())
            print(f"build environments for CPython {', '.join(made)} in {args.dir} "
                  f"({time.monotonic() - t0:.0f} s)")
        elif args.what == "deps":
            deps(args.dir.resolve(), envs=args.envs.resolve())
            print(f"{len(list(args.dir.glob('*.whl')))} wheels in {args.dir}")
        else:
            built = build(args.dir.resolve(), quiet=False, envs=args.envs.resolve())
            for wheel in [*built.seqbus.values(), built.seqc]:
                print(f"{wheel} ({wheel.stat().st_size / 1e6:.1f} MB)")
            for version, why in built.absent.items():
                print(f"no wheel for CPython {version}: {why}")
            steps = ", ".join(f"{k} {v:.0f} s" for k, v in built.times.items())
            print(f"built in {time.monotonic() - t0:.0f} s ({steps})")
    except RuntimeError as exc:
        print(f"wheels.py: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
