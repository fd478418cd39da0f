"""C++ target: one header-only C++17 file per schema (``<pkg>.hpp``) of flyweight views that
read a message in place (no copy, no allocation) and builders that write one into a caller's
buffer, byte-identical to the Python and Rust codecs, over the runtime in
``runtime/cpp/include/seqbus/codec/`` (the CMake package ``seqbus::codec``).

Reads only the IR; the template lays out what the small functions here decide.
"""

from __future__ import annotations

import jinja2

from seqc import ir, naming

#: The runtime interface the generated code is written against (seqbus::codec::ABI).
RUNTIME_ABI = 1

CPP_PRIM = {
    "bool": "bool", "u8": "std::uint8_t", "u16": "std::uint16_t", "u32": "std::uint32_t",
    "u64": "std::uint64_t", "i8": "std::int8_t", "i16": "std::int16_t", "i32": "std::int32_t",
    "i64": "std::int64_t", "f32": "float", "f64": "double",
}
#: Every C++ keyword and alternative token (to C++23), lower case as IDL field names are.
CPP_KEYWORDS = frozenset("""
    alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t
    char16_t char32_t class compl concept const consteval constexpr constinit const_cast
    continue co_await co_return co_yield decltype default delete do double dynamic_cast else
    enum explicit export extern false float for friend goto if inline int long mutable
    namespace new noexcept not not_eq nullptr operator or or_eq private protected public
    register reinterpret_cast requires return short signed sizeof static static_assert
    static_cast struct switch template this thread_local throw true try typedef typeid
    typename union unsigned using virtual void volatile wchar_t while xor xor_eq
""".split())
#: Names the C and C++ standard libraries define as macros (an enum value may be CamelCase
#: in all capitals).
CPP_MACROS = frozenset({"NULL", "EOF", "TRUE", "FALSE", "EDOM", "ERANGE", "EILSEQ",
                        "BUFSIZ", "CHAR_BIT", "assert", "errno"})


def ident(name: str) -> str:
    """An IDL name as a C++ identifier: a keyword or macro name gets a trailing underscore."""
    return name + "_" if name in CPP_KEYWORDS or name in CPP_MACROS else name


def default_namespace(package: str) -> str:
    """IDL ``package exchange.orders;`` → C++ namespace ``exchange::orders``."""
    return "::".join(ident(p) for p in package.split("."))


def is_namespace(text: str) -> bool:
    """True for ``a::b`` of identifiers that are not keywords."""
    parts = text.split("::")
    return all(p.isidentifier() and p.isascii() and p not in CPP_KEYWORDS for p in parts)


def header(package: str) -> str:
    """The generated header's file name: ``exchange.hpp``."""
    return naming.python_package(package) + ".hpp"


def view_name(name: str) -> str:
    return name + "View"


def builder_name(name: str) -> str:
    return name + "Builder"


def vtype(t: ir.Type) -> str:
    """The type a view returns for a fixed field of type ``t``."""
    if t.kind == "primitive":
        assert t.primitive is not None
        return CPP_PRIM[t.primitive]
    if t.kind == "char":
        return "std::string_view"
    if t.kind == "byte":
        return "seqbus::codec::byte_view"
    if t.kind == "struct":
        return view_name(t.name)
    return t.name


def ftype(f: ir.Field) -> str:
    """The type a view returns for field ``f``."""
    if f.kind == "group":
        assert f.group is not None
        return f"seqbus::codec::group_view<{view_name(f.group.name)}>"
    if f.kind == "string":
        return "std::string_view"
    if f.kind == "bytes":
        return "seqbus::codec::byte_view"
    assert f.type is not None
    base = vtype(f.type)
    return f"std::optional<{base}>" if f.kind == "optional" else base


def setter_type(t: ir.Type) -> str:
    """The parameter type of a builder's setter of a fixed field of type ``t`` (not structs:
    they have builders of their own)."""
    if t.kind in ("char",):
        return "std::string_view"
    return vtype(t)


def read_expr(t: ir.Type, p: str, where: str, field: str, off: str) -> str:
    """An expression reading a value of type ``t`` at pointer ``p``; ``where``/``field``/``off``
    name it in a decode_error."""
    rt = "seqbus::codec::detail"
    if t.kind == "primitive":
        assert t.primitive is not None
        if t.primitive == "bool":
            return f"{rt}::load_bool({p}, {where}, {field}, {off})"
        return f"{rt}::load<{CPP_PRIM[t.primitive]}>({p})"
    if t.kind == "char":
        return f"{rt}::load_char({p}, {t.length}, {where}, {field}, {off})"
    if t.kind == "byte":
        return f"seqbus::codec::byte_view({p}, {t.length})"
    if t.kind == "flags":
        assert t.primitive is not None
        return f"{t.name}{{{rt}::load<{CPP_PRIM[t.primitive]}>({p})}}"
    if t.kind == "enum":
        assert t.primitive is not None
        return (f"{rt}::check_enum(static_cast<{t.name}>({rt}::load<{CPP_PRIM[t.primitive]}>"
                f"({p})), {where}, {field}, {off}, \"{t.name}\")")
    # a struct view names its errors "Message.field.Struct.inner": the path to it, when known
    # here as a literal, joined to the field's name (adjacent literals concatenate)
    path = f'{where} "." {field}' if where.startswith('"') else where
    return f"{view_name(t.name)}({p}, {off}, {path})"


