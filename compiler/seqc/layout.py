"""All wire-layout arithmetic: sizes of types, header sizes, limits (docs/wire-format.md)."""

from __future__ import annotations

#: Primitive type → (size in bytes, signed, is float).
PRIMITIVES: dict[str, tuple[int, bool, bool]] = {
    "bool": (1, False, False),
    "u8": (1, False, False), "u16": (2, False, False),
    "u32": (4, False, False), "u64": (8, False, False),
    "i8": (1, True, False), "i16": (2, True, False),
    "i32": (4, True, False), "i64": (8, True, False),
    "f32": (4, True, True), "f64": (8, True, True),
}
INTEGER_BASES = ("u8", "u16", "u32", "u64", "i8", "i16", "i32", "i64")
ARRAY_TYPES = ("char", "byte")
VAR_TYPES = ("string", "bytes")

MESSAGE_HEADER_SIZE = 8  # block_length u16 | template_id u16 | schema_id u16 | version u16
SECTION_HEADER_SIZE = 2  # num_groups u8 | num_var_fields u8, right after a message's block
GROUP_HEADER_SIZE = 8  # block_length u16 | num_groups u8 | num_var_fields u8 | count u32
VAR_LENGTH_SIZE = 4  # u32 length before each string/bytes value
PRESENCE_SIZE = 1  # the byte before an optional value: 0 absent, 1 present

MAX_BLOCK_LENGTH = 0xFFFF
MAX_TAIL_ITEMS = 0xFF  # groups per level; variable-length fields per level
MAX_ARRAY_LENGTH = 0xFFFF
MAX_TEMPLATE_ID = 0xFFFF
MAX_SCHEMA_ID = 0xFFFF
MAX_VERSION = 0xFFFF
MAX_GROUP_DEPTH = 16


def int_range(base: str) -> tuple[int, int]:
    size, signed, _ = PRIMITIVES[base]
    bits = size * 8
    if signed:
        return -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return 0, (1 << bits) - 1


def flag_bits(base: str) -> int:
    return PRIMITIVES[base][0] * 8
