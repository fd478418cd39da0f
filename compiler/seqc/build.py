"""``seqc build DIR``: compile every generated Cython module under DIR in place."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import sysconfig
from pathlib import Path


def find_modules(root: str) -> list[Path]:
    return sorted(Path(root).glob("**/_codec.pyx"))


def _up_to_date(pyx: Path) -> bool:
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    so = pyx.with_name(pyx.stem + suffix)
    return so.exists() and so.stat().st_mtime >= pyx.stat().st_mtime


def build(root: str, *, force: bool = False, quiet: bool = True, optimize: str = "-O2") -> list[Path]:
    """Cythonize and compile each ``<pkg>/_codec.pyx`` under ``root`` that is out of date.

    Returns the modules built. The extension lands next to its source, so ``root`` is
    importable right after.
    """
    from Cython.Build import cythonize
    from setuptools import Distribution, Extension  # type: ignore[import-untyped]
    from setuptools.command.build_ext import build_ext  # type: ignore[import-untyped]

    todo = [p for p in find_modules(root) if force or not _up_to_date(p)]
    if not todo:
        return []
    root_path = Path(root).resolve()
    exts = []
    for pyx in todo:
        rel = pyx.resolve().relative_to(root_path).with_suffix("")
        name = ".".join(rel.parts)
        exts.append(Extension(name, [str(pyx.resolve())],
                              extra_compile_args=[optimize, "-g0", "-Wno-unused-function",
                                                  "-Wno-unreachable-code"]))
    cwd = os.getcwd()
    os.chdir(root_path)
    tmp = tempfile.mkdtemp(prefix="seqc-build-")
    try:
        modules = cythonize(  # type: ignore[no-untyped-call]
            exts, quiet=quiet, force=force, language_level=3,
                            nthreads=0)
        dist = Distribution({"ext_modules": modules, "script_name": "seqc-build"})
        cmd = build_ext(dist)
        cmd.inplace = True
        cmd.force = force
        cmd.parallel = min(len(modules), os.cpu_count() or 1)
        cmd.build_temp = tmp
        cmd.build_lib = tmp
        cmd.ensure_finalized()
        cmd.run()
    finally:
        os.chdir(cwd)
        shutil.rmtree(tmp, ignore_errors=True)
    return todo


if __name__ == "__main__":  # pragma: no cover
    build(sys.argv[1])
