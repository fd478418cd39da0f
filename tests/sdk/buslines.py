"""Helpers of the tests that read what a bus's processes say: a one-sequencer bus on UDP
unicast over loopback (no multicast, no network namespace), and a process's stderr read line
by line as it comes."""

from __future__ import annotations

import os
import re
import select
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import free_udp_port

ROOT = Path(__file__).resolve().parents[2]


def unicast_config(tmp_path: Path, *, subscribers: int = 1) -> tuple[Path, int, list[str]]:
    """A one-sequencer bus on UDP unicast: (its file, the sequencer's upstream port, the
    nodes' listen addresses)."""
    upstream, replayer = free_udp_port(), free_udp_port()
    listens = [f"127.0.0.1:{free_udp_port()}" for _ in range(subscribers)]
    config = tmp_path / "bus.toml"
    config.write_text(
        f"""\
[bus]
session = "LOGS01"

[sequencer]
upstream = "127.0.0.1:{upstream}"
journal_dir = "{tmp_path / 'journal'}"
heartbeat_ms = 200

[downstream]
transport = "udp-unicast"
subscribers = [{", ".join(f'"{a}"' for a in listens)}]

[replayer]
listen = "127.0.0.1:{replayer}"

[node]
replayers = ["127.0.0.1:{replayer}"]
listen = "{listens[0]}"
"""
    )
    return config, upstream, listens


class Lines:
    """A process's stderr, read line by line as it comes (a pipe: nothing is waited on by
    sleeping), each line with the monotonic time it arrived."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stderr is not None
        self.proc = proc
        self.fd = proc.stderr.fileno()
        os.set_blocking(self.fd, False)
        self.buffer = b""
        self.lines: list[tuple[float, str]] = []

    def _read(self, timeout: float) -> None:
        ready, _, _ = select.select([self.fd], [], [], max(0.0, timeout))
        if not ready:
            return
        chunk = os.read(self.fd, 65536)
        now = time.monotonic()
        self.buffer += chunk
        *whole, self.buffer = self.buffer.split(b"\n")
        self.lines.extend((now, line.decode(errors="replace")) for line in whole)
        if not chunk and self.buffer:  # the end: the last line without its newline
            self.lines.append((now, self.buffer.decode(errors="replace")))
            self.buffer = b""

    def wait_for(self, pattern: str, timeout: float) -> tuple[float, re.Match[str]]:
        """The first line matching ``pattern`` (a regular expression): when it arrived, and
        the match. Fails naming what came instead after ``timeout`` s."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        seen = 0
        for _ in range(100_000):  # bounded by count as well as by time
            for at, line in self.lines[seen:]:
                m = regex.search(line)
                if m:
                    return at, m
            seen = len(self.lines)
            left = deadline - time.monotonic()
            if left <= 0:
                break
            self._read(min(left, 0.5))
        pytest.fail(f"no line matching {pattern!r} within {timeout} s:\n{self.text()}")

    def text(self) -> str:
        return "\n".join(line for _, line in self.lines)


def start(args: list[str], cwd: Path) -> subprocess.Popen[bytes]:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return subprocess.Popen(
        args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=cwd, env=env,
        start_new_session=True,
    )


def kill(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    proc.wait(timeout=10)
