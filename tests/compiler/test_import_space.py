"""Where generated code lives (issue 13): the bus's schema inside ``seqbus``, each example's
beside it, nothing generated under a generic top-level name; ``--python-package`` places a
package anywhere."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _imports(tmp_path: Path, module: str) -> subprocess.CompletedProcess[str]:
    # the project's interpreter, outside the checkout (no repository root on sys.path)
    return subprocess.run([sys.executable, "-c", f"import {module}"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("name", ["bus", "common", "exchange", "pingpong"])
def test_no_generated_package_takes_a_generic_top_level_name(tmp_path: Path, name: str) -> None:
    res = _imports(tmp_path, name)
    assert res.returncode == 1
    assert f"No module named '{name}'" in res.stderr


def test_the_bus_schema_ships_inside_seqbus(tmp_path: Path) -> None:
    res = subprocess.run(
        [sys.executable, "-c", "from seqbus.bus import ClockTick, BusNode; import seqbus.bus as b;"
         "print(b.SCHEMA_ID, ClockTick.TEMPLATE_ID, b.__file__)"],
        cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    schema_id, template_id, path = res.stdout.split()
    assert (schema_id, template_id) == ("1", "1")
    assert Path(path).resolve().parent == ROOT / "runtime" / "seqbus" / "bus"


def test_python_package_option_names_the_package(tmp_path: Path) -> None:
    seqc = [sys.executable, "-m", "seqc.cli", "generate", str(ROOT / "schemas" / "bus.idl"),
            "-o", str(tmp_path), "--layout", "flat", "--no-build"]
    res = subprocess.run([*seqc, "--python-package", "bus=acme.wire.control"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "acme" / "wire" / "control" / "_codec.pyx").exists()
    assert not (tmp_path / "bus").exists()
    res = subprocess.run([*seqc, "--python-package", "exchange=acme.x"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode != 0 and "no schema given has package 'exchange'" in res.stderr
    res = subprocess.run([*seqc, "--python-package", "bus=acme.class"],
                         capture_output=True, text=True, timeout=120)
    assert res.returncode != 0 and "IDL_PACKAGE=python.package" in res.stderr
