"""The intermediate representation: every type, offset, size and version resolved.

Generators read only this. ``seqc ir --json`` dumps it (:func:`to_json`), so tools can decode
archives without generated code. Built from a validated :class:`seqc.loader.Program` by
:func:`build`.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

from seqc import layout, naming, syntax as ast
from seqc.loader import Program, display_path

IR_FORMAT_VERSION = 1


@dataclass
class Type:
    """A fixed-size type. ``kind``: primitive, char, byte, enum, flags or struct."""

    kind: str
    name: str  # primitive name ("u64"), "char"/"byte", or the enum/flags/struct name
    size: int
    primitive: str | None = None  # the wire primitive for primitive/enum/flags
    length: int | None = None  # char[N], byte[N]


@dataclass
class Field:
    """A field of a message, group entry or struct.

    ``kind``: ``fixed`` (in the block), ``optional`` (in the block, presence byte first),
    ``string`` / ``bytes`` (variable-length data), ``group``.
    ``offset``: byte offset in the block (fixed/optional), else None.
    ``index``: position among the level's groups or among its variable-length fields.
    """

    name: str
    kind: str
    type: Type | None
    offset: int | None
    size: int  # bytes in the block (optional: 1 + value size); 0 for groups and var data
    since: int
    doc: str
    index: int | None = None
    group: Block | None = None
    line: int = 0
    col: int = 0


@dataclass
class Block:
    """The layout of a message body or of one group entry."""

    name: str  # message name or group entry type name (NewOrderLegs)
    path: str  # "NewOrder" or "NewOrder.legs.fills": what DecodeError names
    block_length: int
    #: block length every writer of any version writes (fields since <= the level's since)
    min_block_length: int
    fields: list[Field]  # in declaration order, every kind
    since: int
    depth: int

    @property
    def fixed(self) -> list[Field]:
        return [f for f in self.fields if f.kind in ("fixed", "optional")]

    @property
    def groups(self) -> list[Field]:
        return [f for f in self.fields if f.kind == "group"]

    @property
    def vars(self) -> list[Field]:
        return [f for f in self.fields if f.kind in ("string", "bytes")]

    def all_blocks(self) -> list[Block]:
        """This block and every nested group's block, parents first."""
        out = [self]
        for g in self.groups:
            assert g.group is not None
            out.extend(g.group.all_blocks())
        return out


@dataclass
class EnumValue:
    name: str
    value: int
    doc: str


@dataclass
class Enum:
    name: str
    primitive: str
    is_flags: bool
    values: list[EnumValue]
    doc: str
    source: str
    line: int = 0


@dataclass
class Struct:
    name: str
    size: int
    fields: list[Field]
    doc: str
    source: str
    line: int = 0


@dataclass
class Message:
    name: str
    id: int
    body: Block
    doc: str
    line: int = 0


@dataclass
class Schema:
    package: str
    schema_id: int
    version: int
    doc: str
    source: str
    sources: list[str]  # this file and every file it imports
    enums: list[Enum] = field(default_factory=list)
    structs: list[Struct] = field(default_factory=list)
    messages: list[Message] = field(default_factory=list)

    def enum(self, name: str) -> Enum:
        return next(e for e in self.enums if e.name == name)

    def struct(self, name: str) -> Struct:
        return next(s for s in self.structs if s.name == name)


def to_json(schema: Schema) -> str:
    data: dict[str, Any] = {"format": "seqc-ir", "ir_version": IR_FORMAT_VERSION}
    data.update(dataclasses.asdict(schema))
    return json.dumps(data, indent=2) + "\n"


def _since(f: ast.Field, default: int) -> int:
    for a in f.annotations:
        if a.name == "since":
            return a.value
    return default


