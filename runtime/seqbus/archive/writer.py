"""Writing an archive: the archiver appends the sequenced stream and seals at the end."""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from seqbus.archive._native import NativeWriter, core
from seqbus.archive.errors import ArchiveError

DEFAULT_SEGMENT_BYTES = 64 << 20


def load_ir(paths: Iterable[str | os.PathLike[str]]) -> list[tuple[int, str, str]]:
    """(schema id, package, IR JSON) of IR files written by ``seqc ir --json``, or of ``.idl``
    schemas (compiled here with seqc)."""
    out = []
    for p in paths:
        if str(p).endswith(".idl"):
            out.append(_compile_idl(p))
            continue
        text = Path(p).read_text()
        try:
            ir = json.loads(text)
            out.append((int(ir["schema_id"]), str(ir["package"]), text))
        except (ValueError, KeyError) as exc:
            raise ArchiveError(f"{p}: not seqc IR JSON ({exc})") from None
    return out


def _compile_idl(path: str | os.PathLike[str]) -> tuple[int, str, str]:
    try:
        from seqc import compile_files
        from seqc.diagnostics import CompileError
        from seqc.ir import to_json
    except ImportError:
        raise ArchiveError(f"{path}: compiling .idl needs seqc; give its IR JSON instead "
                           "(seqc ir --json SCHEMA.idl > FILE)") from None
    try:
        (schema,) = compile_files([str(path)])
    except (CompileError, OSError) as exc:
        raise ArchiveError(f"{path}: {exc}") from None
    return schema.schema_id, schema.package, to_json(schema)


class ArchiveWriter:
    """Appends sequenced messages (envelope + body, contiguous sequences) to a new archive.

    ``schemas``: the IR of every package the session carries, as ``(schema id, package, IR
    JSON)`` (see :func:`load_ir`) or a mapping ``package → IR JSON``.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        session: str,
        schemas: Iterable[tuple[int, str, str]] | Mapping[str, str] = (),
        *,
        segment_bytes: int = DEFAULT_SEGMENT_BYTES,
    ) -> None:
        if isinstance(schemas, Mapping):
            items = [(int(json.loads(t)["schema_id"]), pkg, t) for pkg, t in schemas.items()]
        else:
            items = list(schemas)
        self.path = Path(path)
        try:
            self._w: NativeWriter | None = core.ArchiveWriter(
                str(path), session, segment_bytes, items
            )
        except (OSError, ValueError) as exc:
            raise ArchiveError(str(exc)) from None

    def _writer(self) -> NativeWriter:
        if self._w is None:
            raise ArchiveError(f"{self.path}: the archive is sealed")
        return self._w

    @property
    def next_sequence(self) -> int | None:
        return self._writer().next_sequence

    def append(self, sequence: int, message: bytes | bytearray | memoryview) -> None:
        try:
            self._writer().append(sequence, message)
        except (OSError, ValueError) as exc:
            raise ArchiveError(str(exc)) from None

    def append_many(self, first_sequence: int, buf: bytes | bytearray | memoryview) -> int:
        """Appends messages laid out as ``length u32 | message`` back to back."""
        try:
            return self._writer().append_many(first_sequence, buf)
        except (OSError, ValueError) as exc:
            raise ArchiveError(str(exc)) from None

    def flush(self) -> None:
        """Makes what was appended visible to readers (live tailing, streaming queries)."""
        self._writer().flush()

    def seal(self) -> dict[str, Any]:
        """Flushes, fsyncs and writes the sealed manifest; returns it."""
        m = json.loads(self._writer().seal())
        self._w = None
        return dict(m)

    def __enter__(self) -> ArchiveWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._w is not None:
            self.seal()
