"""seqc in an application's own package build (issue 17): ``pip install .`` of examples/rfq
(hatchling with the seqc build hook) in a fresh virtual environment outside the checkout
generates and compiles the application's codecs; nothing generated is in its sources. The
installed application type-checks against the stubs the build generated and runs against a
sequencer. An editable install writes the generated package into the source tree instead."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.conftest import VENV_BIN, Processes
from tests.packaging.conftest import (
    EXT_SUFFIX, Wheels, copy_rfq, make_venv, outside_checkout, run_rfq_desk,
)

pytestmark = [pytest.mark.slow, pytest.mark.packaging]


def test_pip_install_of_an_application_generates_and_compiles_its_codecs(
    wheels: Wheels, tmp_path: Path, processes: Processes
) -> None:
    here = outside_checkout(tmp_path)
    src = copy_rfq(here / "rfq-desk")
    venv = make_venv(here / "venv")
    # seqc and seqbus (the build's requirements, and seqbus the application's dependency)
    # from the wheels; hatchling and the rest from the wheelhouse
    venv.pip_install("--find-links", str(wheels.dir), str(src), cwd=here)
    assert not (src / "src" / "rfq" / "messages").exists(), "generated into the sources"
    site = venv.path.resolve()
    codec = venv.module_file("rfq.messages._codec", here).resolve()
    assert codec.is_relative_to(site) and codec.name == f"_codec{EXT_SUFFIX}", codec
    assert (codec.parent / "_codec.pyi").is_file() and (codec.parent / "py.typed").is_file()

    # the application's code, as installed, is mypy --strict clean against the generated stubs
    check = subprocess.run(
        [str(VENV_BIN / "mypy"), "--strict", "--no-incremental", "--python-executable",
         venv.python, "-p", "rfq"], cwd=here, capture_output=True, text=True, timeout=300,
        check=False)
    assert check.returncode == 0, check.stdout + check.stderr

    run_rfq_desk(venv, here, processes, [venv.bin("rfq-request")], [])


def test_an_editable_install_generates_into_the_source_tree(wheels: Wheels,
                                                            tmp_path: Path) -> None:
    here = outside_checkout(tmp_path)
    src = copy_rfq(here / "rfq-desk")
    venv = make_venv(here / "venv")
    venv.pip_install("--find-links", str(wheels.dir), "-e", str(src), cwd=here)
    generated = src / "src" / "rfq" / "messages"
    assert (generated / f"_codec{EXT_SUFFIX}").is_file() and (generated / "node.py").is_file()
    assert venv.module_file("rfq.messages", here).resolve() == (generated / "__init__.py")
    out = venv.run([venv.python, "-c", "from rfq.messages import Quote; "
                    "print(Quote.decode(Quote(request_id=7, symbol='AAPL', bid=1, ask=2, "
                    "quantity=3, valid_until=4).encode()).request_id)"], here)
    assert out.strip() == "7"
