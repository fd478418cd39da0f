"""The demo's watch over its processes: a node that finishes its work may end, any other ending
fails the demo, and a node that ends between two looks is judged by what it left behind."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, cast

import pytest

from seqbus.demo import _Watch


class _EndsWhenPolled:
    """A process that writes its report and exits with status 0 at the moment it is polled:
    the order of events that made the demo report 'the MD-1 exited with status 0' under load
    (its report looked for, then written, then the exit seen)."""

    def __init__(self, report: Path | None) -> None:
        self.report = report
        self.returncode: int | None = None

    def poll(self) -> int | None:
        if self.returncode is None:
            if self.report is not None:
                self.report.write_text(json.dumps({"last_sequence": 7}))
            self.returncode = 0
        return self.returncode


def _watch(procs: dict[str, Any], reports: Path, deadline: float = 60.0) -> _Watch:
    return _Watch(cast(dict[str, subprocess.Popen[bytes]], procs),
                  time.monotonic() + deadline, reports, frozenset({"GW-1", "ME-2", "MD-1"}))


def test_a_node_that_writes_its_report_and_exits_while_watched_has_finished(
    tmp_path: Path,
) -> None:
    watch = _watch({"MD-1": _EndsWhenPolled(tmp_path / "MD-1.json")}, tmp_path)
    watch.check("end of the order flow")  # no error: its report is there once it is gone
    assert (tmp_path / "MD-1.json").exists()


def test_a_node_that_exits_without_its_report_fails_the_demo(tmp_path: Path) -> None:
    watch = _watch({"MD-1": _EndsWhenPolled(None)}, tmp_path)
    with pytest.raises(RuntimeError, match="the MD-1 exited with status 0"):
        watch.check("end of the order flow")


def test_a_real_process_that_fails_after_its_report_fails_the_demo(tmp_path: Path) -> None:
    (tmp_path / "ME-2.json").write_text("{}")  # its report, then a failure
    proc = subprocess.Popen([sys.executable, "-c", "raise SystemExit(3)"])
    try:
        proc.wait(30)
        watch = _watch({"ME-2": proc}, tmp_path)
        with pytest.raises(RuntimeError, match="the ME-2 exited with status 3"):
            watch.check("end marker at ME-2")
    finally:
        proc.kill()


def test_services_never_finish_and_the_deadline_is_named(tmp_path: Path) -> None:
    # a sequencer does not stop by design, whatever lies in the reports folder
    watch = _watch({"sequencer-1": _EndsWhenPolled(tmp_path / "sequencer-1.json")}, tmp_path)
    with pytest.raises(RuntimeError, match="the sequencer-1 exited with status 0"):
        watch.check("leader among the sequencers")
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        late = _watch({"replayer": proc}, tmp_path, deadline=-1.0)
        with pytest.raises(TimeoutError, match="no leader among the sequencers before the timeout"):
            late.check("leader among the sequencers")
    finally:
        proc.kill()
        proc.wait()
