"""docs/architecture.md stays true: it names every crate of the workspace and every Python
package, its table of the crates' dependencies is what ``cargo metadata`` says (a dependency
added or dropped without the table fails here), and the crates depend on each other without a
cycle (dev-dependencies included). The Python modules of ``seqbus`` import each other without
a circle, but for the one named below."""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT

DOC = (ROOT / "docs" / "architecture.md").read_text()


def metadata() -> dict[str, list[tuple[str, str]]]:
    """crate → (workspace crate it uses, kind: "normal", "dev" or "build")."""
    if shutil.which("cargo") is None:
        pytest.skip("cargo is not installed")
    meta = json.loads(subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--no-deps", "--offline"],
        cwd=ROOT / "rust", check=True, capture_output=True, text=True, timeout=120).stdout)
    names = {p["name"] for p in meta["packages"]}
    return {p["name"]: [(d["name"], d["kind"] or "normal") for d in p["dependencies"]
                        if d["name"] in names] for p in meta["packages"]}


def workspace() -> dict[str, set[str]]:
    """crate → the workspace crates it uses (normal, dev and build dependencies)."""
    return {crate: {d for d, _ in deps} for crate, deps in metadata().items()}


def documented_dependencies() -> dict[str, tuple[set[str], set[str]]]:
    """crate → (what it uses, what only its tests use), from docs/architecture.md's table
    ``| crate | uses | its tests also use |``: short names (``wire`` for ``seqbus-wire``),
    comma-separated, a note in parentheses after a name, ``—`` for none."""
    head = "| crate | uses | its tests also use |"
    assert head in DOC, f"docs/architecture.md has no table {head!r}"
    rows = DOC.split(head, 1)[1].split("\n\n", 1)[0].strip().splitlines()[1:]

    def names(cell: str) -> set[str]:
        bare = re.sub(r"\([^)]*\)", "", cell)
        return {f"seqbus-{n.strip()}" for n in bare.split(",") if n.strip() not in ("", "—")}

    table = {}
    for row in rows:
        crate, uses, tests = (c.strip() for c in row.strip("|").split("|"))
        table[crate.strip("`")] = (names(uses), names(tests))
    return table


def test_the_dependency_table_is_what_cargo_says() -> None:
    documented = documented_dependencies()
    actual = {
        crate: ({d for d, kind in deps if kind != "dev"},
                {d for d, kind in deps if kind == "dev"})
        for crate, deps in metadata().items()
    }
    assert sorted(documented) == sorted(actual), "crates in the table and in the workspace"
    wrong = {c: {"docs": documented[c], "cargo": actual[c]}
             for c in actual if documented[c] != actual[c]}
    assert wrong == {}, f"docs/architecture.md's dependency table is out of date: {wrong}"


def test_the_table_parser_sees_a_missing_dependency() -> None:
    """The check above can fail: a row with one dependency fewer parses to another set."""
    doc = documented_dependencies()
    assert doc["seqbus-net"][0] == {"seqbus-config", "seqbus-transport", "seqbus-journal",
                                    "seqbus-core", "seqbus-wire"}
    assert doc["seqbus-sim"] == ({"seqbus-core", "seqbus-wire"}, {"seqbus-archive"})


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


