"""Python target: a Cython codec module, its ``.pyi`` stub and the node base class.

Reads only the IR. Everything target-specific about how a field is declared, read or written
is decided here, in small functions the templates call; the templates only lay the text out.
"""

from __future__ import annotations

import os
from pathlib import Path

import jinja2

from seqc import ir, layout, naming

CTYPES = {
    "bool": "uint8_t", "u8": "uint8_t", "u16": "uint16_t", "u32": "uint32_t", "u64": "uint64_t",
    "i8": "int8_t", "i16": "int16_t", "i32": "int32_t", "i64": "int64_t",
    "f32": "float", "f64": "double",
}


#: The file of a generated package that holds its schema's IR (``seqc ir --json``).
IR_FILE = "ir.json"


def ctype_of(prim: str) -> str:
    return CTYPES[prim]


def _pyctype(t: ir.Type) -> str:
    assert t.primitive is not None
    return "bint" if t.primitive == "bool" else CTYPES[t.primitive]


def attr_decl(f: ir.Field) -> str:
    if f.kind == "fixed" and f.type is not None and f.type.kind == "primitive":
        return f"cdef public {_pyctype(f.type)} {f.name}"
    if f.kind == "group":
        return f"cdef public list {f.name}"
    return f"cdef public object {f.name}"


def _conv(f: ir.Field, v: str, where: str) -> str:
    """``v`` (an object expression) as a value class stores field ``f``'s value: enums as
    members (ints looked up), flags as IntFlag values (cached per int), structs as values
    (dicts converted), char[N] as an ASCII str of at most N (checked); the rest as given (checked on encode)."""
    t = f.type
    assert t is not None
    if t.kind == "enum":
        return f"_s.enum_of({v}, _{t.name}_type, _{t.name}_members, {where})"
    if t.kind == "flags":
        return (f"_s.flags_of({v}, _{t.name}_type, _{t.name}_cache, "
                f"{(1 << (8 * t.size)) - 1}, {where})")
    if t.kind == "struct":
        return f"_s.value_of({v}, {t.name}, {where})"
    if t.kind == "char":
        return f"_s.char_of({v}, {t.length}, {where})"
    return v


def fill_stmts(f: ir.Field, i: int, owner: str, where: str) -> list[str]:
    """Statements storing argument ``a[i]`` (NULL: not given) into ``r.<field>``."""
    v = f"<object>a[{i}]"
    w = f'"{where}"'
    if f.kind == "group":
        assert f.group is not None
        return [f"r.{f.name} = [] if a[{i}] == NULL else "
                f"_s.entries_of({v}, {f.group.name}, {w})"]
    if f.kind == "string":
        return [f'r.{f.name} = "" if a[{i}] == NULL else _s.str_of({v}, {w})']
    if f.kind == "bytes":
        return [f'r.{f.name} = b"" if a[{i}] == NULL else {v}']
    if f.kind == "optional":
        return [f"r.{f.name} = None if a[{i}] == NULL or {v} is None else {_conv(f, v, w)}"]
    return [f'if a[{i}] == NULL:', f'    _s.missing("{owner}", "{f.name}")',
            f"r.{f.name} = {_conv(f, v, w)}"]


def init_arg(f: ir.Field) -> str:
    if f.kind == "optional":
        return f"{f.name}=None"
    if f.kind == "group":
        return f"{f.name}=()"
    if f.kind == "string":
        return f'{f.name}=""'
    if f.kind == "bytes":
        return f'{f.name}=b""'
    assert f.type is not None
    if f.type.kind == "primitive":
        return f"{_pyctype(f.type)} {f.name}"
    return f.name


def init_param(f: ir.Field) -> str:
    """A parameter of ``__init__``/``encode_fields`` (objects; defaults as in the stubs)."""
    arg = init_arg(f)
    return arg.split(" ", 1)[1] if " " in arg and "=" not in arg else arg


def init_params(fields: list[ir.Field]) -> str:
    """The constructor's (and ``encode_fields``') parameters as Python writes them: the text of
    their ``__signature__`` (keyword-only; defaults are None, (), "" or b"")."""
    return ", ".join(["*", *map(init_param, fields)]) if fields else ""


def init_value(f: ir.Field) -> str:
    n = f.name
    if f.kind == "group":
        return f"list({n})"
    if f.type is not None and f.type.kind in ("enum", "flags"):
        e = f.type.name
        conv = f"({n} if type({n}) is {e} else {e}({n}))"
        return f"(None if {n} is None else {conv})" if f.kind == "optional" else conv
    return n


