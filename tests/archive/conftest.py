from __future__ import annotations

from pathlib import Path

import pytest

from tests.archive import session as sess


@pytest.fixture(scope="session")
def messages() -> list[sess.Msg]:
    return sess.build(200)


@pytest.fixture(scope="session")
def schemas() -> list[tuple[int, str, str]]:
    return sess.schemas()


@pytest.fixture
def archive_path(tmp_path: Path, messages: list[sess.Msg], schemas: list[tuple[int, str, str]]) -> Path:
    from seqbus.archive import ArchiveWriter

    path = tmp_path / "session.archive"
    with ArchiveWriter(path, "TEST", schemas, segment_bytes=16384) as w:
        for m in messages:
            w.append(m.sequence, m.message)
    return path
