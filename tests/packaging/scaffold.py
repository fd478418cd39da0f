"""The project ``seqbus new`` writes, installed as its README says into a fresh virtual
environment outside the checkout that holds the ``seqbus`` wheel alone (no seqc: the build
hook's requirements come through ``--find-links``, as the README tells): made once per session
and shared by test_new_project.py and test_up.py (building it compiles its codec)."""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

import pytest

from scripts.wheels import find_python
from seqbus.up import SLOTS_FROM, bound_udp_ports
from tests.packaging.conftest import RUNNING, Venv, Wheels, make_venv, outside_checkout

#: The project's name, and so its package.
NAME = "ledger"
#: Ports a project's buses use after their base.
PORTS = 100


@dataclass
class Project:
    venv: Venv
    path: Path
    port_base: int

    def slot(self, n: int) -> str:
        """The ``n``-th node slot (0-based) of its buses."""
        return f"127.0.0.1:{self.port_base + SLOTS_FROM + n}"


_made: dict[tuple[Path, str], Project] = {}


def free_port_base() -> int:
    """A base whose :data:`PORTS` ports no UDP or TCP socket of this namespace holds (read from
    /proc/net, not probed), below the ephemeral range."""
    rng = random.SystemRandom()
    for _ in range(200):
        base = rng.randrange(20000, 30000 - PORTS, 100)
        taken = bound_udp_ports() or set()
        tcp = set()
        for name in ("/proc/net/tcp", "/proc/net/tcp6"):
            if Path(name).exists():
                for line in Path(name).read_text().splitlines()[1:]:
                    tcp.add(int(line.split()[1].rsplit(":", 1)[1], 16))
        if not (taken | tcp) & set(range(base, base + PORTS)):
            return base
    raise RuntimeError("no free block of ports")


def ledger_project(wheels: Wheels, tmp_path_factory: pytest.TempPathFactory,
                   version: str = RUNNING) -> Project:
    """``seqbus new ledger`` from the seqbus wheel of CPython ``version`` (the one running
    pytest by default), then the README's ``pip install --find-links DIR -e '.[dev]'``
    (offline: the third-party wheels from the wheelhouse)."""
    if (wheels.dir, version) in _made:
        return _made[wheels.dir, version]
    python = find_python(version)
    assert python is not None and version in wheels.by_python, f"no CPython {version} here"
    here = outside_checkout(tmp_path_factory.mktemp(f"new-project-{version}"))
    venv = make_venv(here / "venv", python)
    venv.pip_install(str(wheels.by_python[version]), cwd=here)
    base = free_port_base()
    venv.run([venv.bin("seqbus"), "new", NAME, "--port-base", str(base)], here)
    path = here / NAME
    readme = (path / "README.md").read_text()
    # the README names the directory the installed seqbus came from, which holds seqc too
    command = f"pip install --find-links {wheels.dir} -e '.[dev]'"
    assert command in readme, readme
    venv.pip_install("--find-links", str(wheels.dir), "-e", ".[dev]", cwd=path)
    _made[wheels.dir, version] = Project(venv, path, base)
    return _made[wheels.dir, version]
