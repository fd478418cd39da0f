"""Meaning checks over a loaded :class:`~seqc.loader.Program`: every error collected, one failure.

Each check emits a :class:`~seqc.diagnostics.Diagnostic` with the span of the offending name or
value; :func:`validate` raises one :class:`~seqc.diagnostics.CompileError` holding all of them.
"""

from __future__ import annotations

import difflib

from seqc import layout, naming, syntax as ast
from seqc.diagnostics import CompileError, Diagnostic
from seqc.loader import Program

_BUILTIN = set(layout.PRIMITIVES) | set(layout.ARRAY_TYPES) | set(layout.VAR_TYPES)
#: Type names of other languages and IDLs → ours, for the "did you mean" hint.
_ALIASES = {
    "int": "i32", "int8": "i8", "int16": "i16", "int32": "i32", "int64": "i64", "long": "i64",
    "uint": "u32", "uint8": "u8", "uint16": "u16", "uint32": "u32", "uint64": "u64",
    "float": "f32", "double": "f64", "float32": "f32", "float64": "f64", "str": "string",
    "text": "string", "boolean": "bool", "byte": "u8", "char": "char[N]", "blob": "bytes",
    "short": "i16", "ushort": "u16", "ulong": "u64",
}


class _Checker:
    def __init__(self, prog: Program) -> None:
        self.prog = prog
        self.diags: list[Diagnostic] = []

    def err(self, code: str, msg: str, span: ast.Span, hint: str | None = None) -> None:
        self.diags.append(Diagnostic(code, msg, span, hint))

    # -- names ---------------------------------------------------------------------------

    def check_name(self, name: str, span: ast.Span, what: str, style: str) -> None:
        bad = naming.illegal_in(name)
        if bad:
            self.err("E017", f"{what} name {name!r} is illegal in {', '.join(bad)}", span,
                     "choose another name")
            return
        if style == "snake" and not naming.is_snake(name):
            self.err("E018", f"{what} name {name!r} must be snake_case", span,
                     f"write it as {naming.snake(name)!r}")
        elif style == "camel" and not naming.is_camel(name):
            self.err("E018", f"{what} name {name!r} must be CamelCase", span,
                     f"write it as {naming.camel(name)!r}")
        if style == "snake" and name in naming.GENERATED_MEMBERS:
            self.err("E017", f"field name {name!r} clashes with a member of the generated "
                     "classes", span, "choose another name")
        if style == "camel" and name.endswith(naming.RESERVED_TYPE_SUFFIXES) and what != \
                "enum value":
            self.err("E017", f"type name {name!r} ends with a suffix seqc uses for generated "
                     f"classes ({', '.join(naming.RESERVED_TYPE_SUFFIXES)})", span)

    # -- files ---------------------------------------------------------------------------

    def run(self) -> None:
        seen_ids: dict[int, tuple[str, ast.File]] = {}
        seen_packages: dict[str, ast.File] = {}
        for path, tree in self.prog.files.items():
            self.check_file(path, tree)
        for path in self.prog.roots:
            root = self.prog.files.get(path)
            if root is None:
                continue
            tree = root
            if tree.schema_id is not None:
                other = seen_ids.get(tree.schema_id)
                if other is not None and other[1].package != tree.package:
                    assert tree.schema_span is not None
                    self.err("E023", f"schema id {tree.schema_id} is already used by package "
                             f"{other[1].package!r} ({other[0]})", tree.schema_span,
                             "every schema on one bus needs its own id")
                seen_ids.setdefault(tree.schema_id, (path, tree))
            prev = seen_packages.get(tree.package)
            if prev is not None and prev is not tree:
                self.err("E023", f"package {tree.package!r} is also defined by {prev.path}",
                         tree.package_span)
            seen_packages.setdefault(tree.package, tree)

    def visible(self, path: str) -> tuple[dict[str, ast.Enum], dict[str, ast.Struct]]:
        enums: dict[str, ast.Enum] = {}
        structs: dict[str, ast.Struct] = {}
        for p in self.prog.closure(path) + [path]:
            tree = self.prog.files.get(p)
            if tree is None:
                continue
            for e in tree.enums:
                enums.setdefault(e.name, e)
            for s in tree.structs:
                structs.setdefault(s.name, s)
        return enums, structs

    def check_file(self, path: str, tree: ast.File) -> None:
        for part in tree.package.split("."):
            if not naming.is_snake(part) or naming.illegal_in(part):
                self.err("E018", f"package name {tree.package!r} must be lower_case words, "
                         "not a keyword of Python or Rust", tree.package_span)
                break
        if tree.schema_id is None:
            if tree.messages:
                self.err("E024", "a file that defines messages needs a `schema ID version N;` "
                         "line", tree.package_span, "add e.g. `schema 1 version 1;` after the "
                         "package line")
        else:
            assert tree.schema_span is not None and tree.version is not None
            if not 0 < tree.schema_id <= layout.MAX_SCHEMA_ID:
                self.err("E024", f"schema id {tree.schema_id} is out of range 1..65535",
                         tree.schema_span)
            if not 0 < tree.version <= layout.MAX_VERSION:
                self.err("E024", f"schema version {tree.version} is out of range 1..65535",
                         tree.schema_span)
        version = tree.version or 1
        # every type name defined once among this file and what it sees
        own: dict[str, ast.Span] = {}
        for e in tree.enums:
            self.check_type_name(e.name, e.span, own)
        for s in tree.structs:
            self.check_type_name(s.name, s.span, own)
        for m in tree.messages:
            self.check_type_name(m.name, m.span, own)
        for dep in self.prog.closure(path):
            dtree = self.prog.files.get(dep)
            if dtree is None:
                continue
            for d in list(dtree.enums) + list(dtree.structs):
                if d.name in own:
                    self.err("E011", f"type {d.name!r} is already defined in {dep}",
                             ast.Span(path, *_pos(own[d.name])),
                             "rename one of them")
        enums, structs = self.visible(path)
        for e in tree.enums:
            self.check_enum(e)
        for s in tree.structs:
            self.check_struct(s, enums, structs)
        self.check_struct_cycles(tree, structs)
        ids: dict[int, ast.Message] = {}
        for m in tree.messages:
            if m.id in ids:
                self.err("E012", f"message id {m.id} is already used by {ids[m.id].name}",
                         m.id_span, "every message of a schema needs its own id")
            else:
                ids[m.id] = m
            if not 0 < m.id <= layout.MAX_TEMPLATE_ID:
                self.err("E028", f"message id {m.id} is out of range 1..65535", m.id_span)
            self.check_block(m.name, m.fields, enums, structs, version, 1, 0)
        self.check_group_classes(tree, own, enums, structs)

    def check_group_classes(self, tree: ast.File, own: dict[str, ast.Span],
                            enums: dict[str, ast.Enum], structs: dict[str, ast.Struct]) -> None:
        """A group's entry class (``OrderLegs`` for group ``legs`` of ``Order``) and its
        sequence class (``OrderLegsGroup``) are names of the generated package too: one that
        is also a type's name, or another group's, would make two classes of one name."""
        taken: dict[str, str] = {name: f"which is also the type defined on line {span.line}"
                                 for name, span in own.items()}
        for name in list(enums) + list(structs):
            taken.setdefault(name, "which is also an imported type")

        def walk(owner: str, fields: tuple[ast.Field, ...], where: str) -> None:
            for f in fields:
                if not f.is_group:
                    continue
                entry = naming.group_type(owner, f.name)
                clash = next((c for c in (entry, entry + "Group") if c in taken), None)
                if clash is not None:
                    self.err("E011", f"group {where}.{f.name} makes class {clash!r}, "
                             f"{taken[clash]}", f.span, "rename the group or the type")
                for cls in (entry, entry + "Group"):
                    taken.setdefault(cls, f"which group {where}.{f.name} makes too")
                walk(entry, f.fields, f"{where}.{f.name}")

        for m in tree.messages:
            walk(m.name, m.fields, m.name)

    def check_type_name(self, name: str, span: ast.Span, own: dict[str, ast.Span]) -> None:
        self.check_name(name, span, "type", "camel")
        if name in _BUILTIN:
            self.err("E011", f"{name!r} is a built-in type", span)
        elif name in own:
            line = own[name].line
            self.err("E011", f"duplicate type {name!r} (first defined on line {line})", span)
        else:
            own[name] = span

    def check_enum(self, e: ast.Enum) -> None:
        what = "flags" if e.is_flags else "enum"
        valid = layout.INTEGER_BASES if not e.is_flags else ("u8", "u16", "u32", "u64")
        if e.base not in valid:
            self.err("E015", f"{what} {e.name} has base type {e.base!r}", e.base_span,
                     f"use one of {', '.join(valid)}")
            return
        names: dict[str, ast.EnumValue] = {}
        values: dict[int, ast.EnumValue] = {}
        lo, hi = layout.int_range(e.base)
        if e.is_flags:
            lo, hi = 0, layout.flag_bits(e.base) - 1
        for v in e.values:
            self.check_name(v.name, v.span, "enum value", "camel")
            if v.name in names:
                self.err("E011", f"duplicate {what} value name {v.name!r}", v.span)
            names.setdefault(v.name, v)
            if v.value in values:
                self.err("E013", f"{what} {e.name}: value {v.value} is already used by "
                         f"{values[v.value].name}", v.value_span)
            values.setdefault(v.value, v)
            if not lo <= v.value <= hi:
                if e.is_flags:
                    self.err("E014", f"bit position {v.value} does not fit {e.base} "
                             f"(bits {lo}..{hi})", v.value_span,
                             "flags values are bit positions, not masks")
                else:
                    self.err("E014", f"value {v.value} is out of range of {e.base} "
                             f"({lo}..{hi})", v.value_span)
        if not e.values:
            self.err("E015", f"{what} {e.name} has no values", e.span)

    def resolve(self, t: ast.TypeRef, enums: dict[str, ast.Enum],
                structs: dict[str, ast.Struct]) -> bool:
        known = t.name in _BUILTIN or t.name in enums or t.name in structs
        if not known:
            candidates = sorted(_BUILTIN | set(enums) | set(structs))
            close = difflib.get_close_matches(t.name, candidates, n=1)
            alias = _ALIASES.get(t.name.lower())
            if alias:
                close = [alias]
            hint = f"did you mean {close[0]!r}?" if close else \
                "types are bool, u8..u64, i8..i64, f32, f64, char[N], byte[N], string, " \
                "bytes, or an enum, flags or struct defined or imported here"
            self.err("E010", f"unknown type {t.name!r}", t.span, hint)
            return False
        if t.name in layout.ARRAY_TYPES:
            if t.length is None:
                self.err("E019", f"{t.name} needs a length: {t.name}[N]", t.span)
            elif not 0 < t.length <= layout.MAX_ARRAY_LENGTH:
                self.err("E019", f"{t.name}[{t.length}]: length must be 1..65535", t.span)
        elif t.length is not None:
            self.err("E019", f"{t.name} is not an array type; only char[N] and byte[N] take "
                     "a length", t.span)
        if t.optional and t.name in layout.VAR_TYPES:
            self.err("E020", f"optional {t.name}: variable-length fields cannot be optional",
                     t.span, f"an empty {t.name} already means 'no value'")
        return True

    def check_struct(self, s: ast.Struct, enums: dict[str, ast.Enum],
                     structs: dict[str, ast.Struct]) -> None:
        names: set[str] = set()
        for f in s.fields:
            self.check_field_name(f, names)
            if f.type is None:
                self.err("E020", f"struct {s.name}: a struct holds only fixed-size fields, "
                         "not a group", f.span, "put the group in a message")
                continue
            for a in f.annotations:
                self.err("E026" if a.name == "since" else "E021",
                         f"@{a.name} is not allowed in a struct" if a.name == "since"
                         else f"unknown annotation @{a.name}", a.span,
                         "structs are fixed: evolve the message that holds them instead")
            if not self.resolve(f.type, enums, structs):
                continue
            if f.type.name in layout.VAR_TYPES:
                self.err("E020", f"struct {s.name}: {f.type.name} is variable-length; a "
                         "struct holds only fixed-size fields", f.type.span)
            elif f.type.optional:
                self.err("E020", f"struct {s.name}: optional fields belong in messages and "
                         "groups, not structs", f.type.span)

    def check_struct_cycles(self, tree: ast.File, structs: dict[str, ast.Struct]) -> None:
        def walk(name: str, trail: list[str]) -> list[str] | None:
            s = structs.get(name)
            if s is None:
                return None
            for f in s.fields:
                if f.type is not None and f.type.name in structs:
                    if f.type.name in trail:
                        return trail + [f.type.name]
                    found = walk(f.type.name, trail + [f.type.name])
                    if found:
                        return found
            return None

        for s in tree.structs:
            cycle = walk(s.name, [s.name])
            if cycle and cycle[0] == s.name:
                self.err("E025", "struct contains itself: " + " -> ".join(cycle), s.span)

    def check_field_name(self, f: ast.Field, names: set[str]) -> None:
        self.check_name(f.name, f.span, "field", "snake")
        if f.name in names:
            self.err("E011", f"duplicate field {f.name!r}", f.span)
        names.add(f.name)

    def check_block(self, owner: str, fields: tuple[ast.Field, ...], enums: dict[str, ast.Enum],
                    structs: dict[str, ast.Struct], version: int, since: int,
                    depth: int) -> None:
        names: set[str] = set()
        last = {"fixed": since, "group": since, "var": since}
        last_name: dict[str, str] = {}
        n_groups = n_vars = 0
        block = 0
        for f in fields:
            self.check_field_name(f, names)
            fs = since
            for a in f.annotations:
                if a.name != "since":
                    self.err("E021", f"unknown annotation @{a.name}", a.span,
                             "the only annotation is @since(version)")
                    continue
                if a.value > version:
                    self.err("E016", f"@since({a.value}) is above the schema version "
                             f"{version}", a.span, f"raise the schema line to `version "
                             f"{a.value};` or lower @since")
                elif a.value < since:
                    self.err("E026", f"@since({a.value}) is older than the group that holds "
                             f"the field (@since({since}))", a.span)
                elif a.value < 1:
                    self.err("E026", "@since needs a version of 1 or more", a.span)
                fs = max(min(a.value, version), since)
            if f.type is None:
                cat = "group"
                n_groups += 1
                if depth + 1 > layout.MAX_GROUP_DEPTH:
                    self.err("E027", f"groups nest deeper than {layout.MAX_GROUP_DEPTH}",
                             f.span)
                else:
                    self.check_block(owner, f.fields, enums, structs, version, fs, depth + 1)
            else:
                ok = self.resolve(f.type, enums, structs)
                if f.type.name in layout.VAR_TYPES:
                    cat = "var"
                    n_vars += 1
                else:
                    cat = "fixed"
                    if ok:
                        block += self.size_of(f.type, enums, structs)
                    e = enums.get(f.type.name)
                    if (ok and fs > since and not f.type.optional and e is not None
                            and not e.is_flags and all(v.value != 0 for v in e.values)):
                        self.err("E026", f"field {f.name!r} added by @since({fs}) reads as 0 "
                                 f"from older writers, but enum {e.name} has no value 0",
                                 f.span, f"declare it `optional {e.name}` or give "
                                 f"{e.name} a value 0")
            if fs < last[cat]:
                kind = {"fixed": "fixed-size", "group": "group", "var": "variable-length"}[cat]
                self.err("E022", f"{kind} field {f.name!r} (@since({fs})) comes after "
                         f"{last_name[cat]!r} (@since({last[cat]}))", f.span,
                         f"newer {kind} fields go after older ones: move {f.name!r} up")
            else:
                last[cat] = fs
                last_name[cat] = f.name
        if n_groups > layout.MAX_TAIL_ITEMS or n_vars > layout.MAX_TAIL_ITEMS:
            span = fields[-1].span
            self.err("E027", f"{owner}: at most 255 groups and 255 variable-length fields per "
                     "level", span)
        if block > layout.MAX_BLOCK_LENGTH:
            self.err("E029", f"{owner}: fixed-size fields take {block} bytes; a block holds "
                     "at most 65535", fields[-1].span)

    def size_of(self, t: ast.TypeRef, enums: dict[str, ast.Enum],
                structs: dict[str, ast.Struct], trail: tuple[str, ...] = ()) -> int:
        size = 0
        if t.name in layout.PRIMITIVES:
            size = layout.PRIMITIVES[t.name][0]
        elif t.name in layout.ARRAY_TYPES:
            size = t.length or 0
        elif t.name in enums:
            size = layout.PRIMITIVES.get(enums[t.name].base, (0,))[0]
        elif t.name in structs and t.name not in trail:
            for f in structs[t.name].fields:
                if f.type is not None:
                    size += self.size_of(f.type, enums, structs, trail + (t.name,))
        return size + (1 if t.optional else 0)


def _pos(span: ast.Span) -> tuple[int, int, int, int]:
    return span.line, span.col, span.end_line, span.end_col


def validate(prog: Program) -> None:
    """Raise :class:`CompileError` with every problem of every file, or return."""
    checker = _Checker(prog)
    checker.run()
    if checker.diags:
        raise CompileError(checker.diags, prog.sources)
