"""The .pyi stubs make user code of generated packages mypy --strict clean (typing/usage.py,
with reveal_type expectations) and let mypy catch mistakes (typing/mistakes.py)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from mypy import api

HERE = Path(__file__).parent / "typing"
ROOT = HERE.parent.parent.parent


def run_mypy(path: Path) -> list[tuple[int, str, str]]:
    env_path = os.pathsep.join([str(ROOT), str(ROOT / "runtime")])
    old = os.environ.get("MYPYPATH")
    os.environ["MYPYPATH"] = env_path
    try:
        # --config-file "": the project's mypy settings are for its own code, not this test
        out, err, _ = api.run(["--config-file", "", "--python-version", "3.11", "--strict",
                               "--no-incremental", "--show-error-codes", "--no-error-summary",
                               "--hide-error-context", str(path)])
    finally:
        if old is None:
            del os.environ["MYPYPATH"]
        else:
            os.environ["MYPYPATH"] = old
    assert not err, err
    found = []
    for line in out.splitlines():
        m = re.match(rf".*{re.escape(path.name)}:(\d+): (\w+): (.*)", line)
        assert m, line
        found.append((int(m.group(1)), m.group(2), m.group(3)))
    return found


def expectations(path: Path, marker: str) -> dict[int, str]:
    out = {}
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if f"# {marker}: " in line:
            out[n] = line.split(f"# {marker}: ", 1)[1]
    return out


def test_user_code_is_strict_clean_and_types_are_what_they_say(generated_packages: Path) -> None:
    path = HERE / "usage.py"
    found = run_mypy(path)
    errors = [f for f in found if f[1] == "error"]
    assert errors == []
    revealed = {n: text for n, kind, text in found if kind == "note"}
    expected = expectations(path, "revealed")
    assert len(expected) >= 15
    for n, want in expected.items():
        assert n in revealed, f"line {n}: nothing revealed"
        got = re.sub(r'^Revealed type is "(.*)"$', r"\1", revealed[n])
        assert got == want, f"line {n}"


def test_mistakes_are_caught(generated_packages: Path) -> None:
    path = HERE / "mistakes.py"
    found = {n: text for n, kind, text in run_mypy(path) if kind == "error"}
    for n, want in expectations(path, "error").items():
        assert n in found and want in found[n], (n, found.get(n))
