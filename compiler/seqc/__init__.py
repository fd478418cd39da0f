"""seqc: the seqbus IDL compiler.

``compile_files(paths)`` runs the front end (parse → validate → IR); generators in
``seqc.gen_python`` and ``seqc.gen_rust`` turn an IR :class:`~seqc.ir.Schema` into files.
"""

from __future__ import annotations

from seqc.diagnostics import CompileError, Diagnostic
from seqc.ir import Schema
from seqc.loader import load
from seqc.validate import validate
from seqc import ir as _ir

__all__ = ["CompileError", "Diagnostic", "Schema", "compile_files"]
__version__ = "0.1.0"


def compile_files(paths: list[str]) -> list[Schema]:
    """The IR of every file in ``paths`` (imports resolved). Raises :class:`CompileError`."""
    prog = load(paths)
    validate(prog)
    return [_ir.build(prog, p) for p in prog.roots]
