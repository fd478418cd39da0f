"""The shared golden vectors (schemas/vectors/): the Python side of the byte-identity proof.

cargo test (rust/crates/codecs/tests/vectors.rs) checks the same files with the Rust codecs.
"""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

from scripts.generate import python_module
from tests.compiler.vectors import VECTORS, canonical_json, render

FILES = sorted(VECTORS.glob("*/*.bin"))


def test_committed_vectors_match_what_the_codecs_make(generated_packages: Path) -> None:
    fresh = render()
    committed = {str(p.relative_to(VECTORS)): p.read_bytes()
                 for p in VECTORS.glob("*/*") if p.suffix in (".bin", ".json")}
    assert sorted(committed) == sorted(fresh), "run `python -m tests.compiler.vectors`"
    for rel, content in fresh.items():
        assert committed[rel] == content, rel


@pytest.mark.parametrize("path", FILES, ids=[f"{p.parent.name}/{p.stem}" for p in FILES])
def test_vector_decodes_to_its_json_and_back(path: Path, generated_packages: Path) -> None:
    module = importlib.import_module(python_module(path.parent.name))
    data = path.read_bytes()
    view = module.decode(data)
    assert type(view).__name__ == path.stem.split(".")[0] + "View"
    assert canonical_json(view.to_dict()) + "\n" == path.with_suffix(".json").read_text("utf-8")
    cls = type(view).__name__[: -len("View")]
    assert getattr(module, cls).from_dict(view.to_dict()).encode() == data
