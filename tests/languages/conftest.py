"""The programs of the cross-language node tests: built by ``make build-nodes`` (which ``make
test`` runs before pytest); built here when missing."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import ROOT

BUILD = ROOT / "var" / "build" / "nodes"


@dataclass(frozen=True)
class Programs:
    #: The C++ market-data node (examples/exchange/cpp).
    cpp_market_data: Path

    def java_market_data(self) -> list[str]:
        """The Java market-data node: the java command line before its arguments."""
        return java_command(BUILD)


def java_command(build: Path) -> list[str]:
    """``java`` with the Java node's library path and the example's class path, as
    ``make build-nodes`` leaves them (var/build/nodes/java.classpath)."""
    classpath = (build / "java.classpath").read_text().strip()
    library = ROOT / "rust" / "target" / "release" / "libseqbus_ffi.so"
    return [
        "java",
        f"-Dseqbus.node.library={library}",
        "-cp",
        classpath,
        "exchange.marketdata.MarketData",
    ]


def build_nodes() -> None:
    """``make build-nodes``, or the test fails saying why."""
    done = subprocess.run(
        ["make", "-C", str(ROOT), "build-nodes"], capture_output=True, text=True, timeout=3600,
        check=False,
    )
    if done.returncode != 0:
        pytest.fail(
            f"make build-nodes failed (the node programs are missing):\n{done.stdout[-3000:]}"
            f"\n{done.stderr[-3000:]}"
        )


@pytest.fixture(scope="session")
def programs() -> Programs:
    cpp = BUILD / "examples-cpp" / "exchange-market-data"
    if not cpp.exists():
        build_nodes()
    return Programs(cpp)
