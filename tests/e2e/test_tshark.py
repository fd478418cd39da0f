"""tshark, forced to read our downstream port as MoldUDP64, decodes a capture of the bus.

Zero malformed packets, and the captured packets' sequence ranges are contiguous from 1.
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, Processes, capture_written, free_udp_port, seqbus_cli, tshark_path
from tests.e2e.busconfig import wait_udp_bound, write_bus_config

pytestmark = [pytest.mark.slow, pytest.mark.tshark, pytest.mark.usefixtures("multicast")]

MESSAGES = 4000


def test_tshark_decodes_the_downstream_as_moldudp64(tmp_path: Path, processes: Processes) -> None:
    tshark = tshark_path()
    if tshark is None:
        pytest.skip("tshark is not installed (make system-deps installs it as root on Debian)")
    bus = write_bus_config(tmp_path)
    capture = tmp_path / "downstream.pcapng"
    # a port the capture also takes, for knocks that show how far it has written
    knock_port = free_udp_port()
    cap = processes.start(
        "tshark",
        [tshark, "-i", "lo", "-f", f"udp dst port {bus.downstream} or udp dst port {knock_port}",
         "-w", str(capture), "-q"],
    )

    def knock() -> None:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.sendto(b"knock", ("127.0.0.1", knock_port))

    deadline = time.monotonic() + 60
    while "Capturing on" not in processes.log("tshark"):
        assert cap.poll() is None, f"tshark exited:\n{processes.log('tshark')}"
        assert time.monotonic() < deadline, f"tshark did not start:\n{processes.log('tshark')}"
        time.sleep(0.05)
    # "Capturing on" can come before packets are written: the sequencer's first packet
    # (sequence 1) must be in the capture
    assert capture_written(capture, knock), processes.log("tshark")

    cli = seqbus_cli()
    sequencer = processes.start("sequencer", [*cli, "sequencer", "-c", str(bus.path)])
    assert wait_udp_bound(bus.upstream, 30.0) and sequencer.poll() is None, processes.logs()
    env = {
        "SEQBUS_E2E_TOTAL": str(MESSAGES),
        "SEQBUS_E2E_SHARE": str(MESSAGES),
        "SEQBUS_E2E_OUT": str(tmp_path / "sender.json"),
        "SEQBUS_E2E_INDEX": "0",
    }
    node = processes.start(
        "sender",
        [*cli, "node", "tests.e2e.stream_nodes:Sender", "-c", str(bus.path),
         "--account", "SEND0", "--path", str(ROOT)],
        env=env,
    )
    assert node.wait(timeout=120) == 0, processes.logs()
    # every packet the node saw is in the file once a knock after them is
    assert capture_written(capture, knock), processes.log("tshark")
    processes.kill(cap, 2)  # SIGINT: tshark flushes and closes the file
    cap.wait(timeout=10)

    fields = subprocess.run(
        [tshark, "-r", str(capture), "-Y", f"udp.dstport=={bus.downstream}",
         "-d", f"udp.port=={bus.downstream},moldudp64",
         "-T", "fields", "-E", "separator=,", "-e", "moldudp64.session",
         "-e", "moldudp64.sequence", "-e", "moldudp64.count", "-e", "_ws.malformed",
         "-e", "_ws.expert.severity"],
        capture_output=True, text=True, timeout=60, check=True,
    ).stdout.splitlines()
    assert fields, "the capture holds no packet"
    malformed = [line for line in fields if line.split(",")[3]]
    assert not malformed, malformed[:5]
    next_seq = None
    messages = 0
    for line in fields:
        session, seq, count = line.split(",")[:3]
        assert session.strip(), line
        seq_i, count_i = int(seq), int(count)
        if count_i == 0xFFFF:  # end of session
            continue
        if count_i == 0:  # heartbeat: announces the next sequence number
            assert next_seq is None or seq_i == next_seq, (line, next_seq)
            continue
        if next_seq is None:
            assert seq_i == 1, f"the capture starts at sequence {seq_i}"
            next_seq = 1
        assert seq_i == next_seq, f"gap or repeat: packet starts at {seq_i}, expected {next_seq}"
        next_seq = seq_i + count_i
        messages += count_i
    report = json.loads((tmp_path / "sender.json").read_text())
    assert report["seen"] == MESSAGES
    assert messages >= MESSAGES, (messages, MESSAGES)