def _imports(package: Path, prefix: str) -> dict[str, set[str]]:
    """module → the modules of ``package`` it imports (anywhere in the file, functions and
    ``TYPE_CHECKING`` blocks included). A compiled module (``.pyx``, ``_core``) imports
    nothing of the package."""
    modules: dict[str, Path] = {}
    for path in package.rglob("*.py"):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        modules[".".join(parts)] = path
    compiled = {".".join(p.relative_to(package.parent).with_suffix("").parts)
                for p in package.rglob("*.pyx")} | {f"{prefix}._core"}

    def resolve(name: str) -> str | None:
        if name in compiled:
            return None
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {m: set() for m in modules}
    for module, path in modules.items():
        here = module if path.name == "__init__.py" else module.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = here.split(".")[: len(here.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules.keys() | compiled
                           else base for a in node.names]
            else:
                continue
            for target in targets:
                if target == prefix or target.startswith(prefix + "."):
                    found = resolve(target)
                    if found is not None and found != module:
                        graph[module].add(found)
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(found)


#: Circles allowed: none. (The last one, seqbus.node → admin → bus → bus.node → node, was cut
#: where it lived: seqbus.bus no longer imports its node base, seqbus.bus.node.BusNode.)
KNOWN: list[list[str]] = []


def test_the_python_modules_import_each_other_without_a_circle() -> None:
    found = circles(_imports(ROOT / "runtime" / "seqbus", "seqbus"))
    assert found == KNOWN, f"import circles in runtime/seqbus: {found}"


def test_a_circle_is_found() -> None:
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


#: The Python packages of docs/architecture.md's table, by directory; a module belongs to the
#: longest package that holds it.
PYTHON_PACKAGES = {
    "seqbus": ROOT / "runtime" / "seqbus",
    "seqbus.bus": ROOT / "runtime" / "seqbus" / "bus",
    "seqbus.archive": ROOT / "runtime" / "seqbus" / "archive",
    "seqbus.spark": ROOT / "runtime" / "seqbus" / "spark",
    "seqbus.scaffold": ROOT / "runtime" / "seqbus" / "scaffold",
    "seqc": ROOT / "compiler" / "seqc",
}
#: Compiled modules of the runtime that are not packages of their own.
COMPILED = ("seqbus._core", "seqbus._codec_support")
_PYX_IMPORT = re.compile(r"^\s*(?:from\s+([\w.]+)\s+c?import\s+([\w, ]+)|c?import\s+([\w.]+))",
                         re.MULTILINE)


def package_imports() -> dict[str, set[str]]:
    """package → what its modules import (``.py`` anywhere in the file, and the ``import`` and
    ``cimport`` lines of ``.pyx``): another package of the table, a compiled module of the runtime,
    or a third-party distribution's top-level name. The standard library is left out."""
    import sys

    owners = sorted(PYTHON_PACKAGES, key=len, reverse=True)

    def owner(module: str) -> str | None:
        for c in COMPILED:
            if module == c or module.startswith(c + "."):
                return c
        return next((p for p in owners if module == p or module.startswith(p + ".")), None)

    def named(module: str) -> str | None:
        top = module.split(".")[0]
        if top in sys.stdlib_module_names or top in ("__future__", "cython", "libc", "cpython"):
            return None
        return owner(module) or top

    found: dict[str, set[str]] = {p: set() for p in PYTHON_PACKAGES}
    for package, directory in PYTHON_PACKAGES.items():
        for path in [*directory.rglob("*.py"), *directory.rglob("*.pyx")]:
            if "build" in path.parts:
                continue
            base = directory.parents[package.count(".")]  # the directory on sys.path
            dotted = ".".join(path.relative_to(base).with_suffix("").parts)
            if owner(dotted.removesuffix(".__init__")) != package:
                continue  # a subpackage with a row of its own
            modules: list[str] = []
            if path.suffix == ".py":
                for node in ast.walk(ast.parse(path.read_text(), str(path))):
                    if isinstance(node, ast.Import):
                        modules += [a.name for a in node.names]
                    elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                        modules += [f"{node.module}.{a.name}" for a in node.names]
            else:
                for base, names, plain in _PYX_IMPORT.findall(path.read_text()):
                    modules += [plain] if plain else [
                        f"{base}.{n.split()[0]}" for n in names.split(",") if n.strip()]
            found[package] |= {n for m in modules if (n := named(m)) is not None} - {package}
    return found


def documented_packages() -> dict[str, set[str]]:
    """package → the names in backticks of its "built on" cell (a note in parentheses left
    out) in docs/architecture.md's table of Python packages."""
    head = "| package | what it owns | built on"
    rows = DOC.split(head, 1)[1].split("\n\n", 1)[0].strip().splitlines()[2:]
    table = {}
    for row in rows:
        cells = [c.strip() for c in row.strip("|").split(" | ")]
        package = re.match(r"`([\w.]+)`", cells[0])
        assert package, row
        table[package.group(1)] = set(re.findall(r"`([A-Za-z_][\w.-]*)`", re.sub(r"\([^)]*\)", "",
                                                                           cells[-1])))
    return table


def test_the_python_packages_table_says_what_each_package_imports() -> None:
    documented = documented_packages()
    actual = package_imports()
    wrong = {p: {"docs": sorted(documented.get(p, set())), "code": sorted(actual[p])}
             for p in PYTHON_PACKAGES if documented.get(p, set()) != actual[p]}
    assert wrong == {}, f"docs/architecture.md's Python packages table is out of date: {wrong}"
