"""docs/architecture.md stays true: it names every crate of the workspace and every Python
package, and the crates depend on each other without a cycle (dev-dependencies included)."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from tests.conftest import ROOT

DOC = (ROOT / "docs" / "architecture.md").read_text()


def workspace() -> dict[str, set[str]]:
    """crate → the workspace crates it uses (normal, dev and build dependencies)."""
    if shutil.which("cargo") is None:
        pytest.skip("cargo is not installed")
    meta = json.loads(subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--no-deps", "--offline"],
        cwd=ROOT / "rust", check=True, capture_output=True, text=True, timeout=120).stdout)
    names = {p["name"] for p in meta["packages"]}
    return {p["name"]: {d["name"] for d in p["dependencies"]} & names for p in meta["packages"]}


def test_every_crate_is_named_and_no_crate_depends_on_itself() -> None:
    crates = workspace()
    assert {"seqbus-core", "seqbus-config", "seqbus-transport", "seqbus-net"} <= crates.keys()
    assert [c for c in crates if f"`{c}`" not in DOC] == []
    for crate in crates:
        seen: set[str] = set()
        todo = list(crates[crate])
        while todo:
            c = todo.pop()
            assert c != crate, f"{crate} depends on itself through {sorted(seen)}"
            if c not in seen:
                seen.add(c)
                todo.extend(crates[c])


def test_every_python_package_is_named() -> None:
    packages = sorted(
        ".".join(p.parent.relative_to(base).parts)
        for base in (ROOT / "runtime", ROOT / "compiler")
        for p in base.glob("*/**/__init__.py")
        if "build" not in p.parts
    )
    assert "seqbus.archive" in packages and "seqc" in packages
    assert [p for p in packages if f"`{p}`" not in DOC] == []