def read_expr(t: ir.Type, q: str, msg: str, field: str, off: str) -> str:
    if t.kind == "primitive":
        if t.primitive == "bool":
            return f"(_s.ld_bool({q}, {msg}, {field}, {off}) == 1)"
        return f"_s.ld_{t.primitive}({q})"
    if t.kind == "char":
        return f"_s.ld_char({q}, {t.length}, {msg}, {field}, {off})"
    if t.kind == "byte":
        return f"PyBytes_FromStringAndSize(<const char*>({q}), {t.length})"
    if t.kind == "flags":
        return f"_rd_{t.name}({q})"
    return f"_rd_{t.name}({q}, {msg}, {field}, {off})"


def write_stmt(t: ir.Type, q: str, v: str, where: str) -> str:
    if t.kind == "primitive":
        if t.primitive == "bool":
            return f"_s.st_u8({q}, 1 if {v} else 0)"
        return f"_s.st_{t.primitive}({q}, {v})"
    if t.kind == "char":
        return f"_s.st_char({q}, {t.length}, {v}, {where})"
    if t.kind == "byte":
        return f"_s.st_byte({q}, {t.length}, {v}, {where})"
    return f"_wr_{t.name}({q}, {v}, {where})"


def write_a(f: ir.Field, i: int, q: str, where: str) -> list[str]:
    """Statements writing fixed field ``f`` from argument ``a[i]`` (NULL: not given) at
    ``q`` (the field's place in the block): the encode path that builds no value object."""
    t = f.type
    assert t is not None
    v = f"<object>a[{i}]"
    w = f'"{where}"'
    assert f.offset is not None
    if t.kind == "struct":
        put = f"_{t.name}_write_any({q}{{off}}, {v}, {w})"
    else:
        put = write_stmt(t, q + "{off}", v, w)
    if f.kind == "optional":
        return [f"if a[{i}] == NULL or {v} is None:",
                f"    memset({q} + {f.offset}, 0, {f.size})",
                "else:",
                f"    {q}[{f.offset}] = 1",
                "    " + put.replace("{off}", f" + {f.offset + 1}")]
    return [f"if a[{i}] == NULL:", f'    _s.missing("{where.rsplit(".", 1)[0]}", "{f.name}")',
            put.replace("{off}", f" + {f.offset}")]


def _py_value(f: ir.Field, expr: str, view: bool) -> str:
    """A value class's field (``view`` False) as a plain Python value."""
    if f.kind == "group":
        return f"[e.to_dict() for e in {expr}]"
    if f.kind == "bytes":
        return f"bytes({expr})"
    if f.kind == "string":
        return expr
    assert f.type is not None
    t = f.type
    if t.kind == "struct":
        conv = f"{expr}.to_dict()"
    elif t.kind == "byte" and not view:
        conv = f"bytes({expr}).ljust({t.length}, b'\\0')"
    elif t.kind == "char" and not view:
        conv = f"{expr}.rstrip('\\0 ')"
    else:
        return expr
    return f"(None if {expr} is None else {conv})" if f.kind == "optional" else conv


def value_to_py(f: ir.Field, expr: str) -> str:
    return _py_value(f, expr, view=False)


def mat_expr(f: ir.Field, mode: str, read: str) -> str:
    """A fixed-size field's value, from its read expression, as ``to_dict`` (mode "dict") or
    ``to_value`` (mode "value") holds it."""
    if mode == "dict" and f.type is not None and f.type.kind == "struct":
        return f"{read}._dict()"
    return read


def docstring(text: str, indent: int = 0) -> str:
    text = text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"').strip()
    lines = text.splitlines() or [""]
    pad = " " * indent
    if len(lines) == 1:
        return f'"""{lines[0]}"""'
    body = "\n".join((pad + ln) if ln.strip() else "" for ln in lines[1:])
    return f'"""{lines[0]}\n{body}\n{pad}"""'


def field_path(blk: ir.Block, f: ir.Field, m: ir.Message | None = None) -> str:
    rel = f"{blk.path.split('.', 1)[1]}.{f.name}" if blk.depth else f.name
    return f"{m.name}.{rel}" if m is not None else rel


def field_paths(blk: ir.Block, m: ir.Message) -> list[str]:
    return [field_path(blk, f, m) for f in blk.fields]


def group_seq(name: str) -> str:
    return name + "Group"


def _kind_text(f: ir.Field) -> str:
    if f.kind == "group":
        return "group"
    if f.kind in ("string", "bytes"):
        return f.kind
    assert f.type is not None
    t = f.type
    base = f"{t.name}[{t.length}]" if t.kind in ("char", "byte") else t.name
    return ("optional " if f.kind == "optional" else "") + base


