"""Java target: flyweight decoders and encoders over a buffer, in the style of SBE's Java, one
Java package per schema; they read and write through the ``seqbus-codec`` runtime library
(runtime/java/codec: buffers, framing, errors, JSON).

Per schema: an enum class per enum, a class of bit constants per flags, a decoder and an
encoder per struct, per message and per group entry, and ``<Package>Messages``, the entry that
reads a header and hands the bytes to the right decoder. Decoders check the whole frame when
they are wrapped and each value when it is read (a ``DecodeException`` naming field and
offset); reading allocates nothing. Every decoder renders canonical JSON and can be copied
into its encoder.

Reads only the IR; the templates lay out what the small functions here decide.
"""

from __future__ import annotations

from dataclasses import dataclass

import jinja2

from seqc import ir, layout, naming

#: IDL primitive → Java type holding it (unsigned types widen, u64 stays a long).
JAVA_TYPE = {
    "bool": "boolean", "u8": "short", "u16": "int", "u32": "long", "u64": "long",
    "i8": "byte", "i16": "short", "i32": "int", "i64": "long", "f32": "float", "f64": "double",
}
#: IDL primitive → (buffer getter, mask applied to widen an unsigned value).
_GET = {
    "u8": ("getByte", "0xFF"), "i8": ("getByte", None),
    "u16": ("getShort", "0xFFFF"), "i16": ("getShort", None),
    "u32": ("getInt", "0xFFFFFFFFL"), "i32": ("getInt", None),
    "u64": ("getLong", None), "i64": ("getLong", None),
    "f32": ("getFloat", None), "f64": ("getDouble", None),
}
#: IDL primitive → (buffer setter, cast of the Java value to what the setter takes).
_PUT = {
    "u8": ("putByte", "(byte) "), "i8": ("putByte", ""),
    "u16": ("putShort", "(short) "), "i16": ("putShort", ""),
    "u32": ("putInt", "(int) "), "i32": ("putInt", ""),
    "u64": ("putLong", ""), "i64": ("putLong", ""),
    "f32": ("putFloat", ""), "f64": ("putDouble", ""),
}


class JavaNameError(ValueError):
    """Two generated names collide, or a schema name would shadow one Java code relies on."""


def jtype(primitive: str) -> str:
    return JAVA_TYPE[primitive]


def get_expr(primitive: str, buf: str, at: str) -> str:
    """A Java expression of type ``jtype(primitive)`` reading the primitive at ``at``."""
    method, mask = _GET[primitive]
    expr = f"{buf}.{method}({at})"
    if mask is None:
        return expr
    if primitive == "u8":
        return f"(short) ({expr} & {mask})"
    return f"({expr} & {mask})"


def put_stmt(primitive: str, buf: str, at: str, value: str) -> str:
    """A Java statement writing ``value`` (of ``jtype(primitive)``) at ``at``."""
    if primitive == "bool":
        return f"{buf}.putByte({at}, (byte) ({value} ? 1 : 0));"
    method, cast = _PUT[primitive]
    return f"{buf}.{method}({at}, {cast}{value});"


def checked(primitive: str, value: str, path: str) -> str:
    """``value`` checked to fit an unsigned primitive narrower than its Java type."""
    if primitive in ("u8", "u16", "u32"):
        return f"Ranges.{primitive}({value}, {path})"
    return value


def literal(value: int, primitive: str) -> str:
    """A Java literal of ``jtype(primitive)`` for an integer of the primitive's range."""
    java = JAVA_TYPE[primitive]
    if java == "long":
        if value >= 1 << 63:
            value -= 1 << 64
        return f"{value}L"
    if java in ("short", "byte"):
        return f"({java}) {value}"
    return str(value)


def bit(position: int, primitive: str) -> str:
    """The flag constant of bit ``position``, of ``jtype(primitive)``."""
    java = JAVA_TYPE[primitive]
    if java == "long":
        return f"1L << {position}"
    if java in ("short", "byte"):
        return f"({java}) (1 << {position})"
    return f"1 << {position}"


