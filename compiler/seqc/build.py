"""``seqc build DIR...``: compile every Cython module under each DIR in place."""

from __future__ import annotations

import os
import shutil
import sys
import sysconfig
import tempfile
from collections.abc import Iterable
from pathlib import Path


def find_modules(roots: str | Iterable[str]) -> list[Path]:
    """Every ``.pyx`` under ``roots`` (a directory or several)."""
    dirs = [roots] if isinstance(roots, str) else list(roots)
    return sorted({p.resolve() for d in dirs for p in Path(d).glob("**/*.pyx")})


#: The line seqc writes at the top of a generated ``.pyx``: the module's dotted name.
MODULE_MARK = "# seqc-module: "


def module_name(pyx: Path) -> tuple[Path, str]:
    """The directory that must be on ``sys.path`` for ``pyx`` and its dotted module name.

    A module seqc generated names itself (``# seqc-module: myapp.messages._codec``, which
    holds also where its package has no ``__init__.py`` above it: a namespace package);
    otherwise the enclosing folders that hold an ``__init__.py`` are its packages."""
    with pyx.open(encoding="utf-8") as f:
        head = [f.readline() for _ in range(2)]
    for line in head:
        if line.startswith(MODULE_MARK):
            name = line[len(MODULE_MARK):].strip()
            parts = name.split(".")
            if parts[-1] != pyx.stem or list(pyx.parent.parts[-(len(parts) - 1):]) != parts[:-1]:
                raise SystemExit(f"seqc: {pyx} says it is module {name}, which is not where "
                                 "it lies: generate it again into the right place")
            root = pyx.parent
            for _ in parts[:-1]:
                root = root.parent
            return root, name
    parts = [pyx.stem]
    d = pyx.parent
    while (d / "__init__.py").exists():
        parts.append(d.name)
        d = d.parent
    return d, ".".join(reversed(parts))


def _up_to_date(pyx: Path, shared: list[Path]) -> bool:
    """True when the extension is newer than its source, the ``.pxd`` beside it and the
    ``.pxd`` of the shared codec support (``shared``)."""
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    so = pyx.with_name(pyx.stem + suffix)
    if not so.exists():
        return False
    built = so.stat().st_mtime
    deps = [pyx, *pyx.parent.glob("*.pxd"), *shared]
    return all(p.stat().st_mtime <= built for p in deps if p.exists())


def build(roots: str | Iterable[str], *, force: bool = False, quiet: bool = True,
          optimize: str = "-O2") -> list[Path]:
    """Cythonize and compile each ``.pyx`` under ``roots`` that is out of date.

    Returns the modules built. Each extension lands next to its source, so the directory
    above its outermost package is importable right after.
    """
    shared = [Path(d) / "seqbus" / "_codec_support.pxd" for d in _include_path()]
    todo = [p for p in find_modules(roots) if force or not _up_to_date(p, shared)]
    by_root: dict[Path, list[tuple[str, Path]]] = {}
    for pyx in todo:
        root, name = module_name(pyx)
        by_root.setdefault(root, []).append((name, pyx))
    for root, modules in sorted(by_root.items()):
        _build_in(root, modules, force=force, quiet=quiet, optimize=optimize)
    return todo


def _include_path() -> list[str]:
    """Where Cython finds the ``.pxd`` of the codec support module (``seqbus``), without
    importing the runtime."""
    import importlib.util

    spec = importlib.util.find_spec("seqbus")
    if spec is None or not spec.submodule_search_locations:
        return []
    return [str(Path(next(iter(spec.submodule_search_locations))).parent)]


def _build_in(root: Path, modules: list[tuple[str, Path]], *, force: bool, quiet: bool,
              optimize: str) -> None:
    from Cython.Build import cythonize
    from setuptools import Distribution, Extension  # type: ignore[import-untyped]
    from setuptools.command.build_ext import build_ext  # type: ignore[import-untyped]

    exts = [Extension(name, [str(pyx)], extra_compile_args=[
        optimize, "-g0", "-Wno-unused-function", "-Wno-unreachable-code"])
        for name, pyx in modules]
    cwd = os.getcwd()
    os.chdir(root)
    tmp = tempfile.mkdtemp(prefix="seqc-build-")
    try:
        compiled = cythonize(  # type: ignore[no-untyped-call]
            exts, quiet=quiet, force=True, language_level=3, nthreads=0,  # all are stale
            include_path=[str(root), *_include_path()])
        dist = Distribution({"ext_modules": compiled, "script_name": "seqc-build"})
        cmd = build_ext(dist)
        cmd.inplace = True
        cmd.force = force
        cmd.parallel = min(len(compiled), os.cpu_count() or 1)
        cmd.build_temp = tmp
        cmd.build_lib = tmp
        cmd.ensure_finalized()
        cmd.run()
    finally:
        os.chdir(cwd)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":  # pragma: no cover
    build(sys.argv[1:])