def field_doc(f: ir.Field) -> str:
    head = f.doc.strip() or f.name.replace("_", " ").capitalize() + "."
    extra = f"``{_kind_text(f)}``"
    if f.since > 1:
        extra += f", since version {f.since}"
    if f.kind == "bytes":
        extra += "; a zero-copy read-only memoryview into the buffer"
    if f.kind == "group":
        extra += ("; iterate or index it (an entry view of its own each; ``iter_reused()``"
                  " moves one view instead)")
    return f"{head}\n\n{extra}."


def view_doc(blk: ir.Block, m: ir.Message) -> str:
    if blk.depth == 0:
        head = m.doc.strip() or f"Message {m.name} (template {m.id})."
        return (f"{head}\n\nZero-copy view of a {m.name} message: wraps bytes, bytearray, "
                "memoryview or mmap and reads a field only when asked. Truncated or corrupt "
                "input raises seqbus.errors.DecodeError.")
    return (f"One entry of group ``{blk.path}``: a zero-copy view that stays valid (one view is "
            "moved from entry to entry only by the group's ``iter_reused()``).")


def builder_doc(blk: ir.Block, m: ir.Message) -> str:
    if blk.depth == 0:
        return (f"Writes a {m.name} straight into a caller's writable buffer.\n\nSet fixed "
                "fields in any order; start groups and set variable-length fields in "
                "declaration order; ``finish()`` returns the length.")
    return (f"Writes the entries of group ``{blk.path}``: call ``next()`` before each "
            "entry, then set its fields.")


def value_doc(blk: ir.Block, m: ir.Message) -> str:
    if blk.depth == 0:
        head = m.doc.strip() or f"Message {m.name} (template {m.id})."
        return (f"{head}\n\nA plain value: construct it with keyword arguments, "
                f"``encode()`` it, or ``{m.name}.decode(buf)`` to get a "
                f"{naming.view(m.name)}.")
    return f"One entry of group ``{blk.path}``, as a plain value."


def pytype(f: ir.Field, for_view: bool) -> str:
    """The Python type of a field in stubs."""
    if f.kind == "group":
        assert f.group is not None
        if for_view:
            return group_seq(f.group.name)
        return f"list[{f.group.name}]"
    if f.kind == "string":
        return "str"
    if f.kind == "bytes":
        return "memoryview" if for_view else "bytes | bytearray | memoryview"
    assert f.type is not None
    t = f.type
    if t.kind == "primitive":
        base = "bool" if t.primitive == "bool" else "float" if t.primitive in ("f32", "f64") \
            else "int"
    elif t.kind == "char":
        base = "str"
    elif t.kind == "byte":
        base = "bytes"
    else:
        base = t.name
    return f"{base} | None" if f.kind == "optional" else base


def _struct_tuple(t: ir.Type, structs: dict[str, ir.Struct]) -> str:
    s = structs[t.name]
    return "tuple[" + ", ".join(pytype(f, for_view=False) for f in s.fields) + "]"


def pyarg(f: ir.Field, fields_path: bool = False,
          structs: dict[str, ir.Struct] | None = None) -> str:
    """A constructor parameter in stubs; with ``fields_path``, of ``encode_fields`` and
    ``send_<message>`` (entries and structs may also be tuples of their fields)."""
    if f.kind == "group":
        assert f.group is not None
        if fields_path:
            return (f"{f.name}: Sequence[{f.group.name} | tuple[Any, ...] | dict[str, Any]]"
                    " = ()")
        return f"{f.name}: Iterable[{f.group.name} | dict[str, Any]] = ()"
    if f.kind == "string":
        return f'{f.name}: str = ""'
    if f.kind == "bytes":
        return f'{f.name}: bytes | bytearray | memoryview = b""'
    assert f.type is not None
    t = f.type
    ty = pytype(f, for_view=False)
    if t.kind in ("flags", "enum"):
        ty = ty.replace(t.name, f"{t.name} | int")
    if t.kind == "struct":
        alt = _struct_tuple(t, structs or {}) + " | " if fields_path else ""
        ty = ty.replace(t.name, f"{t.name} | {alt}dict[str, Any]")
    if t.kind == "byte":
        ty = ty.replace("bytes", "bytes | bytearray | memoryview")
    if f.kind == "optional":
        return f"{f.name}: {ty} = None"
    return f"{f.name}: {ty}"


