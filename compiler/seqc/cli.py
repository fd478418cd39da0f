"""The ``seqc`` command: generate, build, ir, check, compat."""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from seqc import compile_files, gen_cpp, gen_python, naming
from seqc.diagnostics import CompileError
from seqc.ir import Schema


def _package_options(option: str, form: str, valid: Callable[[str], bool], pairs: list[str],
                     schemas: list[Schema]) -> dict[str, str]:
    """``--OPTION IDL=NAME`` options (``--python-package``, ``--java-package``,
    ``--cpp-namespace``) as a dict, each name checked by ``valid`` and each IDL package against
    the schemas given."""
    known = {s.package for s in schemas}
    out = {}
    for pair in pairs:
        idl, sep, name = pair.partition("=")
        if not sep or not valid(name):
            raise SystemExit(f"seqc: {option} takes IDL_PACKAGE={form}, not {pair!r}")
        if idl not in known:
            raise SystemExit(f"seqc: {option} {pair}: no schema given has package "
                             f"{idl!r} (given: {', '.join(sorted(known))})")
        out[idl] = name
    return out


#: Targets besides Python: language → the module generating it. Each has
#: ``generate(schema) -> {relative path: text}`` and ``generate_index(schemas)`` (the files
#: shared by every schema of one output directory: support code, an index module).
TARGETS = {
    "rust": "seqc.gen_rust",
    "cpp": "seqc.gen_cpp",
    "java": "seqc.gen_java",
    "java-node": "seqc.gen_java_node",
}


def _generate(args: argparse.Namespace) -> int:
    schemas = compile_files(args.schemas)
    langs = args.lang or ["python"]
    out = Path(args.output)
    # each language's --OPTION IDL=NAME: (option, its form, check, generate()'s keyword)
    options = {
        "python": ("--python-package", "python.package", naming.is_python_package,
                   "python_package", args.python_package),
        "java": ("--java-package", "java.package", naming.is_java_package, "java_package",
                 args.java_package),
        "cpp": ("--cpp-namespace", "name::space", gen_cpp.is_namespace, "namespace",
                args.cpp_namespace),
    }
    named = {lang: (kw, _package_options(option, form, valid, pairs or [], schemas))
             for lang, (option, form, valid, kw, pairs) in options.items()}
    for lang in langs:
        target = str(out / lang if args.layout == "tree" else out)
        gen: Any = gen_python if lang == "python" else importlib.import_module(TARGETS[lang])
        kw, names = named.get("java" if lang == "java-node" else lang, ("", {}))
        for schema in schemas:
            opts = {kw: names[schema.package]} if schema.package in names else {}
            gen_python.write(gen.generate(schema, **opts), target)
        if lang != "python":
            gen_python.write(gen.generate_index(schemas), target)
    if "python" in langs and not args.no_build:
        from seqc.build import build
        build(str(out / "python" if args.layout == "tree" else out))
    return 0


def _build(args: argparse.Namespace) -> int:
    from seqc.build import build
    built = build(args.dir, force=args.force, quiet=not args.verbose)
    for p in built:
        print(f"built {p.parent.name}", file=sys.stderr)
    return 0


def _ir(args: argparse.Namespace) -> int:
    from seqc.ir import to_json
    schemas = compile_files(args.schemas)
    for s in schemas:
        sys.stdout.write(to_json(s))
    return 0


def _check(args: argparse.Namespace) -> int:
    schemas = compile_files(args.schemas)
    for s in schemas:
        print(f"{s.source}: ok (package {s.package}, schema {s.schema_id} version {s.version}, "
              f"{len(s.messages)} messages)")
    return 0


def _compat(args: argparse.Namespace) -> int:
    from seqc.compat import compare, render
    old = compile_files([args.old])[0]
    new = compile_files([args.new])[0]
    changes = compare(old, new)
    text = render(changes)
    if text:
        print(text)
    breaking = [c for c in changes if c.breaking]
    print(f"{len(breaking)} breaking change{'s' if len(breaking) != 1 else ''}",
          file=sys.stderr)
    return 1 if breaking else 0


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="seqc", description="The seqbus IDL compiler.")
    sub = p.add_subparsers(dest="command", required=True)
    g = sub.add_parser("generate", help="generate code for schemas")
    g.add_argument("schemas", nargs="+", metavar="SCHEMA")
    g.add_argument("-o", "--output", required=True, metavar="DIR")
    g.add_argument("--lang", action="append", choices=["python", *TARGETS],
                   help="target language (repeatable; default python)")
    g.add_argument("--no-build", action="store_true", help="do not compile the Cython")
    g.add_argument("--python-package", action="append", metavar="IDL=DOTTED",
                   help="import the Python package of IDL package IDL as DOTTED (e.g. "
                   "exchange=myapp.messages: written to myapp/messages/); repeatable; "
                   "default: the IDL package name")
    g.add_argument("--cpp-namespace", action="append", metavar="IDL=NS",
                   help="put the C++ code of IDL package IDL in namespace NS (e.g. "
                   "exchange=myapp::messages); repeatable; default: the IDL package, dots as ::")
    g.add_argument("--java-package", action="append", metavar="IDL=PKG",
                   help="put the Java code of IDL package IDL in Java package PKG (e.g. "
                   "exchange=com.example.exchange: written to com/example/exchange/); "
                   "repeatable; default: the IDL package")
    g.add_argument("--layout", choices=["tree", "flat"], default="tree",
                   help="tree: DIR/<lang>/... (DIR/python/<pkg>, DIR/rust/<pkg>.rs; default); "
                   "flat: DIR/<pkg>")
    g.set_defaults(func=_generate)
    b = sub.add_parser("build", help="compile generated Cython packages under DIR in place")
    b.add_argument("dir", metavar="DIR", nargs="+")
    b.add_argument("--force", action="store_true")
    b.add_argument("-v", "--verbose", action="store_true")
    b.set_defaults(func=_build)
    i = sub.add_parser("ir", help="print the IR")
    i.add_argument("schemas", nargs="+", metavar="SCHEMA")
    i.add_argument("--json", action="store_true", help="JSON (the only format)")
    i.set_defaults(func=_ir)
    c = sub.add_parser("check", help="parse and validate only")
    c.add_argument("schemas", nargs="+", metavar="SCHEMA")
    c.set_defaults(func=_check)
    k = sub.add_parser("compat", help="list breaking changes from OLD to NEW")
    k.add_argument("old", metavar="OLD")
    k.add_argument("new", metavar="NEW")
    k.set_defaults(func=_compat)
    return p


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return int(args.func(args))
    except CompileError as exc:
        print(exc.render(), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
