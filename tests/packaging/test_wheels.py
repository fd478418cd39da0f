"""The ``seqbus`` and ``seqc`` wheels installed into a fresh virtual environment outside the
checkout (issue 17): the wheel holds what maturin alone would leave out (the compiled Cython,
the codec support's .pxd, the examples the demo runs) under a tag that matches its contents;
seqc from the wheel generates and builds a user schema whose nodes run against a sequencer;
``seqbus demo`` runs with nothing of the repository."""

from __future__ import annotations

import base64
import hashlib
import os
import signal
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import ROOT, VENV_BIN, Processes
from tests.packaging.conftest import (
    EXT_SUFFIX, RFQ, Venv, Wheels, outside_checkout, run_rfq_desk,
)

pytestmark = [pytest.mark.slow, pytest.mark.packaging]

PY = f"cp{sys.version_info.major}{sys.version_info.minor}"


def test_seqbus_wheel_holds_the_compiled_modules_under_a_matching_manylinux_tag(
    wheels: Wheels,
) -> None:
    with zipfile.ZipFile(wheels.seqbus) as zf:
        names = set(zf.namelist())
        record = zf.read(next(n for n in names if n.endswith(".dist-info/RECORD"))).decode()
        for line in record.splitlines():  # every file listed, with its own hash and size
            name, digest, size = line.rsplit(",", 2)
            if name.endswith("/RECORD"):
                continue
            data = zf.read(name)
            sha = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            assert (digest, int(size)) == (f"sha256={sha}", len(data)), name
        assert {line.rsplit(",", 2)[0] for line in record.splitlines()} == names
    for required in (
        "seqbus/_core.abi3.so", "seqbus/_core.pyi", "seqbus/py.typed",
        f"seqbus/_codec_support{EXT_SUFFIX}", "seqbus/_codec_support.pxd",
        f"seqbus/bus/_codec{EXT_SUFFIX}", "seqbus/bus/_codec.pyi", "seqbus/bus/bus.idl",
        "seqbus/examples/exchange/demo_nodes.py", "seqbus/examples/exchange/exchange.idl",
        f"seqbus/examples/exchange/messages/_codec{EXT_SUFFIX}",
        f"seqbus/examples/pingpong/messages/_codec{EXT_SUFFIX}",
        "seqbus/spark/jars/seqbus-spark.jar",  # built by make setup, ignored by git
    ):
        assert required in names, required
    assert not [n for n in names if n.endswith(".c")], "Cython's C left in the wheel"
    _, _, py, abi, platform = wheels.seqbus.name.removesuffix(".whl").split("-")
    assert (py, abi) == (PY, PY)  # Cython extensions are built for one Python
    assert platform.startswith("manylinux_"), wheels.seqbus.name
    # auditwheel reads every ELF file of the wheel, the Cython ones too (maturin checked only
    # the Rust core): the tag they need is the tag the wheel carries
    show = subprocess.run([str(VENV_BIN / "auditwheel"), "show", str(wheels.seqbus)],
                          capture_output=True, text=True, timeout=120, check=True).stdout
    assert f'is consistent with the following platform tag: "{platform}"' in " ".join(
        show.split()), show


def test_the_installed_seqbus_is_the_wheel_not_the_checkout(wheel_venv: Venv,
                                                            tmp_path: Path) -> None:
    cwd = outside_checkout(tmp_path)
    site = wheel_venv.path.resolve()
    for module in ("seqbus", "seqbus._core", "seqbus._codec_support", "seqbus.bus._codec",
                   "seqbus.examples.exchange.messages._codec", "seqc"):
        assert wheel_venv.module_file(module, cwd).resolve().is_relative_to(site), module


def test_seqc_from_the_wheel_generates_and_builds_a_user_schema_whose_nodes_run(
    wheel_venv: Venv, tmp_path: Path, processes: Processes
) -> None:
    app = outside_checkout(tmp_path / "app")
    (app / "rfq").mkdir(parents=True)
    for source in (RFQ / "src" / "rfq").glob("*.*"):
        if source.suffix in (".py", ".idl"):
            (app / "rfq" / source.name).write_bytes(source.read_bytes())
    wheel_venv.run([wheel_venv.bin("seqc"), "generate", "rfq/rfq.idl", "-o", ".", "--layout",
                    "flat", "--python-package", "rfq=rfq.messages"], app)
    assert (app / "rfq" / "messages" / f"_codec{EXT_SUFFIX}").is_file()
    run_rfq_desk(wheel_venv, tmp_path, processes, [wheel_venv.python, "-m", "rfq.client"],
                 ["--path", str(app)], cwd=app)


def test_seqbus_demo_runs_from_the_wheel(wheel_venv: Venv, tmp_path: Path) -> None:
    proc = subprocess.Popen([wheel_venv.bin("seqbus"), "demo", "--orders", "3000"],
                            cwd=outside_checkout(tmp_path), env=wheel_venv.env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=300)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"the demo did not finish within 300 s:\n{err[-3000:]}")
    assert proc.returncode == 0, out + err
    assert "3,000 sent, 3,000 answered, 0 lost" in out, out
    assert "all equal" in out, out
    # the wheel runs the examples it ships, and says what the Spark report would need
    assert "Spark report skipped: pyspark and pyarrow not installed" in out, out
    assert str(ROOT) not in out + err
