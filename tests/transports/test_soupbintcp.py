"""The bus's SoupBinTCP as NASDAQ's tools see it: tshark decodes a capture with its own
SoupBinTCP dissector without one malformed packet, and `nasdaq-protocols` (NASDAQ's Python
client) logs in to the sequencer and receives the sequenced messages; bad logins are refused.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.conftest import Processes, capture_written, tshark_path
from tests.transports.harness import (
    PASSWORD,
    USER,
    Bus,
    tcp_listening,
    udp_bound,
    wait_for,
    write_config,
)

pytestmark = [pytest.mark.slow]

MESSAGES = 2000


def start_bus(tmp_path: Path, processes: Processes, exe: Path) -> Bus:
    bus = write_config(tmp_path, "tcp", session="SOUPTEST")
    processes.start("sequencer", [str(exe), "sequencer", str(bus.path)])
    assert wait_for(lambda: tcp_listening(bus.tcp) and udp_bound(bus.upstream), 20), (
        processes.logs()
    )
    return bus


def send_messages(bus: Bus, processes: Processes, exe: Path, tmp_path: Path) -> None:
    """A node sends MESSAGES commands over SoupBinTCP and checks it sees them sequenced."""
    node = processes.start(
        "SEND0",
        [
            str(exe),
            "node",
            str(bus.node_paths["SEND0"]),
            "SEND0",
            "1",
            "0",
            str(MESSAGES),
            str(tmp_path / "SEND0.json"),
        ],
    )
    assert node.wait(timeout=120) == 0, processes.logs()


def test_nasdaq_protocols_client_logs_in_and_receives_the_stream(
    tmp_path: Path, processes: Processes, transport_bus: Path
) -> None:
    soup = pytest.importorskip("nasdaq_protocols.soup")
    bus = start_bus(tmp_path, processes, transport_bus)
    send_messages(bus, processes, transport_bus, tmp_path)

    session = soup.connect(("127.0.0.1", bus.tcp), USER, PASSWORD, "", 1)
    try:
        bodies: list[bytes] = []
        deadline = time.monotonic() + 60
        while len(bodies) < MESSAGES and time.monotonic() < deadline:
            msg = session.receive()
            if isinstance(msg, soup.SequencedData):
                data = bytes(msg.data)
                # envelope (32 bytes) then the body: header, then index u32 and counter u64
                if len(data) == 52 and struct.unpack_from("<H", data, 36)[0] == 99:
                    bodies.append(data)
        assert len(bodies) == MESSAGES
        counters = [struct.unpack_from("<Q", b, 44)[0] for b in bodies]
        assert counters == list(range(MESSAGES))
        accounts = {b[16:24].rstrip(b"\0") for b in bodies}
        assert accounts == {b"SEND0"}
    finally:
        session.logout()
        session.close()

    with pytest.raises(ConnectionRefusedError):
        soup.connect(("127.0.0.1", bus.tcp), USER, "wrong", "", 1)
    with pytest.raises(ConnectionRefusedError):
        soup.connect(("127.0.0.1", bus.tcp), USER, PASSWORD, "NOSUCH", 1)
    log = processes.log("sequencer")
    assert "login rejected: not authorized" in log
    assert "wrong" not in log


@pytest.mark.tshark
def test_tshark_decodes_the_tcp_stream_as_soupbintcp(
    tmp_path: Path, processes: Processes, transport_bus: Path
) -> None:
    tshark = tshark_path()
    if tshark is None:
        pytest.skip("tshark is not installed (make system-deps installs it as root on Debian)")
    # No clock ticks: an idle stream, so that heartbeats flow.
    bus = write_config(tmp_path, "tcp", session="SOUPTEST", clock_tick_ms=0)
    capture = tmp_path / "tcp.pcapng"
    cap = processes.start(
        "tshark", [tshark, "-i", "lo", "-f", f"tcp port {bus.tcp}", "-w", str(capture), "-q"]
    )
    assert wait_for(lambda: "Capturing on" in processes.log("tshark") or cap.poll() is not None, 60)
    assert cap.poll() is None, processes.log("tshark")
    # "Capturing on" can come before packets are written (seen under load: the sending node's
    # session was missing from the capture): knock on the port, nothing listens yet, until the
    # capture file grows, so the session below is captured from its first packet.
    assert capture_written(capture, _knock(bus.tcp)), processes.log("tshark")
    processes.start("sequencer", [str(transport_bus), "sequencer", str(bus.path)])
    assert wait_for(lambda: tcp_listening(bus.tcp) and udp_bound(bus.upstream), 20), (
        processes.logs()
    )
    send_messages(bus, processes, transport_bus, tmp_path)
    # An idle logged-in client: the server heartbeats it after 1 s, it heartbeats back.
    with socket.create_connection(("127.0.0.1", bus.tcp), timeout=5) as s:
        s.sendall(login(0))
        assert s.recv(33)[:3] == b"\x00\x1fA"
        time.sleep(1.3)
        s.sendall(b"\x00\x01R")
        assert b"\x00\x01H" in s.recv(100)
        s.sendall(b"\x00\x01O")
    # the session's last packets (R, H, O) are in the file once a knock after them is
    assert capture_written(capture, _knock(bus.tcp)), processes.log("tshark")
    processes.kill(cap, 2)
    cap.wait(timeout=10)

    fields = subprocess.run(
        [
            tshark,
            "-r",
            str(capture),
            "-d",
            f"tcp.port=={bus.tcp},soupbintcp",
            "-T",
            "fields",
            "-E",
            "separator=|",
            "-E",
            "occurrence=a",
            "-e",
            "soupbintcp.packet_type",
            "-e",
            "_ws.malformed",
            "-e",
            "soupbintcp.req_seq_num.invalid",
            "-e",
            "soupbintcp.next_seq_num.invalid",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout.splitlines()
    types: dict[str, int] = {}
    for line in fields:
        kinds, malformed, bad_req, bad_next = line.split("|")
        assert not malformed and not bad_req and not bad_next, line
        for k in filter(None, kinds.split(",")):
            k = k.strip("'")
            types[k] = types.get(k, 0) + 1
    assert types.get("L") and types.get("A"), types
    assert types.get("S", 0) >= MESSAGES, types
    assert types.get("U", 0) >= 1, types
    assert types.get("H", 0) >= 1 and types.get("R", 0) >= 1, types
    assert read_reports_ok(tmp_path)


def _knock(port: int) -> Callable[[], None]:
    """A connection to ``port`` (refused while nothing listens: a SYN and a RST), which the
    capture filter takes."""

    def knock() -> None:
        with contextlib.suppress(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()

    return knock


def login(sequence: int) -> bytes:
    """A login request, numeric field right-justified."""
    return (
        b"\x00\x2fL"
        + USER.ljust(6).encode()
        + PASSWORD.ljust(10).encode()
        + b" " * 10
        + str(sequence).rjust(20).encode()
    )


def read_reports_ok(tmp_path: Path) -> bool:
    r = (tmp_path / "SEND0.json").read_text()
    return '"error"' not in r


def test_malformed_logins_are_refused_and_the_server_carries_on(
    tmp_path: Path, processes: Processes, transport_bus: Path
) -> None:
    bus = start_bus(tmp_path, processes, transport_bus)
    good = login(0)
    bad = [
        b"\x00\x00",  # zero length
        b"\x00\x05L1234",  # a login of the wrong length
        b"\x00\x2fL" + b"\xff" * 46,  # a login whose sequence is not a number
        b"\x00\x01U",  # data before login
        b"\x00\x03Qxx",  # unknown type
    ]
    for payload in bad:
        with socket.create_connection(("127.0.0.1", bus.tcp), timeout=5) as s:
            s.sendall(payload)
            assert s.recv(100) == b"", payload  # closed, nothing accepted
    with socket.create_connection(("127.0.0.1", bus.tcp), timeout=5) as s:
        s.sendall(good)
        answer = s.recv(33)
        assert answer[:3] == b"\x00\x1fA", answer
        assert answer[3:13] == b"SOUPTEST  "
    log = processes.log("sequencer")
    assert log.count("closed: malformed input") + log.count("closed: protocol error") >= len(bad), (
        log
    )
