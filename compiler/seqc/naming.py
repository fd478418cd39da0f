"""Every naming rule of seqc, in one place: IDL names → Python, Cython and Rust names."""

from __future__ import annotations

import keyword
import re

_SNAKE = re.compile(r"^[a-z][a-z0-9]*(_[a-z0-9]+)*$")
_CAMEL = re.compile(r"^[A-Z][A-Za-z0-9]*$")

PYTHON_KEYWORDS = frozenset(keyword.kwlist) | frozenset(keyword.softkwlist)
CYTHON_KEYWORDS = frozenset({
    "cdef", "cpdef", "cimport", "ctypedef", "struct", "union", "enum", "extern", "inline",
    "nogil", "gil", "public", "readonly", "include", "sizeof", "NULL", "fused", "const",
    "volatile", "signed", "unsigned", "long", "short", "int", "char", "float", "double",
    "object", "bint", "void", "api", "cppclass", "namespace", "new", "del", "operator",
})
RUST_KEYWORDS = frozenset({
    "as", "break", "const", "continue", "crate", "else", "enum", "extern", "false", "fn", "for",
    "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub", "ref", "return",
    "self", "Self", "static", "struct", "super", "trait", "true", "type", "unsafe", "use",
    "where", "while", "async", "await", "dyn", "abstract", "become", "box", "do", "final",
    "macro", "override", "priv", "typeof", "unsized", "virtual", "yield", "try", "gen",
})
#: Field names that would shadow members of the generated classes.
GENERATED_MEMBERS = frozenset({
    "encode", "encode_into", "decode", "to_dict", "to_value", "from_dict", "to_list",
    "finish", "next", "wire_size", "wire_version", "self",
})
#: Type names the generated package defines itself.
RESERVED_TYPE_SUFFIXES = ("View", "Builder", "Node")


def is_snake(name: str) -> bool:
    return bool(_SNAKE.match(name))


def is_camel(name: str) -> bool:
    return bool(_CAMEL.match(name))


def illegal_in(name: str) -> list[str]:
    """The target languages in which ``name`` cannot be an identifier as is."""
    found = []
    if name in PYTHON_KEYWORDS:
        found.append("Python")
    if name in CYTHON_KEYWORDS:
        found.append("Cython")
    if name in RUST_KEYWORDS:
        found.append("Rust")
    if name.startswith("_"):
        found.append("Python (leading underscore is private)")
    return found


def camel(name: str) -> str:
    """``new_order`` / ``NewOrder`` / ``legs`` → ``NewOrder`` / ``NewOrder`` / ``Legs``."""
    if "_" not in name and name[:1].isupper():
        return name
    return "".join(part[:1].upper() + part[1:] for part in name.split("_") if part)


def snake(name: str) -> str:
    """``NewOrder`` → ``new_order``; ``HTTPStatus`` → ``http_status``."""
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s)
    return s.lower()


def screaming(name: str) -> str:
    """``PostOnly`` → ``POST_ONLY`` (Rust associated constants)."""
    return snake(name).upper()


def python_package(package: str) -> str:
    """IDL ``package exchange.orders;`` → Python package ``exchange_orders``."""
    return package.replace(".", "_")


def is_python_package(dotted: str) -> bool:
    """True for a dotted import path of identifiers that are not keywords (``seqbus.bus``)."""
    return all(part.isidentifier() and not keyword.iskeyword(part)
               for part in dotted.split("."))


def node_class(package: str) -> str:
    """``exchange`` → ``ExchangeNode`` (docs/architecture.md)."""
    return camel(python_package(package)) + "Node"


def handler(message: str) -> str:
    """``NewOrder`` → ``on_new_order``."""
    return "on_" + snake(message)


def view(name: str) -> str:
    return name + "View"


def builder(name: str) -> str:
    return name + "Builder"


def group_type(owner: str, field: str) -> str:
    """The entry type of group ``legs`` in ``NewOrder``: ``NewOrderLegs``."""
    return owner + camel(field)


