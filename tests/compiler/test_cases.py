"""One folder per compiler case under cases/: ``input.idl`` plus what seqc must answer.

* ``err_*``: ``expected.txt`` holds the exact diagnostics (positions, source line, caret, hint).
* ``ok_*``: ``ir.json`` holds the IR and ``expected.pyi`` the typed surface of the generated
  Python package.

Run with ``SEQC_UPDATE_SNAPSHOTS=1`` to rewrite the expectations after a deliberate change,
then review the diff.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from seqc import compile_files, gen_python
from seqc.diagnostics import CompileError
from seqc.ir import to_json

CASES = Path(__file__).parent / "cases"
UPDATE = os.environ.get("SEQC_UPDATE_SNAPSHOTS") == "1"


def _check(path: Path, actual: str) -> None:
    if UPDATE:
        path.write_text(actual, encoding="utf-8")
    assert path.exists(), f"{path} is missing; run with SEQC_UPDATE_SNAPSHOTS=1"
    assert actual == path.read_text(encoding="utf-8")


@pytest.mark.parametrize("case", sorted(p.name for p in CASES.iterdir() if p.is_dir()))
def test_case(case: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(CASES / case)
    if case.startswith("err_"):
        with pytest.raises(CompileError) as info:
            compile_files(["input.idl"])
        _check(CASES / case / "expected.txt", info.value.render() + "\n")
    else:
        schemas = compile_files(["input.idl"])
        _check(CASES / case / "ir.json", "".join(to_json(s) for s in schemas))
        files = gen_python.generate(schemas[0])
        stub = next(text for name, text in files.items() if name.endswith("_codec.pyi"))
        _check(CASES / case / "expected.pyi", stub)


def test_every_error_of_a_file_is_reported_at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(CASES / "err_duplicates")
    with pytest.raises(CompileError) as info:
        compile_files(["input.idl"])
    codes = [d.code for d in info.value.diagnostics]
    assert codes.count("E013") == 1 and codes.count("E011") >= 3 and "E012" in codes


def test_error_format_is_file_line_col_code(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(CASES / "err_unknown_type")
    with pytest.raises(CompileError) as info:
        compile_files(["input.idl"])
    first = info.value.render().splitlines()[0]
    assert first == "input.idl:5:8: error[E010]: unknown type 'Prise'"
