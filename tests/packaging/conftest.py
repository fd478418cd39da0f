"""Fixtures of the packaging tests: the wheels, built once per session as ``make wheels``
builds them (in the build environments of ``.venv-build/``, one seqbus wheel per CPython the
machine has), and fresh virtual environments outside the checkout that see nothing of it (no
path into it, no variable of the project's own environment).

``wheel_venv`` and ``sdk_venv`` are made with the interpreter that runs pytest;
``py_wheel_venv`` and ``py_sdk_venv`` are the same for each CPython of
``scripts.wheels.SUPPORTED`` (parametrized by ``python_version``; a version the machine does
not have is skipped, saying where it was looked for).

pytest runs in a network namespace with loopback only, so third-party packages come from the
wheelhouse ``make wheelhouse`` downloads before (``var/wheelhouse/``, or ``SEQBUS_WHEELHOUSE``):
every ``pip install`` here is ``--no-index``."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from scripts.wheels import SUPPORTED, find_python
from scripts.wheels import build as build_wheels
from tests.conftest import ROOT, VENV_BIN, Processes, free_udp_port
from tests.transports.harness import udp_bound, wait_for

#: The example application the packaging tests build and run (its own pyproject.toml).
RFQ = ROOT / "examples" / "rfq"
EXT_SUFFIX = sysconfig.get_config_var("EXT_SUFFIX")
#: The version of the interpreter running pytest ("3.11").
RUNNING = f"{sys.version_info.major}.{sys.version_info.minor}"
#: The third-party wheels (scripts/wheels.py deps).
WHEELHOUSE = Path(os.environ.get("SEQBUS_WHEELHOUSE", ROOT / "var" / "wheelhouse"))
#: Variables of the project's environment a clean one does not carry.
PROJECT_VARIABLES = ("VIRTUAL_ENV", "PYTHONPATH", "PYTHONHOME", "PYTHONSTARTUP", "SEQBUS_IN_NETNS")


@dataclass
class Wheels:
    dir: Path
    #: the seqbus wheel for the interpreter running pytest
    seqbus: Path
    seqc: Path
    #: version ("3.12") → its seqbus wheel, for each CPython the machine has
    by_python: dict[str, Path] = field(default_factory=dict)
    #: version → why there is no wheel for it (no such interpreter on the machine)
    absent: dict[str, str] = field(default_factory=dict)


def ext_suffix(version: str) -> str:
    """The file name suffix of a compiled module of CPython ``version`` on this platform."""
    running = f"cpython-{RUNNING.replace('.', '')}-"
    assert running in EXT_SUFFIX, EXT_SUFFIX
    return EXT_SUFFIX.replace(running, f"cpython-{version.replace('.', '')}-")


@dataclass
class Venv:
    """A virtual environment made by ``python -m venv``, and the environment its commands
    run with: its ``bin`` first on ``PATH``, nothing of the checkout's."""

    path: Path

    def bin(self, name: str) -> str:
        return str(self.path / "bin" / name)

    @property
    def python(self) -> str:
        return self.bin("python")

    @property
    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in PROJECT_VARIABLES}
        path = [p for p in env.get("PATH", "").split(os.pathsep)
                if p and Path(p).resolve() != VENV_BIN.resolve()]
        env["PATH"] = os.pathsep.join([str(self.path / "bin"), *path])
        env["VIRTUAL_ENV"] = str(self.path)
        env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
        return env

    def run(self, args: list[str], cwd: Path, timeout: float = 600) -> str:
        """Run ``args`` to completion; its stdout, or a failure with everything it printed."""
        done = subprocess.run(args, cwd=cwd, env=self.env, capture_output=True, text=True,
                              timeout=timeout, check=False)
        if done.returncode != 0:
            pytest.fail(f"{' '.join(args)} exited with status {done.returncode}\n"
                        f"{done.stdout[-4000:]}\n{done.stderr[-4000:]}")
        return done.stdout

    def pip_install(self, *args: str, cwd: Path) -> None:
        """``pip install ARGS`` from the wheelhouse and the files ``args`` name, no index."""
        self.run([self.python, "-m", "pip", "install", "-q", "--no-index", "--find-links",
                  str(WHEELHOUSE), *args], cwd)

    def module_file(self, module: str, cwd: Path) -> Path:
        """Where ``module`` is imported from in this environment."""
        out = self.run([self.python, "-c", f"import {module} as m; print(m.__file__)"], cwd)
        return Path(out.strip())


