"""End to end over real processes and UDP multicast: a sequencer and three Python nodes.

Two nodes send 100,000 Pings in all; every node must deliver the same stream (equal hashes),
each sender's Pings exactly once and in its own order, with nothing missing.
"""

from __future__ import annotations

import json
import random
import socket
import struct
import os
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, Processes, seqbus_cli
from tests.e2e.busconfig import wait_udp_bound, write_bus_config

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("multicast")]

TOTAL = int(os.environ.get("SEQBUS_E2E_MESSAGES", "100000"))


def junk_datagrams() -> list[bytes]:
    """Datagrams no sequencer or node may accept: noise, truncated and lying headers."""
    rng = random.Random(7)
    junk = [bytes(rng.getrandbits(8) for _ in range(rng.randrange(1, 300))) for _ in range(40)]
    session = b"E2E0000001"
    junk += [
        b"",
        session,  # truncated header
        session + struct.pack(">QH", 1, 3) + struct.pack(">H", 500) + b"x",  # block past the end
        session + struct.pack(">QH", 1, 2) + struct.pack(">H", 0),  # fewer blocks than count
    ]
    return [j for j in junk if j]


def test_three_nodes_deliver_the_same_stream(tmp_path: Path, processes: Processes) -> None:
    bus = write_bus_config(tmp_path)
    config = bus.path
    cli = seqbus_cli()
    sequencer = processes.start("sequencer", [*cli, "sequencer", "-c", str(config)])
    if not wait_udp_bound(bus.upstream, 30.0) or sequencer.poll() is not None:
        pytest.fail(f"the sequencer did not start\n{processes.logs()}")

    share = TOTAL // 2
    release = tmp_path / "release"
    go = tmp_path / "go"
    nodes = {
        "LISTEN": ("tests.e2e.stream_nodes:Listener", None),
        "SEND0": ("tests.e2e.stream_nodes:Sender", 0),
        "SEND1": ("tests.e2e.stream_nodes:Sender", 1),
    }
    procs = {}
    for account, (target, index) in nodes.items():
        env = {
            "SEQBUS_E2E_TOTAL": str(share * 2),
            "SEQBUS_E2E_SHARE": str(share),
            "SEQBUS_E2E_OUT": str(tmp_path / f"{account}.json"),
            "SEQBUS_E2E_INDEX": str(index if index is not None else -1),
            "SEQBUS_E2E_RELEASE": str(release),
            # the senders wait for the junk below: it is in every socket before the stream
            "SEQBUS_E2E_GO": str(go),
        }
        procs[account] = processes.start(
            account, [*cli, "node", target, "-c", str(config), "--account", account, "--path", str(ROOT), "--rewind"], env=env
        )

    deadline = time.monotonic() + 30
    while not all(f"{a}: opened" in processes.log(a) for a in nodes):
        for account, proc in procs.items():
            assert proc.poll() is None, f"{account} exited early\n{processes.logs()}"
        assert time.monotonic() < deadline, f"the nodes did not open\n{processes.logs()}"
        time.sleep(0.05)

    # Malformed datagrams to the sequencer and to every node: counted and dropped, never
    # sequenced, never delivered, never a crash.
    junk = junk_datagrams()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton("127.0.0.1"))
        for datagram in junk:
            s.sendto(datagram, ("127.0.0.1", bus.upstream))
            s.sendto(datagram, (bus.group, bus.downstream))
    go.touch()
    release.touch()

    for account, proc in procs.items():
        try:
            code = proc.wait(timeout=240)
        except Exception:
            pytest.fail(f"{account} did not finish in time\n{processes.logs()}")
        assert code == 0, f"{account} exited with {code}\n{processes.logs()}"

    reports = {a: json.loads((tmp_path / f"{a}.json").read_text()) for a in nodes}
    for account, report in reports.items():
        assert report["seen"] == share * 2, (account, report)
        assert report["order_violations"] == 0, (account, report)
        assert report["out_of_order_per_sender"] == 0, (account, report)
        assert report["per_sender"] == {"0": share, "1": share}, (account, report)
        assert report["transport"]["malformed"] >= len(junk), (account, report["transport"])
    hashes = {report["hash"] for report in reports.values()}
    assert len(hashes) == 1, reports
