"""Text → :mod:`seqc.ast` with lark (LALR, positions kept)."""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from typing import Any

from lark import Lark, Token, Transformer, UnexpectedCharacters, UnexpectedInput
from lark import UnexpectedEOF, UnexpectedToken, v_args

from seqc import syntax as ast
from seqc.diagnostics import Diagnostic

_TOKEN_NAMES = {
    "SEMICOLON": "';'", "LBRACE": "'{'", "RBRACE": "'}'", "COLON": "':'", "EQUAL": "'='",
    "NAME": "a name", "INT": "a number", "SIGNED_INT": "a number", "STRING": "a quoted path",
    "LSQB": "'['", "RSQB": "']'", "LPAR": "'('", "RPAR": "')'", "AT": "'@'", "DOT": "'.'",
    "GROUP": "'group'", "OPTIONAL": "'optional'", "DOC_COMMENT": "a /// comment",
    "$END": "end of file",
}


@lru_cache(maxsize=1)
def grammar() -> Lark:
    text = resources.files("seqc").joinpath("seqbus.lark").read_text(encoding="utf-8")
    return Lark(text, parser="lalr", propagate_positions=True, maybe_placeholders=False)


def _span(path: str, tok: Any) -> ast.Span:
    line = getattr(tok, "line", None) or getattr(getattr(tok, "meta", None), "line", 1) or 1
    if isinstance(tok, Token):
        return ast.Span(path, tok.line or 1, tok.column or 1, tok.end_line or tok.line or 1,
                        tok.end_column or (tok.column or 1) + 1)
    meta = tok.meta
    return ast.Span(path, meta.line, meta.column, meta.end_line, meta.end_column) if not \
        meta.empty else ast.Span(path, line, 1, line, 2)


def _doc(tokens: list[Token]) -> str:
    lines = []
    for tok in tokens:
        text = str(tok)[3:]
        lines.append(text[1:] if text.startswith(" ") else text)
    return "\n".join(lines)


def _int(tok: Token) -> int:
    return int(str(tok), 0)


class _ToAst(Transformer[Token, Any]):
    def __init__(self, path: str) -> None:
        super().__init__()
        self.path = path

    def docs(self, children: list[Token]) -> str:
        return _doc(children)

    def dotted_name(self, children: list[Token]) -> tuple[str, ast.Span]:
        first, last = children[0], children[-1]
        span = ast.Span(self.path, first.line or 1, first.column or 1,
                        last.end_line or 1, last.end_column or 1)
        return ".".join(str(c) for c in children), span

    def package_decl(self, children: list[Any]) -> tuple[str, tuple[str, ast.Span]]:
        return "package", children[0]

    @v_args(meta=True)
    def schema_decl(self, meta: Any, children: list[Token]) -> tuple[str, Any]:
        span = ast.Span(self.path, meta.line, meta.column, meta.end_line, meta.end_column)
        return "schema", (_int(children[0]), _int(children[1]), span)

    def import_decl(self, children: list[Token]) -> ast.Import:
        tok = children[0]
        return ast.Import(str(tok)[1:-1], _span(self.path, tok))

    def enum_value(self, children: list[Any]) -> ast.EnumValue:
        doc, name, value = children
        return ast.EnumValue(str(name), _int(value), doc, _span(self.path, name),
                             _span(self.path, value))

    def _enum(self, children: list[Any], is_flags: bool) -> ast.Enum:
        doc, name, base, *values = children
        return ast.Enum(str(name), str(base), tuple(values), is_flags, doc,
                        _span(self.path, name), _span(self.path, base))

    def enum_decl(self, children: list[Any]) -> ast.Enum:
        return self._enum(children, False)

    def flags_decl(self, children: list[Any]) -> ast.Enum:
        return self._enum(children, True)

    def struct_decl(self, children: list[Any]) -> ast.Struct:
        doc, name, *fields = children
        return ast.Struct(str(name), tuple(fields), doc, _span(self.path, name))

    def message_decl(self, children: list[Any]) -> ast.Message:
        doc, name, mid, *fields = children
        return ast.Message(str(name), _int(mid), tuple(fields), doc, _span(self.path, name),
                           _span(self.path, mid))

    def array_len(self, children: list[Token]) -> tuple[int, Token]:
        return _int(children[0]), children[0]

    def type_ref(self, children: list[Any]) -> ast.TypeRef:
        optional = False
        if isinstance(children[0], Token) and children[0].type == "OPTIONAL":
            optional = True
            children = children[1:]
        name = children[0]
        length = children[1][0] if len(children) > 1 else None
        end = children[1][1] if len(children) > 1 else name
        span = ast.Span(self.path, name.line or 1, name.column or 1, end.end_line or 1,
                        (end.end_column or 1) + (1 if len(children) > 1 else 0))
        return ast.TypeRef(str(name), length, optional, span)

    def annotation(self, children: list[Token]) -> ast.Annotation:
        name, value = children
        span = ast.Span(self.path, name.line or 1, (name.column or 2) - 1, value.end_line or 1,
                        (value.end_column or 1) + 1)
        return ast.Annotation(str(name), _int(value), span)

    def plain_field(self, children: list[Any]) -> ast.Field:
        doc, name, tref, *annotations = children
        return ast.Field(str(name), tref, (), tuple(annotations), doc, _span(self.path, name))

    def group_field(self, children: list[Any]) -> ast.Field:
        doc, name, _group, *rest = children
        annotations = tuple(c for c in rest if isinstance(c, ast.Annotation))
        fields = tuple(c for c in rest if isinstance(c, ast.Field))
        return ast.Field(str(name), None, fields, annotations, doc, _span(self.path, name))

    def start(self, children: list[Any]) -> ast.File:
        doc = children[0]
        package, package_span = children[1][1]
        schema_id = version = None
        schema_span = None
        imports: list[ast.Import] = []
        enums: list[ast.Enum] = []
        structs: list[ast.Struct] = []
        messages: list[ast.Message] = []
        for c in children[2:]:
            if isinstance(c, tuple) and c[0] == "schema":
                schema_id, version, schema_span = c[1]
            elif isinstance(c, ast.Import):
                imports.append(c)
            elif isinstance(c, ast.Enum):
                enums.append(c)
            elif isinstance(c, ast.Struct):
                structs.append(c)
            elif isinstance(c, ast.Message):
                messages.append(c)
        return ast.File(self.path, package, package_span, schema_id, version, schema_span,
                        tuple(imports), tuple(enums), tuple(structs), tuple(messages), doc)


