"""``seqbus new`` (issue 29, item 2): from the installed seqbus wheel, in a fresh virtual
environment outside the checkout, it writes a project (a schema, a pyproject.toml using the seqc
build hook, two typed nodes, harness tests, a one- and a three-sequencer bus, a README) that
installs as its README says (``pip install --find-links DIR -e '.[dev]'``, DIR the wheels'
directory: seqc and seqbus are not on PyPI), and whose ``pytest`` and ``mypy --strict`` pass at
once; each fails on a broken node. On each CPython of 3.11+ the machine has. Bad input is
refused naming what is wrong."""

from __future__ import annotations

import subprocess
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from seqbus.cli import main as seqbus_main
from tests.packaging.conftest import Wheels
from tests.packaging.scaffold import NAME, Project, ledger_project


@pytest.fixture(scope="module")
def project(python_version: str, wheels: Wheels,
            tmp_path_factory: pytest.TempPathFactory) -> Project:
    """The project on each CPython the machine has (``python_version``: the others are
    skipped, saying where they were looked for)."""
    return ledger_project(wheels, tmp_path_factory, python_version)


@contextmanager
def edited(path: Path, old: str, new: str) -> Iterator[None]:
    """``path`` with ``old`` replaced by ``new`` while the block runs."""
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new))
    try:
        yield
    finally:
        path.write_text(text)


def _run(project: Project, args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=project.path, env=project.venv.env, capture_output=True,
                          text=True, timeout=300, check=False)


@pytest.mark.slow
@pytest.mark.packaging
def test_a_new_project_installs_and_its_tests_and_type_checks_pass(project: Project) -> None:
    path, venv = project.path, project.venv
    package = path / "src" / NAME
    for name in ("README.md", "pyproject.toml", ".gitignore", "bus.toml", "cluster.toml",
                 f"tests/test_{NAME}.py", f"src/{NAME}/{NAME}.idl", f"src/{NAME}/nodes.py",
                 f"src/{NAME}/py.typed"):
        assert (path / name).is_file(), name
    pyproject = tomllib.loads((path / "pyproject.toml").read_text())
    assert "seqc>=0.1" in pyproject["build-system"]["requires"]
    assert pyproject["tool"]["hatch"]["build"]["hooks"]["seqc"]["python-package"] == {
        NAME: f"{NAME}.messages"}
    # the editable install generated and compiled the messages beside the package
    assert (package / "messages" / "node.py").is_file()
    # with the schema's IR beside it: an archive of the project's journal needs no seqc
    shipped = venv.run([venv.python, "-c", "from seqbus.archive import package_ir; "
                        f"print(package_ir('{NAME}.messages')[1])"], path)
    assert shipped.strip() == NAME, shipped
    assert venv.module_file(f"{NAME}.messages", path).resolve() == (
        package / "messages" / "__init__.py").resolve()
    # seqc is a build requirement only; pyarrow is nothing this project needs
    absent = venv.run([venv.python, "-c", "import importlib.util as u; "
                       "print([m for m in ('seqc', 'pyarrow') if u.find_spec(m)])"], path)
    assert absent.strip() == "[]"

    out = venv.run([venv.bin("pytest"), "-q", "-p", "no:cacheprovider"], path)
    assert "2 passed" in out, out
    out = venv.run([venv.bin("mypy"), "--strict", "--no-incremental"], path)
    assert out.startswith("Success: no issues found"), out

    # each check can fail: a ledger whose state depends on its instance breaks the late
    # joiner's hash, and a wrong type in the nodes fails mypy naming the line
    nodes = package / "nodes.py"
    with edited(nodes, "self.balances[dst] += amount",
                "self.balances[dst] += amount + (self.instance == 3)"):
        failed = _run(project, [venv.bin("pytest"), "-q", "-p", "no:cacheprovider"])
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert f"FAILED tests/test_{NAME}.py::test_a_hot_backup_takes_over" in failed.stdout
    with edited(nodes, "self.handled += 1", "self.handled += '1'"):
        failed = _run(project, [venv.bin("mypy"), "--strict", "--no-incremental"])
    assert failed.returncode == 1 and f"src/{NAME}/nodes.py:" in failed.stdout, failed.stdout


@pytest.mark.slow
@pytest.mark.packaging
def test_a_missing_extra_is_named_with_the_pip_install_that_adds_it(project: Project) -> None:
    venv = project.venv  # seqbus alone: no pyarrow
    done = _run(project, [venv.bin("seqbus"), "archive", "verify", str(project.path)])
    assert done.returncode == 1
    assert done.stderr.strip() == ("seqbus archive: error: this needs pyarrow, which is not "
                                   "installed: pip install 'seqbus[archive]'"), done.stderr


def test_new_refuses_a_directory_in_use_and_a_name_that_makes_no_package(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "used").mkdir()
    (tmp_path / "used" / "notes.txt").write_text("mine")
    assert seqbus_main(["new", str(tmp_path / "used")]) == 1
    assert "is not an empty directory: give a new PATH" in capsys.readouterr().err
    assert (tmp_path / "used" / "notes.txt").read_text() == "mine"
    assert list((tmp_path / "used").iterdir()) == [tmp_path / "used" / "notes.txt"]

    for name in ("2fast", "class", "seqbus", "a__b"):
        assert seqbus_main(["new", str(tmp_path / "x"), "--name", name]) == 1
        err = capsys.readouterr().err
        assert f"{name!r} does not make a package name: give --name" in err, err
    assert not (tmp_path / "x").exists()


def test_new_writes_a_package_named_after_the_path(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert seqbus_main(["new", str(tmp_path / "My-Desk"), "--port-base", "24000"]) == 0
    capsys.readouterr()
    root = tmp_path / "My-Desk"
    assert tomllib.loads((root / "pyproject.toml").read_text())["project"]["name"] == "My-Desk"
    assert (root / "src" / "my_desk" / "my_desk.idl").read_text().count("package my_desk;") == 1
    nodes = (root / "src" / "my_desk" / "nodes.py").read_text()
    assert "from my_desk.messages import (" in nodes and "class Ledger(MyDeskNode):" in nodes
    assert "{{" not in "".join(p.read_text() for p in root.rglob("*") if p.is_file())
    bus = tomllib.loads((root / "bus.toml").read_text())
    assert bus["sequencer"]["upstream"] == "127.0.0.1:24000"
    assert bus["downstream"]["subscribers"][0] == "127.0.0.1:24040"
    assert "127.0.0.1:24040" in (root / "README.md").read_text()
