"""The syntax tree of one ``.idl`` file: frozen dataclasses, every node with its span."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Span:
    file: str
    line: int
    col: int
    end_line: int
    end_col: int


@dataclass(frozen=True)
class TypeRef:
    name: str
    length: int | None  # char[N], byte[N]
    optional: bool
    span: Span


@dataclass(frozen=True)
class Annotation:
    name: str
    value: int
    span: Span


@dataclass(frozen=True)
class Field:
    name: str
    type: TypeRef | None  # None for a group
    fields: tuple[Field, ...]  # a group's fields
    annotations: tuple[Annotation, ...]
    doc: str
    span: Span  # the field's name

    @property
    def is_group(self) -> bool:
        return self.type is None


@dataclass(frozen=True)
class EnumValue:
    name: str
    value: int
    doc: str
    span: Span
    value_span: Span


@dataclass(frozen=True)
class Enum:
    name: str
    base: str
    values: tuple[EnumValue, ...]
    is_flags: bool
    doc: str
    span: Span
    base_span: Span


@dataclass(frozen=True)
class Struct:
    name: str
    fields: tuple[Field, ...]
    doc: str
    span: Span


@dataclass(frozen=True)
class Message:
    name: str
    id: int
    fields: tuple[Field, ...]
    doc: str
    span: Span
    id_span: Span


@dataclass(frozen=True)
class Import:
    path: str
    span: Span


@dataclass(frozen=True)
class File:
    path: str
    package: str
    package_span: Span
    schema_id: int | None
    version: int | None
    schema_span: Span | None
    imports: tuple[Import, ...]
    enums: tuple[Enum, ...]
    structs: tuple[Struct, ...]
    messages: tuple[Message, ...]
    doc: str
