"""Read schema files and the files they import; detect missing files and import cycles."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from seqc import syntax as ast
from seqc.diagnostics import CompileError, Diagnostic
from seqc.parser import parse


@dataclass
class Program:
    """Every file of one compilation: the roots named on the command line and their imports."""

    roots: list[str] = field(default_factory=list)
    files: dict[str, ast.File] = field(default_factory=dict)
    sources: dict[str, str] = field(default_factory=dict)
    #: path → resolved paths of its imports, in order
    imports: dict[str, list[str]] = field(default_factory=dict)

    def closure(self, path: str) -> list[str]:
        """``path``'s imports, transitively, each once, dependencies first (``path`` excluded)."""
        seen: list[str] = []

        def visit(p: str) -> None:
            for dep in self.imports.get(p, []):
                if dep not in seen and dep != path:
                    visit(dep)
                    if dep not in seen:
                        seen.append(dep)

        visit(path)
        return seen


def display_path(path: str) -> str:
    rel = os.path.relpath(path)
    return path if rel.startswith("..") else rel


def load(paths: list[str]) -> Program:
    """Parse ``paths`` and everything they import. Raises :class:`CompileError`."""
    prog = Program()
    diags: list[Diagnostic] = []

    def read(path: str, importer: ast.Import | None) -> str | None:
        try:
            with open(path, encoding="utf-8") as f:
                return f.read()
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
            span = importer.span if importer else ast.Span(path, 1, 1, 1, 1)
            diags.append(Diagnostic("E002", f"cannot read {path}: {reason}", span,
                                    "import paths are relative to the importing file"
                                    if importer else None))
            return None

    stack: list[str] = []

    def visit(path: str, importer: ast.Import | None) -> None:
        if path in prog.files or path in prog.sources:
            return
        text = read(path, importer)
        if text is None:
            return
        prog.sources[path] = text
        tree, errs = parse(path, text)
        diags.extend(errs)
        if tree is None:
            return
        prog.files[path] = tree
        stack.append(path)
        deps: list[str] = []
        for imp in tree.imports:
            dep = display_path(os.path.normpath(os.path.join(os.path.dirname(path), imp.path)))
            if dep in stack:
                cycle = stack[stack.index(dep):] + [dep]
                diags.append(Diagnostic(
                    "E003", "import cycle: " + " -> ".join(cycle), imp.span,
                    "move the shared types into a file that imports neither"))
                continue
            deps.append(dep)
            visit(dep, imp)
        prog.imports[path] = deps
        stack.pop()

    for p in paths:
        dp = display_path(p)
        if dp not in prog.roots:
            prog.roots.append(dp)
        visit(dp, None)
    if diags:
        raise CompileError(diags, prog.sources)
    return prog