def make_venv(path: Path, python: str | Path = sys.executable) -> Venv:
    subprocess.run([str(python), "-m", "venv", str(path)], check=True, timeout=300)
    return Venv(path)


def outside_checkout(path: Path) -> Path:
    """``path``, after checking that it is not inside the checkout."""
    assert not path.resolve().is_relative_to(ROOT.resolve()), f"{path} is inside {ROOT}"
    return path


@pytest.fixture(scope="session")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> Wheels:
    if not any(WHEELHOUSE.glob("hatchling-*.whl")):
        pytest.fail(f"no third-party wheels in {WHEELHOUSE}: run `make wheelhouse` (`make "
                    "test` does) before the packaging tests")
    out = outside_checkout(tmp_path_factory.mktemp("wheels"))
    try:
        built = build_wheels(out)
    except RuntimeError as exc:  # no build environment, or a build that failed: say which
        pytest.fail(str(exc))
    assert RUNNING in built.seqbus, f"no seqbus wheel for the running CPython {RUNNING}: {built}"
    return Wheels(out, built.seqbus[RUNNING], built.seqc, built.seqbus, built.absent)


@pytest.fixture(scope="session")
def wheel_venv(wheels: Wheels, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    """A fresh virtual environment with the two wheels installed (their dependencies from
    the wheelhouse)."""
    here = outside_checkout(tmp_path_factory.mktemp("wheel-venv"))
    venv = make_venv(here / "venv")
    venv.pip_install(str(wheels.seqbus), str(wheels.seqc), cwd=here)
    return venv


@pytest.fixture(scope="session")
def sdk_venv(wheels: Wheels, tmp_path_factory: pytest.TempPathFactory) -> Venv:
    """A fresh virtual environment with the ``seqbus`` wheel alone: no seqc, no extras."""
    here = outside_checkout(tmp_path_factory.mktemp("sdk-venv"))
    venv = make_venv(here / "venv")
    venv.pip_install(str(wheels.seqbus), cwd=here)
    return venv


@pytest.fixture(scope="session", params=SUPPORTED)
def python_version(request: pytest.FixtureRequest, wheels: Wheels) -> str:
    """Each supported CPython version ("3.11", ...); skipped where the machine has none."""
    version: str = request.param
    if version in wheels.absent:
        pytest.skip(wheels.absent[version])
    assert version in wheels.by_python, f"CPython {version}: neither a wheel nor a reason"
    return version


def _venv_for(version: str, wheels: Wheels, tmp_path_factory: pytest.TempPathFactory,
              name: str, *installs: Path) -> Venv:
    python = find_python(version)
    assert python is not None, f"CPython {version} built a wheel but is no longer found"
    here = outside_checkout(tmp_path_factory.mktemp(f"{name}-{version}"))
    venv = make_venv(here / "venv", python)
    version_there = venv.run([venv.python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"],
                             here).strip()
    assert version_there == version, (python, version_there)
    venv.pip_install(*map(str, installs), cwd=here)
    return venv


@pytest.fixture(scope="session")
def py_wheel_venv(python_version: str, wheels: Wheels, request: pytest.FixtureRequest,
                  tmp_path_factory: pytest.TempPathFactory) -> Venv:
    """``wheel_venv`` for each CPython (the same environment for the running one)."""
    if python_version == RUNNING:
        venv: Venv = request.getfixturevalue("wheel_venv")
        return venv
    return _venv_for(python_version, wheels, tmp_path_factory, "wheel-venv",
                     wheels.by_python[python_version], wheels.seqc)


@pytest.fixture(scope="session")
def py_sdk_venv(python_version: str, wheels: Wheels, request: pytest.FixtureRequest,
                tmp_path_factory: pytest.TempPathFactory) -> Venv:
    """``sdk_venv`` for each CPython (the same environment for the running one)."""
    if python_version == RUNNING:
        venv: Venv = request.getfixturevalue("sdk_venv")
        return venv
    return _venv_for(python_version, wheels, tmp_path_factory, "sdk-venv",
                     wheels.by_python[python_version])


def rfq_config(workdir: Path, listen: list[str]) -> tuple[Path, int]:
    """A bus of one sequencer (replayer on a thread of it) and UDP unicast to ``listen``: the
    configuration file and the sequencer's upstream port."""
    config = workdir / "bus.toml"
    upstream, replayer = free_udp_port(), free_udp_port()
    config.write_text(f"""\
[bus]
session = "RFQ0000001"

[sequencer]
upstream = "127.0.0.1:{upstream}"
journal_dir = "{workdir / "journal"}"
replayer_in_process = true

[downstream]
transport = "udp-unicast"
subscribers = [{", ".join(f'"{a}"' for a in listen)}]

[replayer]
listen = "127.0.0.1:{replayer}"

[node]
replayers = ["127.0.0.1:{replayer}"]
""")
    return config, upstream


def run_rfq_desk(venv: Venv, workdir: Path, processes: Processes, requester: list[str],
                 path: list[str], *, cwd: Path | None = None, count: int = 1000
                 ) -> dict[str, object]:
    """A sequencer, the rfq dealer (``seqbus node rfq.dealer:Dealer``, rewinding) and the
    requester command ``requester`` (``rfq-request`` or ``python -m rfq.client``), all from
    ``venv``, run in ``cwd`` (default ``workdir``, which holds the configuration and the
    journal); ``path``: ``--path`` arguments that make ``rfq`` importable to the dealer when
    it is not installed. Returns the requester's summary once it has exited, after
    checking that it got ``count`` answers, one per request, each the dealer's price."""
    dealer_at, requester_at = f"127.0.0.1:{free_udp_port()}", f"127.0.0.1:{free_udp_port()}"
    config, upstream = rfq_config(workdir, [dealer_at, requester_at])
    env = venv.env
    cwd = cwd or workdir
    seq = processes.start("sequencer", [venv.bin("seqbus"), "sequencer", "-c", str(config)],
                          env, cwd=cwd, inherit_env=False)
    assert wait_for(lambda: udp_bound(upstream), 60) and seq.poll() is None, processes.logs()
    processes.start("dealer", [venv.bin("seqbus"), "node", "rfq.dealer:Dealer", "-c",
                               str(config), "--account", "DEALER", "--rewind", "--listen",
                               dealer_at, *path], env, cwd=cwd, inherit_env=False)
    client = processes.start("requester", [*requester, "-c", str(config), "--count",
                                           str(count), "--listen", requester_at],
                             env, cwd=cwd, inherit_env=False)
    status = client.wait(timeout=180)
    assert status == 0, processes.logs()
    summary: dict[str, object] = json.loads(processes.log("requester").strip().splitlines()[-1])
    assert summary == {"requests": count, "answered": count, "duplicates": 0,
                       "refused_expected": count // 10, "wrong": []}, processes.logs()
    return summary


def copy_rfq(dest: Path) -> Path:
    """The example application's sources (nothing built or generated) at ``dest``."""
    shutil.copytree(RFQ, dest, ignore=shutil.ignore_patterns(
        "build", "dist", "messages", "*.egg-info", "__pycache__"))
    return dest