def _syntax_diagnostic(path: str, text: str, err: UnexpectedInput) -> Diagnostic:
    line = getattr(err, "line", 1) or 1
    col = getattr(err, "column", 1) or 1
    if isinstance(err, UnexpectedCharacters):
        pos = err.pos_in_stream or 0
        ch = text[pos] if pos < len(text) else ""
        hint = "items end with ';', not ','" if ch == "," else None
        return Diagnostic("E001", f"unexpected character {ch!r}",
                          ast.Span(path, line, col, line, col + 1), hint)
    expected: set[str] = set(getattr(err, "expected", None) or [])
    wanted = sorted({_TOKEN_NAMES.get(e, e.lower()) for e in expected
                     if e not in ("DOC_COMMENT",)})
    if isinstance(err, UnexpectedEOF) or (isinstance(err, UnexpectedToken)
                                          and err.token.type == "$END"):
        lines = text.splitlines() or [""]
        line, col = len(lines), len(lines[-1]) + 1
        msg = "unexpected end of file"
        width = 1
    else:
        assert isinstance(err, UnexpectedToken)
        tok = err.token
        msg = f"unexpected {_TOKEN_NAMES.get(tok.type, repr(str(tok)))}"
        if tok.type == "NAME":
            msg = f"unexpected name {str(tok)!r}"
        width = max(1, len(str(tok)))
    hint = None
    if wanted:
        hint = "expected " + (", ".join(wanted[:-1]) + " or " + wanted[-1]
                              if len(wanted) > 1 else wanted[0])
        if "';'" in wanted and len(wanted) <= 3:
            hint += " (is a ';' missing before it?)"
    return Diagnostic("E001", msg, ast.Span(path, line, col, line, col + width), hint)


def parse(path: str, text: str) -> tuple[ast.File | None, list[Diagnostic]]:
    """Parse one file. Syntax errors are collected with lark's error recovery."""
    diags: list[Diagnostic] = []

    def on_error(err: UnexpectedInput) -> bool:
        # Recovery skips the offending token and goes on, so later slips are reported too;
        # one error per line keeps the echoes of a slip (the tokens after it) out.
        diag = _syntax_diagnostic(path, text, err)
        if not diags or diags[-1].span.line != diag.span.line:
            diags.append(diag)
        if len(diags) >= 20 or not isinstance(err, UnexpectedToken) or err.token.type == "$END":
            return False
        # Recovery: insert the separator the parser wanted and retry the token; otherwise
        # skip the token. Either way parsing goes on, so later slips are reported as well.
        for kind, value in (("SEMICOLON", ";"), ("COLON", ":")):
            if kind in err.expected:
                trial = err.interactive_parser.copy()  # type: ignore[no-untyped-call]
                try:
                    trial.feed_token(Token(kind, value))
                    trial.feed_token(err.token)
                except UnexpectedInput:
                    continue
                err.interactive_parser.feed_token(Token(kind, value))
                err.interactive_parser.feed_token(err.token)
                return True
        return True

    try:
        tree = grammar().parse(text, on_error=on_error)
    except UnexpectedInput as err:
        diag = _syntax_diagnostic(path, text, err)
        if not diags or diags[-1].span.line != diag.span.line:
            diags.append(diag)
        return None, diags
    if diags:
        return None, diags
    return _ToAst(path).transform(tree), []
