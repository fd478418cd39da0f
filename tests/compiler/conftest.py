"""Fixtures of the compiler tests: compiled test schemas, cached across runs by content hash.

Compiling Cython costs seconds per module on a small machine, so the test schemas are built
once (in parallel, by one ``seqc build``) into a directory named after the hash of the
generated sources and of the compiler, and reused until either changes.
"""

from __future__ import annotations

import hashlib
import importlib
import shutil
import sys
import tempfile
from pathlib import Path
from types import ModuleType

import pytest

from seqc import compile_files, gen_python
from seqc.build import build

HERE = Path(__file__).parent
ROOT = HERE.parent.parent
#: The schemas the tests compile, each on its own (some share a schema id on purpose).
TEST_SCHEMAS = [
    HERE / "cases" / "ok_all_types" / "input.idl",
    HERE / "evolution" / "v1.idl",
    HERE / "evolution" / "v2.idl",
    HERE / "evolution" / "v3.idl",
]


def _generate_all() -> dict[str, str]:
    files: dict[str, str] = {}
    for path in TEST_SCHEMAS:
        for schema in compile_files([str(path)]):
            files.update(gen_python.generate(schema))
    return files


@pytest.fixture(scope="session")
def test_packages() -> Path:
    """A directory on sys.path holding the compiled test packages (alltypes, evo_v1..3)."""
    files = _generate_all()
    digest = hashlib.sha256()
    for rel in sorted(files):
        digest.update(rel.encode() + b"\0" + files[rel].encode() + b"\0")
    digest.update(sys.version.encode())
    digest.update((ROOT / "runtime" / "seqbus" / "_codec_support.pxd").read_bytes())
    out = Path(tempfile.gettempdir()) / "seqc-test-packages" / digest.hexdigest()[:16]
    gen_python.write(files, str(out))
    build(str(out), optimize="-O0")  # fast to compile; speed is measured by benchmarks
    for stale in out.parent.iterdir():  # builds of older test schemas or compilers
        if stale != out and stale.is_dir():
            shutil.rmtree(stale, ignore_errors=True)
    if str(out) not in sys.path:
        sys.path.insert(0, str(out))
    return out


@pytest.fixture(scope="session")
def generated_packages() -> Path:
    """The repository's generated packages (seqbus.bus, examples.*.messages), compiled in
    place (a no-op when `make setup` did it); returns the repository root."""
    build([str(ROOT / "runtime" / "seqbus"), str(ROOT / "examples")])
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    return ROOT


@pytest.fixture(scope="session")
def exchange(generated_packages: Path) -> ModuleType:
    return importlib.import_module("examples.exchange.messages")


@pytest.fixture(scope="session")
def alltypes(test_packages: Path) -> ModuleType:
    return importlib.import_module("alltypes")


@pytest.fixture(scope="session")
def evo(test_packages: Path) -> tuple[ModuleType, ModuleType, ModuleType]:
    return tuple(importlib.import_module(f"evo_v{i}") for i in (1, 2, 3))  # type: ignore[return-value]
