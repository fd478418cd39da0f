"""``seqbus node MODULE:CLASS --arg NAME=VALUE ...``: constructor arguments from a shell.

Each ``--arg NAME=VALUE`` is a keyword argument of the class's constructor, converted to the
parameter's annotation: ``str`` (and an unannotated parameter) as given; ``int``, ``float``,
``Decimal``, ``Path``; ``bool`` from true/false, yes/no, on/off, 1/0; an ``Enum`` by member
name (or value); a ``Literal`` by one of its values; ``X | None`` as ``X``; a list, tuple, set
or other collection of those from a repeated ``--arg`` (``--arg symbol=AAPL --arg
symbol=MSFT``). A name the constructor does not take, a value that does not convert, a
required parameter not given: each is an error naming the parameter.
"""

from __future__ import annotations

import collections.abc
import difflib
import enum
import inspect
import types
import typing
from collections.abc import Callable, Sequence
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from seqbus.admin import _to_bool
from seqbus.errors import SeqbusError

__all__ = ["constructor_arguments"]

_COLLECTIONS: dict[object, Callable[[list[Any]], Any]] = {
    list: list,
    tuple: tuple,
    set: set,
    frozenset: frozenset,
    collections.abc.Sequence: list,
    collections.abc.Iterable: list,
    collections.abc.Collection: list,
    collections.abc.Set: frozenset,
}


def _scalar(annotation: Any, text: str) -> Any:
    """``text`` as ``annotation`` (one value); ValueError saying why not."""
    if annotation in (inspect.Parameter.empty, Any, str, object):
        return text
    origin = typing.get_origin(annotation)
    if origin is typing.Literal:
        for value in typing.get_args(annotation):
            if str(value) == text:
                return value
        raise ValueError(f"not one of {', '.join(repr(str(v)) for v in typing.get_args(annotation))}")
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(options) == 1:
            return _scalar(options[0], text)
        raise ValueError(f"a union ({annotation}) cannot be given on the command line")
    if annotation is bool:
        return _to_bool(text)
    if annotation is int:
        return int(text)
    if annotation is float:
        return float(text)
    if annotation is Decimal:
        try:
            return Decimal(text)
        except InvalidOperation:
            raise ValueError(f"not a decimal number: {text!r}") from None
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        if text in annotation.__members__:
            return annotation.__members__[text]
        for member in annotation:
            if str(member.value) == text:
                return member
        raise ValueError(f"not one of {', '.join(annotation.__members__)}")
    if isinstance(annotation, type) and (annotation is Path or issubclass(annotation, Path)):
        return annotation(text)
    if isinstance(annotation, type):
        return annotation(text)  # a class built from its text (its own errors say why not)
    raise ValueError(f"a parameter annotated {annotation} cannot be given on the command line")


def _convert(annotation: Any, texts: list[str]) -> Any:
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(options) == 1:
            return _convert(options[0], texts)
    collect = _COLLECTIONS.get(origin if origin is not None else annotation)
    if collect is not None:
        args = typing.get_args(annotation)
        item = args[0] if args and args[0] is not Ellipsis else str
        return collect([_scalar(item, t) for t in texts])
    if len(texts) > 1:
        raise ValueError(f"given {len(texts)} times; it takes one value")
    return _scalar(annotation, texts[0])


def constructor_arguments(cls: type, given: Sequence[str]) -> dict[str, Any]:
    """The keyword arguments ``--arg NAME=VALUE ...`` (``given``) make for ``cls(...)``.
    Raises :class:`SeqbusError` naming the parameter that is unknown, missing or whose value
    does not convert."""
    what = f"{cls.__module__}:{cls.__qualname__}"
    try:
        signature = inspect.signature(cls)
    except (TypeError, ValueError) as exc:
        raise SeqbusError(f"cannot read the constructor of {what}: {exc}") from None
    params = signature.parameters
    by_keyword = {
        name: p
        for name, p in params.items()
        if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
    }
    any_keyword = any(p.kind is p.VAR_KEYWORD for p in params.values())
    values: dict[str, list[str]] = {}
    for item in given:
        name, sep, value = item.partition("=")
        name = name.strip()
        if not sep or not name.isidentifier():
            raise SeqbusError(f"--arg {item!r}: give it as NAME=VALUE")
        if name not in by_keyword and not any_keyword:
            close = difflib.get_close_matches(name, list(by_keyword), n=1)
            hint = f"; did you mean {close[0]}?" if close else ""
            takes = ", ".join(by_keyword) or "no keyword arguments"
            raise SeqbusError(
                f"--arg {name}: {what}() has no parameter {name!r}{hint} (it takes: {takes})"
            )
        values.setdefault(name, []).append(value)
    hints: dict[str, Any] = {}
    if values:
        init = cls.__init__  # type: ignore[misc]  # the class's own, as inspect read it
        try:
            hints = typing.get_type_hints(init)
        except Exception as exc:  # noqa: BLE001 - an annotation that does not evaluate
            raise SeqbusError(
                f"cannot read the annotations of {what}.__init__ to convert --arg values: "
                f"{type(exc).__name__}: {exc}"
            ) from None
    kwargs: dict[str, Any] = {}
    for name, texts in values.items():
        p = by_keyword.get(name)
        annotation = hints.get(name, p.annotation if p is not None else str)
        try:
            kwargs[name] = _convert(annotation, texts)
        except (ValueError, TypeError) as exc:
            shown = texts[0] if len(texts) == 1 else texts
            raise SeqbusError(f"--arg {name}={shown}: {exc}") from None
    missing = [
        name for name, p in by_keyword.items() if p.default is p.empty and name not in kwargs
    ]
    positional = [
        p.name for p in params.values() if p.kind is p.POSITIONAL_ONLY and p.default is p.empty
    ]
    if positional:
        raise SeqbusError(
            f"{what}() needs positional-only arguments ({', '.join(positional)}); seqbus node "
            "passes keyword arguments (--arg NAME=VALUE)"
        )
    if missing:
        raise SeqbusError(
            f"{what}() needs {', '.join(f'--arg {m}=VALUE' for m in missing)}"
        )
    return kwargs
