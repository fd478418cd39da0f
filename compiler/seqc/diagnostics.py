"""Positioned diagnostics: ``file:line:col: error[CODE]: message``, the source line and a caret.

Every stage collects its diagnostics and the driver fails once with all of them
(:class:`CompileError`). Codes are stable; docs/idl.md lists each with an example.
"""

from __future__ import annotations

from dataclasses import dataclass

from seqc.syntax import Span

#: Every diagnostic code seqc emits, with a one-line meaning.
CODES: dict[str, str] = {
    "E001": "syntax error",
    "E002": "cannot read file",
    "E003": "import cycle",
    "E010": "unknown type",
    "E011": "duplicate name",
    "E012": "duplicate message id",
    "E013": "duplicate enum value",
    "E014": "value out of range of the base type",
    "E015": "bad base type for enum or flags",
    "E016": "@since above the schema version",
    "E017": "name illegal in a target language",
    "E018": "bad name style",
    "E019": "bad array length",
    "E020": "optional of a type that cannot be optional",
    "E021": "unknown annotation",
    "E022": "fields out of version order",
    "E023": "schema id clash across files",
    "E024": "bad schema header",
    "E025": "type cycle",
    "E026": "bad @since use",
    "E027": "too many groups or variable-length fields",
    "E028": "message id out of range",
    "E029": "block too large",
}


@dataclass(frozen=True)
class Diagnostic:
    code: str
    message: str
    span: Span
    hint: str | None = None

    def render(self, sources: dict[str, str]) -> str:
        """The diagnostic as text: header line, source line with a caret, optional hint."""
        s = self.span
        head = f"{s.file}:{s.line}:{s.col}: error[{self.code}]: {self.message}"
        lines = [head]
        text = sources.get(s.file)
        if text is not None:
            src_lines = text.splitlines()
            if 1 <= s.line <= len(src_lines):
                src = src_lines[s.line - 1].expandtabs(1)
                gutter = f"{s.line:>4} | "
                lines.append(gutter + src)
                width = s.end_col - s.col if s.end_line == s.line and s.end_col > s.col else 1
                lines.append(" " * (len(gutter) - 2) + "| " + " " * (s.col - 1) + "^" * width)
        if self.hint:
            lines.append(f"  = hint: {self.hint}")
        return "\n".join(lines)


class CompileError(Exception):
    """One or more diagnostics; ``str()`` renders all of them."""

    def __init__(self, diagnostics: list[Diagnostic], sources: dict[str, str]) -> None:
        self.diagnostics = sorted(
            diagnostics, key=lambda d: (d.span.file, d.span.line, d.span.col, d.code)
        )
        self.sources = sources
        super().__init__(self.render())

    def render(self) -> str:
        n = len(self.diagnostics)
        body = "\n\n".join(d.render(self.sources) for d in self.diagnostics)
        return f"{body}\n\n{n} error{'s' if n != 1 else ''}"
