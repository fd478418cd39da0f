"""Where the node SDK lies: what a Java or C++ node builds and runs against (docs/languages.md).

The ``seqbus`` wheel carries it under the package, ``seqbus/sdk/``, an install prefix:

* ``include/``: ``seqbus.h`` (the C ABI), ``seqbus/node.hpp``, ``seqbus/codec/*.hpp``,
  ``bus.hpp``;
* ``lib/libseqbus_ffi.so``: the node library (the Rust node client behind the C ABI and JNI);
* ``lib/cmake/seqbus/``: the CMake package (``find_package(seqbus)``: ``seqbus::codec``,
  ``seqbus::node``, ``seqbus_generate()``), relocatable;
* ``share/java/``: the jars ``seqbus-codec`` and ``seqbus-node`` (each with its pom inside)
  and their parent pom.

In a checkout (an editable install) it is what ``make build-nodes`` made:
``var/build/nodes/prefix`` and the jars Maven left in ``runtime/java/*/target``.

``seqbus sdk prefix|classpath|library|cmake-dir|include`` prints each, for a shell:
``cmake -DCMAKE_PREFIX_PATH="$(seqbus sdk prefix)"``, ``javac -cp "$(seqbus sdk classpath)"``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from seqbus.errors import SeqbusError

__all__ = ["SdkMissing", "classpath", "cmake_dir", "include_dir", "jars", "library", "prefix"]

#: The library's file name, under ``lib/`` of the prefix.
LIBRARY = "libseqbus_ffi.so"
#: The jars a node's class path needs, by artifact (each ``share/java/<artifact>-<version>.jar``).
ARTIFACTS = ("seqbus-codec", "seqbus-node")

_PACKAGE = Path(__file__).resolve().parent
_CHECKOUT = _PACKAGE.parent.parent


class SdkMissing(SeqbusError):
    """The node SDK is not here: a wheel built without it, or a checkout where it is not built."""


def _checkout_prefix() -> Path | None:
    """The checkout's prefix when this package runs from one (runtime/seqbus), else None."""
    if (_CHECKOUT / "runtime" / "seqbus").resolve() != _PACKAGE:
        return None
    return _CHECKOUT / "var" / "build" / "nodes" / "prefix"


def prefix() -> Path:
    """The SDK's install prefix (for ``CMAKE_PREFIX_PATH``). :class:`SdkMissing` says why
    there is none."""
    shipped = _PACKAGE / "sdk"
    if (shipped / "lib" / LIBRARY).is_file():
        return shipped
    built = _checkout_prefix()
    if built is not None:
        if (built / "lib" / LIBRARY).is_file():
            return built
        raise SdkMissing(f"this is a checkout and the node SDK is not built ({built / 'lib'} "
                         f"has no {LIBRARY}): run `make build-nodes`")
    raise SdkMissing(f"this seqbus has no node SDK ({shipped} is not there): its wheel was "
                     "built without it (-C seqbus.node-sdk=skip, or from an sdist); install a "
                     "wheel that has it")


def library() -> Path:
    """The node library, ``libseqbus_ffi.so`` (what a Java node loads, a C++ node links)."""
    return prefix() / "lib" / LIBRARY


def include_dir() -> Path:
    """The C and C++ headers' directory."""
    return prefix() / "include"


def cmake_dir() -> Path:
    """The CMake package's directory (``seqbus_DIR``)."""
    return prefix() / "lib" / "cmake" / "seqbus"


def jars() -> list[Path]:
    """The jars of a node's class path: ``seqbus-codec`` then ``seqbus-node``."""
    root = prefix()
    out = []
    for artifact in ARTIFACTS:
        if root == _checkout_prefix():  # a checkout: Maven's own output
            folder = _CHECKOUT / "runtime" / "java" / artifact.removeprefix("seqbus-") / "target"
            hint = " (`make build-nodes` builds it)"
        else:
            folder, hint = root / "share" / "java", ""
        found = sorted(folder.glob(f"{artifact}-*.jar"))
        found = [j for j in found if not j.stem.endswith(("-sources", "-javadoc", "-tests"))]
        if len(found) != 1:
            raise SdkMissing(f"{folder} holds {len(found)} {artifact} jars, not one{hint}")
        out.extend(found)
    return out


def classpath() -> str:
    """:func:`jars` joined by ``:`` (for ``javac -cp`` and ``java -cp``)."""
    return ":".join(str(j) for j in jars())


_ANSWERS: dict[str, tuple[str, Callable[[], str]]] = {
    "prefix": ("the install prefix, for CMAKE_PREFIX_PATH", lambda: str(prefix())),
    "classpath": ("the Java node's jars joined by ':', for javac/java -cp", classpath),
    "library": (f"the node library ({LIBRARY})", lambda: str(library())),
    "cmake-dir": ("the CMake package's directory (seqbus_DIR)", lambda: str(cmake_dir())),
    "include": ("the C and C++ headers' directory", lambda: str(include_dir())),
}


def _cmd_sdk(args: argparse.Namespace) -> int:
    try:
        print(_ANSWERS[args.what][1]())
    except SdkMissing as exc:
        print(f"seqbus sdk {args.what}: error: {exc}", file=sys.stderr)
        return 1
    return 0


def add_command(sub: Any) -> None:
    """``seqbus sdk WHAT`` on the CLI's subcommands."""
    p = sub.add_parser(
        "sdk", help="where the node SDK lies: C/C++ headers, CMake package, library, jars",
        description="Prints where the node SDK the wheel carries lies, for building Java and "
        "C++ nodes (docs/languages.md): " + "; ".join(f"{k}: {v[0]}"
                                                      for k, v in _ANSWERS.items()) + ".")
    p.add_argument("what", choices=list(_ANSWERS), help="what to print")
    p.set_defaults(func=_cmd_sdk)
