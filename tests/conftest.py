"""Fixtures shared by every test folder: network capabilities and process management."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import struct
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

# ports no socket holds and that this process has not handed out before (seqbus.demo)
from seqbus.demo import free_tcp_port as free_tcp_port, free_udp_port as free_udp_port

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent


def udp_bound(port: int) -> bool:
    """Whether a UDP socket of this network namespace is bound to ``port`` (on any address):
    read from ``/proc/net/udp``, not probed with a bind of our own, which would hold the port
    for a moment, and a sequencer binding it in that moment would fail to start."""
    suffix = f":{port:04X}"
    with open("/proc/net/udp") as f:
        next(f)  # the header
        return any(line.split()[1].endswith(suffix) for line in f)


def multicast_unavailable_reason() -> str | None:
    """Why UDP multicast on loopback cannot be used here, or None when it can."""
    if os.environ.get("SEQBUS_NO_NETNS") == "1":
        return "no private network namespace could be made (see scripts/in-netns.sh)"
    group = "239.255.77.77"
    try:
        rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_UDP)
        tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM, socket.IPPROTO_UDP)
    except OSError as exc:  # pragma: no cover - no sockets at all
        return f"cannot open UDP sockets: {exc}"
    try:
        rx.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        rx.bind((group, 0))
        port = rx.getsockname()[1]
        mreq = struct.pack("4s4s", socket.inet_aton(group), socket.inet_aton("127.0.0.1"))
        rx.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, mreq)
        rx.settimeout(0.5)
        tx.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton("127.0.0.1"))
        tx.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 1)
        tx.sendto(b"probe", (group, port))
        data = rx.recv(16)
        return None if data == b"probe" else "multicast probe returned the wrong bytes"
    except OSError as exc:
        return f"UDP multicast does not work on loopback here ({exc}); run the tests through scripts/in-netns.sh"
    finally:
        rx.close()
        tx.close()


@pytest.fixture(scope="session")
def multicast() -> None:
    reason = multicast_unavailable_reason()
    if reason is not None:
        pytest.skip(reason)


class Processes:
    """Processes a test starts; every one is killed by PID (its whole process group) at the end."""

    def __init__(self, logdir: Path) -> None:
        self.logdir = logdir
        self.procs: list[tuple[str, subprocess.Popen[bytes]]] = []

    def start(
        self, name: str, args: list[str], env: dict[str, str] | None = None,
        *, cwd: Path = ROOT, inherit_env: bool = True,
    ) -> subprocess.Popen[bytes]:
        """Start ``args`` in ``cwd`` with this process's environment updated by ``env`` (or,
        ``inherit_env=False``, with ``env`` alone)."""
        log = open(self.logdir / f"{name}.log", "wb")
        full_env = dict(os.environ) if inherit_env else {}
        full_env["PYTHONUNBUFFERED"] = "1"
        if env:
            full_env.update(env)
        proc = subprocess.Popen(
            args, stdout=log, stderr=subprocess.STDOUT, env=full_env, cwd=cwd,
            start_new_session=True,
        )
        log.close()
        self.procs.append((name, proc))
        return proc

    def log(self, name: str) -> str:
        path = self.logdir / f"{name}.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def wait(self, proc: subprocess.Popen[bytes], timeout: float) -> int:
        return proc.wait(timeout=timeout)

    def kill(self, proc: subprocess.Popen[bytes], sig: int = signal.SIGKILL) -> None:
        if proc.poll() is None:
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                pass

    def stop_all(self) -> None:
        for _, proc in self.procs:
            self.kill(proc, signal.SIGTERM)
        deadline = time.monotonic() + 3.0
        for _, proc in self.procs:
            try:
                proc.wait(timeout=max(0.05, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                self.kill(proc, signal.SIGKILL)
                proc.wait(timeout=5)

    def logs(self) -> str:
        return "\n".join(f"----- {name} -----\n{self.log(name)[-3000:]}" for name, _ in self.procs)


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[Processes]:
    procs = Processes(tmp_path)
    try:
        yield procs
    finally:
        procs.stop_all()


def seqbus_cli() -> list[str]:
    exe = VENV_BIN / "seqbus"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "seqbus.cli"]


def capture_written(capture: Path, knock: Callable[[], None], timeout: float = 30.0) -> bool:
    """Knocks (a packet the capture filter takes) until the capture file grows past what it
    held: before a run, the capture is live; after it, every packet sent before the knock is
    in the file (the capture writes in order, and a SIGINT does not wait for packets it has
    not read yet). Bounded by ``timeout``."""
    size = capture.stat().st_size if capture.exists() else 0
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        knock()
        time.sleep(0.1)
        if capture.exists() and capture.stat().st_size > size:
            return True
    return False


def tshark_path() -> str | None:
    return shutil.which("tshark")


def run_demo(argv: list[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    """``seqbus demo ARGV`` in its own process group (it starts its own processes and makes
    its own network namespace), killed as a group, the demo and all it started, if it outlives
    ``timeout``."""
    env = {k: v for k, v in os.environ.items() if k != "SEQBUS_IN_NETNS"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "seqbus.cli", "demo", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=cwd,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        pytest.fail(f"the demo did not finish within {timeout} s:\n{err[-3000:]}")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