class _Builder:
    def __init__(self, prog: Program, path: str) -> None:
        self.prog = prog
        self.path = path
        self.enums: dict[str, ast.Enum] = {}
        self.structs: dict[str, ast.Struct] = {}
        self.enum_source: dict[str, str] = {}
        self.struct_source: dict[str, str] = {}
        for p in prog.closure(path) + [path]:
            tree = prog.files[p]
            for e in tree.enums:
                self.enums[e.name] = e
                self.enum_source[e.name] = p
            for s in tree.structs:
                self.structs[s.name] = s
                self.struct_source[s.name] = p
        self._struct_ir: dict[str, Struct] = {}

    def type_of(self, t: ast.TypeRef) -> Type:
        if t.name in layout.PRIMITIVES:
            return Type("primitive", t.name, layout.PRIMITIVES[t.name][0], t.name)
        if t.name in layout.ARRAY_TYPES:
            assert t.length is not None
            return Type(t.name, t.name, t.length, None, t.length)
        if t.name in self.enums:
            e = self.enums[t.name]
            return Type("flags" if e.is_flags else "enum", e.name,
                        layout.PRIMITIVES[e.base][0], e.base)
        s = self.struct(t.name)
        return Type("struct", s.name, s.size)

    def struct(self, name: str) -> Struct:
        if name not in self._struct_ir:
            node = self.structs[name]
            fields: list[Field] = []
            offset = 0
            for f in node.fields:
                assert f.type is not None
                ty = self.type_of(f.type)
                fields.append(Field(f.name, "fixed", ty, offset, ty.size, 1, f.doc,
                                    line=f.span.line, col=f.span.col))
                offset += ty.size
            self._struct_ir[name] = Struct(name, offset, fields, node.doc,
                                           display_path(self.struct_source[name]),
                                           node.span.line)
        return self._struct_ir[name]

    def block(self, name: str, path: str, fields: tuple[ast.Field, ...], since: int,
              depth: int) -> Block:
        out: list[Field] = []
        offset = 0
        min_len = 0
        n_groups = n_vars = 0
        for f in fields:
            fs = _since(f, since)
            if f.type is None:
                sub = self.block(naming.group_type(name, f.name), f"{path}.{f.name}", f.fields,
                                 fs, depth + 1)
                out.append(Field(f.name, "group", None, None, 0, fs, f.doc, n_groups, sub,
                                 f.span.line, f.span.col))
                n_groups += 1
            elif f.type.name in layout.VAR_TYPES:
                out.append(Field(f.name, f.type.name, None, None, 0, fs, f.doc, n_vars,
                                 line=f.span.line, col=f.span.col))
                n_vars += 1
            else:
                ty = self.type_of(f.type)
                size = ty.size + (layout.PRESENCE_SIZE if f.type.optional else 0)
                kind = "optional" if f.type.optional else "fixed"
                out.append(Field(f.name, kind, ty, offset, size, fs, f.doc,
                                 line=f.span.line, col=f.span.col))
                offset += size
                if fs <= since:
                    min_len = offset
        return Block(name, path, offset, min_len, out, since, depth)


def build(prog: Program, path: str) -> Schema:
    """The IR of root file ``path`` (validated beforehand by :func:`seqc.validate.validate`)."""
    tree = prog.files[path]
    b = _Builder(prog, path)
    deps = prog.closure(path)
    schema = Schema(
        package=tree.package,
        schema_id=tree.schema_id or 0,
        version=tree.version or 1,
        doc=tree.doc,
        source=display_path(path),
        sources=[display_path(p) for p in deps + [path]],
    )
    for name, e in b.enums.items():
        schema.enums.append(Enum(
            name, e.base, e.is_flags, [EnumValue(v.name, v.value, v.doc) for v in e.values],
            e.doc, display_path(b.enum_source[name]), e.span.line))
    for name in b.structs:
        schema.structs.append(b.struct(name))
    # structs that embed other structs come after them
    order: list[Struct] = []

    def place(s: Struct) -> None:
        if s in order:
            return
        for f in s.fields:
            if f.type is not None and f.type.kind == "struct":
                place(schema.struct(f.type.name))
        order.append(s)

    for s in list(schema.structs):
        place(s)
    schema.structs = order
    for m in tree.messages:
        schema.messages.append(Message(m.name, m.id, b.block(m.name, m.name, m.fields, 1, 0),
                                       m.doc, m.span.line))
    return schema
