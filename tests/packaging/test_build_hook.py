"""seqc in an application's own package build (issue 17): ``pip install .`` of examples/rfq
(hatchling with the seqc build hook) in a fresh virtual environment outside the checkout
generates and compiles the application's codecs; nothing generated is in its sources. The
installed application type-checks against the stubs the build generated and runs against a
sequencer. An editable install writes the generated package into the source tree instead. A
bad hook table or schema fails the build, naming the key or with seqc's report."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from seqc.hatch import SeqcBuildHook

from tests.conftest import VENV_BIN, Processes
from tests.packaging.conftest import (
    EXT_SUFFIX, Wheels, copy_rfq, make_venv, outside_checkout, run_rfq_desk,
)



@pytest.mark.slow
@pytest.mark.packaging
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


@pytest.mark.slow
@pytest.mark.packaging
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


def _hook(root: Path, config: dict[str, object]) -> SeqcBuildHook:
    """The hook as hatchling makes it for a wheel of the project at ``root``."""
    return SeqcBuildHook(str(root), config, None, None, str(root / "dist"), "wheel")


@pytest.mark.parametrize(("config", "message"), [
    ({}, "[tool.hatch.build.hooks.seqc] schemas: a list of .idl paths"),
    ({"schemas": ["missing.idl"]}, "schemas: no such file: missing.idl"),
    ({"schemas": ["rfq.idl"], "python-package": {"rfq": "rfq.class"}},
     "python-package: a table IDL package → dotted Python package"),
    ({"schemas": ["rfq.idl"], "python-package": {"quotes": "rfq.messages"}},
     "python-package names IDL packages no schema has: quotes"),
])
def test_the_build_hook_refuses_a_bad_table_naming_the_key(
    tmp_path: Path, config: dict[str, object], message: str
) -> None:
    (tmp_path / "rfq.idl").write_text("package rfq;\nschema 40 version 1;\n"
                                      "message Ping = 1 { id: u64; }\n")
    with pytest.raises(ValueError, match="seqc") as err:
        _hook(tmp_path, config).initialize("standard", {"force_include": {}})
    assert message in str(err.value)


def test_the_build_hook_fails_on_a_schema_error_with_seqcs_report(tmp_path: Path) -> None:
    (tmp_path / "rfq.idl").write_text("package rfq;\nschema 40 version 1;\n"
                                      "message Ping = 1 { id: u65; }\n")
    with pytest.raises(RuntimeError) as err:
        _hook(tmp_path, {"schemas": ["rfq.idl"]}).initialize("standard", {"force_include": {}})
    text = str(err.value)
    assert "rfq.idl:3:" in text and "error[" in text and "u65" in text and "^" in text, text
