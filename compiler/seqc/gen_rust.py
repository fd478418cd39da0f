"""Rust target: one module per schema (``<pkg>.rs``) with owned message types that encode
byte-identically to the Python codecs and decode with the same evolution rules, plus
``mod.rs`` naming every module of one run and ``seqc_rt.rs``, the support they share.

Reads only the IR; the template lays out what the small functions here decide.
"""

from __future__ import annotations

import jinja2

from seqc import ir, naming

RUST_PRIM = {
    "bool": "bool", "u8": "u8", "u16": "u16", "u32": "u32", "u64": "u64",
    "i8": "i8", "i16": "i16", "i32": "i32", "i64": "i64", "f32": "f32", "f64": "f64",
}


def rtype(t: ir.Type) -> str:
    if t.kind == "primitive":
        assert t.primitive is not None
        return RUST_PRIM[t.primitive]
    if t.kind == "char":
        return "String"
    if t.kind == "byte":
        return "Vec<u8>"
    return t.name


def ftype(f: ir.Field) -> str:
    """The Rust type of a field of a value struct."""
    if f.kind == "group":
        assert f.group is not None
        return f"Vec<{f.group.name}>"
    if f.kind == "string":
        return "String"
    if f.kind == "bytes":
        return "Vec<u8>"
    assert f.type is not None
    base = rtype(f.type)
    return f"Option<{base}>" if f.kind == "optional" else base


def read_expr(t: ir.Type, q: str, field: str, off: str) -> str:
    """An expression of type Result<T, DecodeError> reading ``t`` from ``q``, a slice of
    exactly the type's size."""
    if t.kind == "primitive":
        assert t.primitive is not None
        if t.primitive == "bool":
            return f"rt::rd_bool(d_, {q}, {field}, {off})"
        return f"Ok::<_, DecodeError>({t.primitive}::from_le_bytes(rt::arr({q})))"
    if t.kind == "char":
        return f"rt::rd_char(d_, {q}, {field}, {off})"
    if t.kind == "byte":
        return f"Ok::<_, DecodeError>(({q}).to_vec())"
    if t.kind == "flags":
        return f"Ok::<_, DecodeError>({t.name}({t.primitive}::from_le_bytes(rt::arr({q}))))"
    if t.kind == "enum":
        return f"{t.name}::read(d_, {q}, {field}, {off})"
    return f"{t.name}::read(d_, {q}, {field}, {off})"


def write_stmt(t: ir.Type, v: str, field: str) -> str:
    """Statements appending ``v`` (an expression of the field's type, by reference) to ``out``."""
    if t.kind == "primitive":
        if t.primitive == "bool":
            return f"out.push(u8::from(*{v}));"
        return f"out.extend_from_slice(&({v}).to_le_bytes());"
    if t.kind == "char":
        return f"rt::wr_char(out, {v}, {t.length}, {field})?;"
    if t.kind == "byte":
        return f"rt::wr_byte(out, {v}, {t.length}, {field})?;"
    if t.kind == "flags":
        return f"out.extend_from_slice(&({v}).0.to_le_bytes());"
    if t.kind == "enum":
        return f"out.extend_from_slice(&({v}).value().to_le_bytes());"
    return f"({v}).write(out)?;"


def json_stmt(t: ir.Type, v: str) -> str:
    if t.kind == "primitive":
        assert t.primitive is not None
        if t.primitive in ("f32", "f64"):
            return f"rt::json_float(out, f64::from(*{v}));"
        return f'out.push_str(&({v}).to_string());'
    if t.kind == "char":
        return f"rt::json_str(out, {v});"
    if t.kind == "byte":
        return f"rt::json_hex(out, {v});"
    if t.kind == "flags":
        return f"out.push_str(&({v}).0.to_string());"
    if t.kind == "enum":
        return f'rt::json_str(out, ({v}).name());'
    return f"({v}).json(out);"


def rust_doc(text: str, indent: int = 0, inner: bool = False) -> str:
    mark = "//!" if inner else "///"
    pad = " " * indent
    lines = text.strip().splitlines() or [""]
    return "\n".join(f"{pad}{mark} {ln}".rstrip() for ln in lines)


def rfield(name: str) -> str:
    return naming.rust_field(name)


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("seqc", "templates"),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.globals.update(rtype=rtype, ftype=ftype, read_expr=read_expr, write_stmt=write_stmt,
                       json_stmt=json_stmt, rust_doc=rust_doc, rfield=rfield,
                       screaming=naming.screaming)
    return env


def generate(schema: ir.Schema) -> dict[str, str]:
    env = environment()
    mod = naming.rust_module(schema.package)
    blocks = [(b, m) for m in schema.messages for b in reversed(m.body.all_blocks())]
    text = env.get_template("rust/module.rs.j2").render(schema=schema, blocks=blocks)
    return {f"{mod}.rs": text}


def generate_index(schemas: list[ir.Schema]) -> dict[str, str]:
    """``mod.rs`` declaring every module generated in one run, and ``seqc_rt.rs``."""
    env = environment()
    mods = sorted(naming.rust_module(s.package) for s in schemas)
    sources = sorted(s.source for s in schemas)
    return {"mod.rs": env.get_template("rust/mod.rs.j2").render(mods=mods, sources=sources),
            "seqc_rt.rs": env.get_template("rust/runtime.rs.j2").render()}