def rust_field(name: str) -> str:
    return f"r#{name}" if name in RUST_KEYWORDS else name


def rust_module(package: str) -> str:
    return python_package(package)


# ---- Java ------------------------------------------------------------------------------------

JAVA_KEYWORDS = frozenset({
    "abstract", "assert", "boolean", "break", "byte", "case", "catch", "char", "class", "const",
    "continue", "default", "do", "double", "else", "enum", "extends", "final", "finally",
    "float", "for", "goto", "if", "implements", "import", "instanceof", "int", "interface",
    "long", "native", "new", "package", "private", "protected", "public", "return", "short",
    "static", "strictfp", "super", "switch", "synchronized", "this", "throw", "throws",
    "transient", "try", "void", "volatile", "while", "true", "false", "null", "var", "yield",
    "record", "sealed", "permits", "non-sealed", "_",
})
#: Methods every generated Java class has (Object's, Iterator's, the flyweights' own): a field
#: whose accessor would take one of these names gets a trailing underscore.
JAVA_RESERVED_MEMBERS = frozenset({
    "getClass", "hashCode", "equals", "clone", "toString", "notify", "notifyAll", "wait",
    "finalize", "wrap", "wrapAndApplyHeader", "next", "hasNext", "count", "iterator", "remove",
    "forEach", "forEachRemaining", "spliterator", "appendTo", "toJson", "encodedLength",
    "messageName", "templateId", "writerVersion", "reencode", "copyFrom", "buffer", "offset",
    "limit", "index",
})
#: Type names generated Java code uses unqualified (java.lang and the seqbus.codec runtime): a
#: schema type of one of these names would shadow them.
JAVA_RESERVED_TYPES = frozenset({
    "Object", "String", "StringBuilder", "Override", "Math", "Integer", "Long", "Short", "Byte",
    "Float", "Double", "Boolean", "Character", "Iterable", "Iterator", "NoSuchElementException",
    "IllegalStateException", "SuppressWarnings", "Deprecated", "Override", "System",
    "ReadBuffer", "MutableBuffer", "ArrayBuffer", "NioBuffer", "Frames", "Chars", "Utf8", "Json",
    "Ranges", "EncodeCursor", "MessageDecoder", "PackageDecoder", "DecodeException",
    "EncodeException",
})


def java_member(name: str) -> str:
    """``order_id`` → ``orderId``; a Java keyword or a reserved member gets a trailing ``_``."""
    parts = [p for p in name.split("_") if p]
    out = parts[0] + "".join(p[:1].upper() + p[1:] for p in parts[1:]) if parts else name
    if out in JAVA_KEYWORDS or out in JAVA_RESERVED_MEMBERS:
        out += "_"
    return out


def java_capital(name: str) -> str:
    """``order_id`` → ``OrderId``: the part after ``has``, ``get``, ``append``, ``clear``."""
    return camel(name)


def java_package(package: str) -> str:
    """The default Java package of IDL package ``package``: the same dotted name, a segment that
    is a Java keyword getting a trailing ``_`` (``exchange.orders`` → ``exchange.orders``)."""
    return ".".join(p + "_" if p in JAVA_KEYWORDS else p for p in package.split("."))


def is_java_package(dotted: str) -> bool:
    """True for a dotted Java package name of identifiers that are not keywords."""
    return all(p.isidentifier() and p.isascii() and p not in JAVA_KEYWORDS
               for p in dotted.split("."))


def java_messages_class(package: str) -> str:
    """``exchange`` → ``ExchangeMessages``: the per-package entry (header, dispatch)."""
    return camel(python_package(package)) + "Messages"


def java_decoder(name: str) -> str:
    return name + "Decoder"


def java_encoder(name: str) -> str:
    return name + "Encoder"


def java_handler(message: str) -> str:
    """``NewOrder`` → ``onNewOrder``."""
    return "on" + message