def builder_setter_type(f: ir.Field) -> str:
    if f.kind == "bytes":
        return "bytes | bytearray | memoryview"
    t = pytype(f, for_view=False)
    if f.type is not None and f.type.kind in ("flags", "enum"):
        t = t.replace(f.type.name, f"{f.type.name} | int")  # a value or a member
    return t


def primitives() -> list[dict[str, object]]:
    return [{"name": n, "ctype": CTYPES[n], "size": s}
            for n, (s, _signed, _float) in layout.PRIMITIVES.items() if n != "bool"]


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("seqc", "templates"),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.filters["struct_path"] = lambda field, struct: f"{struct}.{field}"
    env.globals.update(
        ctype_of=ctype_of, attr_decl=attr_decl, init_arg=init_arg, init_value=init_value,
        init_param=init_param, init_params=init_params, fill_stmts=fill_stmts, write_a=write_a,
        field_paths=field_paths,
        read_expr=read_expr, write_stmt=write_stmt, value_to_py=value_to_py,
        docstring=docstring, mat_expr=mat_expr, field_path=field_path,
        group_seq=group_seq, field_doc=field_doc, view_doc=view_doc, builder_doc=builder_doc,
        value_doc=value_doc, pytype=pytype, pyarg=pyarg, builder_setter_type=builder_setter_type,
        view=naming.view, builder=naming.builder, handler=naming.handler,
        node_class=naming.node_class, primitives=primitives(), snake=naming.snake,
    )
    return env


#: Methods of message views their getattro answers itself, before the fields (bound as a
#: ``seqbus._codec_support.BoundMethod``): the hot calls on a view → the cdef method behind.
VIEW_FAST_METHODS = {"to_value": "_value", "to_dict": "_dict"}

#: The ABI of ``seqbus._codec_support`` the generated modules are written for; the runtime's
#: ``seqbus._codec_support.ABI`` must equal it (each generated module checks at import).
SUPPORT_ABI = 12


def generate(schema: ir.Schema, python_package: str | None = None, *,
             export_node: bool = True) -> dict[str, str]:
    """Relative path → text of every file of the Python package of ``schema``.

    ``python_package`` is the dotted import path of the package (``seqbus.bus``); by default
    the IDL package name (:func:`seqc.naming.python_package`). The paths follow it
    (``seqbus/bus/_codec.pyx``), relative to the directory that is on ``sys.path``.
    ``export_node=False``: the package's ``__init__`` does not import its node base class
    (``<package>.node``), so that ``seqbus.node`` may import the package (the bus's own
    schema: every node runs admin commands with its codecs).
    """
    env = environment()
    pkg = python_package or naming.python_package(schema.package)
    if not naming.is_python_package(pkg):
        raise ValueError(f"{pkg!r} is not a dotted Python package name")
    ctx = {"schema": schema, "pkg": pkg, "all_blocks": _all_blocks(schema),
           "support_abi": SUPPORT_ABI, "structs": {st.name: st for st in schema.structs},
           "view_field_names": sorted({f.name for b, _ in _all_blocks(schema) for f in b.fields}
                                       | {f.name for st in schema.structs for f in st.fields}
                                       | (set(VIEW_FAST_METHODS) if schema.messages else set())),
           "view_fast_methods": VIEW_FAST_METHODS,
           "export_node": export_node and bool(schema.messages)}
    out = {}
    for name, template in (
        ("_codec.pyx", "python/codec.pyx.j2"),
        ("_codec.pyi", "python/codec.pyi.j2"),
        ("node.py", "python/node.py.j2"),
        ("__init__.py", "python/init.py.j2"),
        ("py.typed", None),
    ):
        if name == "node.py" and not schema.messages:
            continue  # a types-only file: no node base
        path = f"{pkg.replace('.', '/')}/{name}"
        out[path] = env.get_template(template).render(ctx) if template else ""
    # the schema's IR, shipped as data beside the code it describes: what an archive writer or
    # a report needs of the layout, read with seqbus.archive.package_ir (no seqc at run time)
    out[f"{pkg.replace('.', '/')}/{IR_FILE}"] = ir.to_json(schema)
    return out


def _all_blocks(schema: ir.Schema) -> list[tuple[ir.Block, ir.Message]]:
    return [(b, m) for m in schema.messages for b in m.body.all_blocks()]


def write(files: dict[str, str], out_dir: str) -> list[str]:
    """Write ``files`` under ``out_dir``, leaving unchanged files untouched (keeps builds warm)."""
    written = []
    for rel, text in files.items():
        path = Path(out_dir) / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.exists() and path.read_text(encoding="utf-8") == text:
            continue
        tmp = path.with_suffix(path.suffix + ".tmp")
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, path)
        written.append(str(path))
    return written