def zero_stmts(buf: str, at: str, length: int) -> list[str]:
    """Statements zeroing ``length`` bytes at ``at``: 8-byte stores, the last one overlapping
    the one before when the length is not a multiple of 8 (a block is at least 8 bytes then),
    narrower stores for a shorter block."""
    out = []
    if length >= 8:
        offsets = list(range(0, length - 7, 8))
        if length % 8:
            offsets.append(length - 8)
        out = [f"{buf}.putLong({at} + {o}, 0L);" for o in offsets]
        return out
    o = 0
    for size, method, zero in ((4, "putInt", "0"), (2, "putShort", "(short) 0"),
                               (1, "putByte", "(byte) 0")):
        if length - o >= size:
            out.append(f"{buf}.{method}({at} + {o}, {zero});")
            o += size
    return out


def json_number(primitive: str, value: str) -> str:
    """A statement appending a number to ``out`` as canonical JSON writes it."""
    if primitive == "u64":
        return f"Json.appendUnsigned(out, {value});"
    if primitive == "f32":
        return f"Json.appendFloat(out, {value});"
    if primitive == "f64":
        return f"Json.appendDouble(out, {value});"
    return f"out.append({value});"


def java_doc(text: str, indent: int = 0, extra: str = "") -> str:
    """A Javadoc comment of ``text`` (HTML and comment terminators escaped), then ``extra``
    (Javadoc as is) as a paragraph of its own."""
    pad = " " * indent
    clean = (text.strip().replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
             .replace("*/", "*&#47;").replace("\\", "&#92;").replace("@", "&#64;"))
    lines = clean.splitlines() or [""]
    if extra:
        lines += [""] + extra.strip().splitlines()
    if len(lines) == 1:
        return f"{pad}/** {lines[0]} */"
    body = "\n".join(f"{pad} * {ln}".rstrip() for ln in lines)
    return f"{pad}/**\n{body}\n{pad} */"


@dataclass
class Acc:
    """One field as Java sees it: accessor names, error paths and where its bytes are."""

    f: ir.Field
    name: str  # accessor: orderId
    cap: str  # OrderId: hasOrderId, getOrderId, appendOrderId, clearOrderId
    path: str  # what a DecodeException names: legs.symbol
    epath: str  # what an EncodeException names: NewOrder.legs.symbol
    #: the field may lie past the writer's block (newer than its level): read it through the
    #: prologue that switches to Frames.ZEROS
    newer: bool = False
    end: int = 0  # offset + size in the block
    index: int = 0  # position among the level's groups and variable-length fields (tail order)

    @property
    def kind(self) -> str:
        return self.f.kind

    @property
    def type(self) -> ir.Type:
        assert self.f.type is not None
        return self.f.type


def _accessors(fields: list[ir.Field], rel: str, owner: str, since: int,
               n_groups: int) -> list[Acc]:
    out = []
    for f in fields:
        path = f"{rel}.{f.name}" if rel else f.name
        a = Acc(f, naming.java_member(f.name), naming.java_capital(f.name), path,
                f"{owner}.{f.name}")
        if f.offset is not None:
            a.end = f.offset + f.size
            a.newer = f.since > since
        if f.kind == "group":
            assert f.index is not None
            a.index = f.index
        elif f.kind in layout.VAR_TYPES:
            assert f.index is not None
            a.index = n_groups + f.index
        out.append(a)
    return out


def block_accessors(blk: ir.Block) -> list[Acc]:
    rel = blk.path.split(".", 1)[1] if blk.depth else ""
    return _accessors(blk.fields, rel, blk.path, blk.since, len(blk.groups))


def struct_accessors(s: ir.Struct) -> list[Acc]:
    return _accessors(s.fields, "", s.name, 1, 0)


def _members(accs: list[Acc], is_decoder: bool) -> list[str]:
    """Every member name a block's or struct's class takes from its fields."""
    names = []
    for a in accs:
        names.append(a.name)
        if a.kind == "optional":
            names += ["has" + a.cap, "clear" + a.cap]
        kind = a.f.type.kind if a.f.type is not None else a.kind
        if kind in ("char", "byte", "string", "bytes"):
            names += ["get" + a.cap, a.name + "Length", "append" + a.cap, "copy" + a.cap]
        if kind == "enum":
            names.append(a.name + "Raw")
        if a.kind == "group":
            names += [a.name + "Count", a.name + "Group", a.name + "At"]
        if a.kind in layout.VAR_TYPES:
            names.append(a.name + "At")
        if kind == "struct":
            names.append(a.name + "Struct")
    return names


