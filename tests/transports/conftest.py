"""Fixtures of the transport tests."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.conftest import ROOT
from tests.transports.harness import BINARY, TARGET


@pytest.fixture(scope="session")
def transport_bus() -> Path:
    """The built example program (cargo build, shared target directory), or the program
    named by SEQBUS_TRANSPORT_BUS."""
    prebuilt = os.environ.get("SEQBUS_TRANSPORT_BUS")
    if prebuilt:
        return Path(prebuilt)
    env = dict(os.environ, CARGO_TARGET_DIR=str(TARGET))
    proc = subprocess.run(
        [
            "cargo",
            "build",
            "--release",
            "-q",
            "-p",
            "seqbus-net",
            "--example",
            "transport_bus",
        ],
        cwd=ROOT / "rust",
        env=env,
        capture_output=True,
        text=True,
        timeout=1500,
    )
    assert proc.returncode == 0, f"cargo build failed:\n{proc.stderr[-4000:]}"
    assert BINARY.exists()
    return BINARY
