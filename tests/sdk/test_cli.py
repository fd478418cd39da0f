"""The seqbus command line: argument handling and node loading (no bus needed)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from seqbus import Node, SeqbusError
from seqbus.cli import load_node_class, main
from seqbus.demo import percentiles


def test_load_node_class_finds_a_node_subclass() -> None:
    assert load_node_class("seqbus.node:Node") is Node


@pytest.mark.parametrize(
    ("target", "error"),
    [
        ("seqbus.node", "MODULE:CLASS"),
        ("no_such_module_xyz:Node", "cannot import 'no_such_module_xyz'"),
        ("seqbus.node:Missing", "has no attribute 'Missing'"),
        ("seqbus.errors:SeqbusError", "not a subclass of seqbus.Node"),
    ],
)
def test_load_node_class_errors_are_clear(target: str, error: str) -> None:
    with pytest.raises(SeqbusError, match=error):
        load_node_class(target)


def test_node_command_reports_a_bad_target(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["node", "seqbus.node", "-c", "bus.toml", "--account", "A"])
    assert code == 1
    assert "seqbus node: error: node must be given as MODULE:CLASS" in capsys.readouterr().err


def test_rewind_and_from_are_exclusive() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "seqbus.cli", "node", "m:C", "-c", "x", "--account", "A"]
        + ["--rewind", "--from", "5"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert proc.returncode == 2
    assert "not allowed with argument" in proc.stderr


def test_percentiles_nearest_rank_in_microseconds() -> None:
    values = [i * 1000 for i in range(1, 101)]
    assert percentiles(values, (50, 99, 100)) == {"p50": 50.0, "p99": 99.0, "p100": 100.0}