def check_names(schema: ir.Schema) -> None:
    """Refuse a schema whose Java names would collide or shadow what generated code uses."""
    problems = []
    types: dict[str, str] = {}

    def claim(java: str, what: str) -> None:
        if java in naming.JAVA_RESERVED_TYPES:
            problems.append(f"{what} would be Java class {java}, which generated code uses "
                            "from java.lang or seqbus.codec")
        elif java in types:
            problems.append(f"{what} and {types[java]} would both be Java class {java}")
        else:
            types[java] = what

    for e in schema.enums:
        claim(e.name, f"{'flags' if e.is_flags else 'enum'} {e.name}")
    for s in schema.structs:
        claim(naming.java_decoder(s.name), f"struct {s.name}")
        claim(naming.java_encoder(s.name), f"struct {s.name}")
        _unique(struct_accessors(s), f"struct {s.name}", problems)
    for m in schema.messages:
        for blk in m.body.all_blocks():
            what = f"message {m.name}" if not blk.depth else f"group {blk.path}"
            claim(naming.java_decoder(blk.name), what)
            claim(naming.java_encoder(blk.name), what)
            _unique(block_accessors(blk), what, problems)
    claim(naming.java_messages_class(schema.package), f"package {schema.package}'s entry")
    if schema.messages:  # --lang java-node's class, in the same Java package
        claim(naming.node_class(schema.package), f"package {schema.package}'s node base")
    if problems:
        raise JavaNameError(f"{schema.source}: cannot generate Java: " + "; ".join(problems))


def _unique(accs: list[Acc], what: str, problems: list[str]) -> None:
    seen: set[str] = set()
    for name in _members(accs, True):
        if name in seen:
            problems.append(f"{what}: two fields would both make Java member {name}()")
        seen.add(name)


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("seqc", "templates"),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.globals.update(
        jtype=jtype, get_expr=get_expr, put_stmt=put_stmt, checked=checked, literal=literal,
        bit=bit, json_number=json_number, zero_stmts=zero_stmts, java_doc=java_doc, decoder=naming.java_decoder,
        encoder=naming.java_encoder, screaming=naming.screaming, handler=naming.java_handler,
        block_accessors=block_accessors, struct_accessors=struct_accessors,
        HEADER=layout.MESSAGE_HEADER_SIZE, SECTION=layout.SECTION_HEADER_SIZE,
    )
    return env


def generate(schema: ir.Schema, java_package: str | None = None) -> dict[str, str]:
    """Relative path → text of every Java source of ``schema``, in package ``java_package``
    (default: the IDL package, :func:`seqc.naming.java_package`)."""
    check_names(schema)
    env = environment()
    jpkg = java_package or naming.java_package(schema.package)
    messages = naming.java_messages_class(schema.package)
    ctx = {"schema": schema, "jpkg": jpkg, "messages": messages}
    out: dict[str, str] = {}

    def emit(cls: str, template: str, **kw: object) -> None:
        text = env.get_template(f"java/{template}").render(**ctx, cls=cls, **kw)
        out[f"{jpkg.replace('.', '/')}/{cls}.java"] = text

    for e in schema.enums:
        emit(e.name, "flags.java.j2" if e.is_flags else "enum.java.j2", e=e)
    for s in schema.structs:
        emit(naming.java_decoder(s.name), "struct_decoder.java.j2", s=s)
        emit(naming.java_encoder(s.name), "struct_encoder.java.j2", s=s)
    for m in schema.messages:
        for blk in m.body.all_blocks():
            emit(naming.java_decoder(blk.name), "decoder.java.j2", m=m, blk=blk)
            emit(naming.java_encoder(blk.name), "encoder.java.j2", m=m, blk=blk)
    emit(messages, "messages.java.j2")
    return out


def generate_index(schemas: list[ir.Schema]) -> dict[str, str]:
    """Nothing: the support code is the seqbus-codec library, not generated."""
    return {}