def store_stmt(t: ir.Type, q: str, v: str, path: str) -> str:
    """A statement writing ``v`` (of the setter's type) at pointer ``q``; ``path`` names the
    field in an encode_error."""
    rt = "seqbus::codec::detail"
    if t.kind == "primitive":
        assert t.primitive is not None
        if t.primitive == "bool":
            return f"{rt}::store_bool({q}, {v});"
        return f"{rt}::store<{CPP_PRIM[t.primitive]}>({q}, {v});"
    if t.kind == "char":
        return f'{rt}::store_char({q}, {t.length}, {v}, "{path}");'
    if t.kind == "byte":
        return f'{rt}::store_byte({q}, {t.length}, {v}, "{path}");'
    if t.kind == "flags":
        assert t.primitive is not None
        return f"{rt}::store<{CPP_PRIM[t.primitive]}>({q}, {v}.bits);"
    if t.kind == "enum":
        return f'{rt}::store_enum({q}, {v}, "{path}", "{t.name}");'
    raise AssertionError("structs are written through their builders")


def json_stmt(t: ir.Type, v: str) -> str:
    """A statement appending the canonical JSON of ``v`` (a value of type ``t``) to ``out``."""
    js = "seqbus::codec::json"
    if t.kind == "primitive":
        assert t.primitive is not None
        if t.primitive == "bool":
            return f"{js}::append_bool(out, {v});"
        if t.primitive in ("f32", "f64"):
            return f"{js}::append_double(out, static_cast<double>({v}));"
        return f"{js}::append_int(out, {v});"
    if t.kind == "char":
        return f"{js}::append_string(out, {v});"
    if t.kind == "byte":
        return f"{{ const seqbus::codec::byte_view b_ = {v}; {js}::append_hex(out, b_.data(), " \
               "b_.size()); }"
    if t.kind == "flags":
        return f"{js}::append_int(out, ({v}).bits);"
    if t.kind == "enum":
        return f"out += '\"'; out += name({v}); out += '\"';"
    return f"append_json(out, {v});"


def enum_literal(e: ir.Enum, value: int) -> str:
    """An enum value as a C++ literal of its base type's range (``18446744073709551615ull``,
    ``(-9223372036854775807ll - 1)``)."""
    if e.primitive.startswith("u"):
        return f"{value}ull" if e.primitive == "u64" else f"{value}u"
    if value == -(2**63):
        return "(-9223372036854775807ll - 1)"
    return f"{value}ll" if e.primitive == "i64" else str(value)


def flag_literal(e: ir.Enum, bit: int) -> str:
    return f"{1 << bit}u" if e.primitive != "u64" else f"{1 << bit}ull"


def cpp_doc(text: str, indent: int = 0) -> str:
    pad = " " * indent
    lines = text.strip().splitlines() or [""]
    return "\n".join(f"{pad}/// {ln}".rstrip() for ln in lines)


def c_string(text: str) -> str:
    """A C++ string literal of ASCII text."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("seqc", "templates"),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
        autoescape=False,
    )
    env.globals.update(vtype=vtype, ftype=ftype, setter_type=setter_type, read_expr=read_expr,
                       store_stmt=store_stmt, json_stmt=json_stmt, cpp_doc=cpp_doc, id=ident,
                       view=view_name, builder=builder_name, flag_literal=flag_literal,
                       enum_literal=enum_literal,
                       c_string=c_string, prim=CPP_PRIM)
    return env


def node_header(package: str) -> str:
    """The generated node base's file name: ``exchange_node.hpp``."""
    return naming.python_package(package) + "_node.hpp"


#: Handler names seqbus::Node uses for its own hooks.
RUNTIME_HOOKS = frozenset({"on_opened", "on_message", "on_rewound", "on_closed"})


def check_node_names(schema: ir.Schema) -> None:
    """Refuse a schema whose node base would hide a hook of seqbus::Node or one of its types."""
    problems = [f"the handler of message {m.name} would be seqbus::Node's hook "
                f"{naming.handler(m.name)}" for m in schema.messages
                if naming.handler(m.name) in RUNTIME_HOOKS]
    cls = naming.node_class(schema.package)
    types = ({e.name for e in schema.enums} | {s.name for s in schema.structs}
             | {f(b.name) for m in schema.messages for b in m.body.all_blocks()
                for f in (view_name, builder_name)})
    if cls in types:
        problems.append(f"the node base class {cls} would have the name of a type of the schema")
    if problems:
        raise ValueError(f"{schema.source}: cannot generate the C++ node base: "
                         + "; ".join(problems) + ": rename it")


def generate(schema: ir.Schema, namespace: str | None = None) -> dict[str, str]:
    """``{<pkg>.hpp: text, <pkg>_node.hpp: text}``: the codecs of ``schema`` in C++ namespace
    ``namespace`` (default: the IDL package, dots as ``::``) and, for a schema with messages,
    its node base class ``<Package>Node`` over ``seqbus::Node`` (a header of its own: code that
    uses only the codecs needs neither it nor the node library)."""
    env = environment()
    ns = namespace or default_namespace(schema.package)
    blocks = [(b, m) for m in schema.messages for b in reversed(m.body.all_blocks())]
    text = env.get_template("cpp/schema.hpp.j2").render(
        schema=schema, blocks=blocks, abi=RUNTIME_ABI, namespace=ns)
    out = {header(schema.package): text}
    if schema.messages:
        check_node_names(schema)
        out[node_header(schema.package)] = env.get_template("cpp/node.hpp.j2").render(
            schema=schema, namespace=ns, cls=naming.node_class(schema.package),
            codecs=header(schema.package), handler=naming.handler, snake=naming.snake)
    return out


def generate_index(schemas: list[ir.Schema]) -> dict[str, str]:
    """Nothing shared: every header includes the runtime (``<seqbus/codec/runtime.hpp>``)."""
    return {}
