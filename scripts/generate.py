#!/usr/bin/env python3
"""Write, or with ``--check`` verify, every file seqc generates for this repository.

The table below is the one place that says which schema's code goes where:

* the bus's own schema (``schemas/bus.idl``) → the Python package ``seqbus.bus``, inside the
  runtime (``runtime/seqbus/bus/``), so it ships with ``seqbus``; its node base is
  ``seqbus.bus.node.BusNode``, not imported by ``seqbus.bus`` (``seqbus.node`` imports
  ``seqbus.bus``);
* each example's schema → a ``messages`` package inside its example
  (``examples/exchange/messages/`` is :mod:`examples.exchange.messages`);
* every schema → code for each other language (``TARGETS``): a Rust module in
  ``generated/rust/`` (the ``seqbus-codecs`` crate), beside the support module they share; a
  C++ header in ``generated/cpp/`` (over ``runtime/cpp/include``, the CMake package) with
  its node base beside it (``<package>_node.hpp``); Java codecs in ``generated/java/`` and
  the Java node bases (``seqc --lang java-node``, over ``seqbus-node``) in
  ``generated/java-node/``;
* the bus's schema → its IR as JSON, built into the archive readers
  (``rust/crates/archive/src/bus.ir.json``): control messages are always decoded by name.

``--check`` regenerates into memory and compares with the committed files: any changed,
missing or extra generated file is printed as a unified diff and the exit status is 1.
"""

from __future__ import annotations

import argparse
import difflib
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

#: IDL package → (schema, Python package, directory on sys.path the package is written under)
SCHEMAS = {
    "bus": ("schemas/bus.idl", "seqbus.bus", "runtime"),
    "exchange": ("examples/exchange/exchange.idl", "examples.exchange.messages", "."),
    "pingpong": ("examples/pingpong/pingpong.idl", "examples.pingpong.messages", "."),
}
PYTHON = list(SCHEMAS.values())
#: Schemas generated for Rust only: the compiler's case of every kind of field, so that
#: `cargo test` builds (and the codecs crate's tests run) what seqc writes for each of them.
RUST_ONLY = ["tests/compiler/cases/ok_all_types/input.idl"]
#: Generated code for every language besides Python: language → (seqc module, directory).
#: Every schema (the Python ones and RUST_ONLY) is generated for each.
TARGETS = {
    "rust": ("seqc.gen_rust", "generated/rust"),
    "cpp": ("seqc.gen_cpp", "generated/cpp"),
    "java": ("seqc.gen_java", "generated/java"),
    "java-node": ("seqc.gen_java_node", "generated/java-node"),
}
#: The Java package of each schema's code (seqc --java-package), inside seqbus's own namespace
#: as the Python packages are: generated/java/seqbus/examples/exchange/NewOrderDecoder.java.
JAVA_PACKAGES = {"bus": "seqbus.bus", "exchange": "seqbus.examples.exchange",
                 "pingpong": "seqbus.examples.pingpong", "alltypes": "seqbus.alltypes"}
#: The bus schema's IR, built into the archive crate.
BUS_IR = "rust/crates/archive/src/bus.ir.json"
#: Files of a generated package (anything else there, e.g. a compiled extension, is not ours).
GENERATED_SUFFIXES = {".pyx", ".py", ".pyi", ".typed", ".rs", ".json", ".hpp", ".java"}


def idl(package: str) -> Path:
    """The schema file of IDL package ``package`` (tests and benchmarks look them up here)."""
    return ROOT / SCHEMAS[package][0]


def python_module(package: str) -> str:
    """The import path of the generated Python package of IDL package ``package``."""
    return SCHEMAS[package][1]


def generate() -> dict[Path, str]:
    """Path (absolute) → text of every generated file."""
    import importlib

    from seqc import compile_files, gen_python

    files: dict[Path, str] = {}
    schemas = []
    for idl, package, root in PYTHON:
        (schema,) = compile_files([idl])
        schemas.append(schema)
        # seqbus.node runs admin commands with seqbus.bus's codecs, so seqbus.bus leaves its
        # node base to seqbus.bus.node (BusNode) instead of importing it: no import circle
        export_node = package != "seqbus.bus"
        for rel, text in gen_python.generate(schema, package, export_node=export_node).items():
            files[ROOT / root / rel] = text
    all_schemas = schemas + [compile_files([idl])[0] for idl in RUST_ONLY]
    for module, directory in TARGETS.values():
        gen = importlib.import_module(module)
        out: dict[str, str] = {}
        for schema in all_schemas:
            java = {"java_package": JAVA_PACKAGES[schema.package]} if "gen_java" in module else {}
            out.update(gen.generate(schema, **java))
        out.update(gen.generate_index(all_schemas))
        for rel, text in out.items():
            files[ROOT / directory / rel] = text
    from seqc.ir import to_json

    files[ROOT / BUS_IR] = to_json(schemas[0])
    return files


def committed() -> set[Path]:
    """The generated files in the tree now: everything in each generated package and in
    generated/rust with a source suffix."""
    dirs = [ROOT / root / package.replace(".", "/") for _, package, root in PYTHON]
    dirs += [ROOT / directory for _, directory in TARGETS.values()]
    found = {p for d in dirs if d.is_dir() for p in d.rglob("*")
             if p.is_file() and p.suffix in GENERATED_SUFFIXES and "__pycache__" not in p.parts}
    return found | {ROOT / BUS_IR}


def check(files: dict[Path, str]) -> int:
    failed = False
    for path in sorted(set(files) | committed()):
        rel = path.relative_to(ROOT)
        new = files[path].splitlines(True) if path in files else []
        old = path.read_text(encoding="utf-8").splitlines(True) if path.exists() else []
        if new != old or not path.exists():
            failed = True
            sys.stdout.writelines(difflib.unified_diff(old, new, f"{rel}", f"seqc output/{rel}"))
            if path not in files:
                print(f"extra file: {rel}")
            elif not path.exists():
                print(f"missing file: {rel}")
    if failed:
        print("generated code is out of date: run `make generate` and commit the result",
              file=sys.stderr)
        return 1
    print(f"generated code is up to date ({len(files)} files)")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare instead of writing")
    args = ap.parse_args(argv)
    import os

    os.chdir(ROOT)  # schema paths, and so the "generated by seqc from X" lines, are relative
    from seqc.diagnostics import CompileError

    try:
        files = generate()
    except CompileError as exc:
        print(exc.render(), file=sys.stderr)
        return 1
    if args.check:
        return check(files)
    from seqc import gen_python

    written = gen_python.write({str(p.relative_to(ROOT)): t for p, t in files.items()}, ".")
    for stale in sorted(committed() - set(files)):
        stale.unlink()
        written.append(f"removed {stale.relative_to(ROOT)}")
    for w in written:
        print(w)
    return 0


if __name__ == "__main__":
    sys.exit(main())
