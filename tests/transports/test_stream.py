"""One end-to-end test over every transport: a sequencer (with its replayer), three node
processes (two senders and a listener, all reading from sequence 1) and 100,000 messages.
Every node must see the same stream (equal hashes) with each sender's commands exactly once
and in order. The in-process transport runs the same nodes as threads of one process.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import Processes, multicast_unavailable_reason
from tests.transports.harness import (
    NODES,
    read_reports,
    tcp_listening,
    udp_bound,
    wait_for,
    write_config,
)

pytestmark = [pytest.mark.slow]

TOTAL = int(os.environ.get("SEQBUS_E2E_MESSAGES", "100000"))
SHARE = TOTAL // 2

TRANSPORTS = [
    "udp-multicast",
    "udp-unicast",
    "tcp",
    "shm",
    "shm-via-tcp",
    "shm-via-multicast",
    "memory",
    # the sequencer's receive, loop and publish threads (sequencer.pipeline = "on"; with tcp
    # publishing stays on the loop, which serves the SoupBinTCP clients)
    "udp-unicast+pipelined",
    "shm+pipelined",
    "tcp+pipelined",
]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_every_node_sees_the_same_stream(
    transport: str, tmp_path: Path, processes: Processes, transport_bus: Path
) -> None:
    if "multicast" in transport and (reason := multicast_unavailable_reason()) is not None:
        pytest.skip(reason)
    transport, _, mode = transport.partition("+")
    bus = write_config(tmp_path, transport, pipeline="on" if mode == "pipelined" else "auto")
    exe = str(transport_bus)
    if transport == "memory":
        proc = processes.start("inproc", [exe, "inproc", str(bus.path), str(SHARE), str(tmp_path)])
        assert proc.wait(timeout=600) == 0, processes.logs()
    else:
        seq = processes.start("sequencer", [exe, "sequencer", str(bus.path)])

        def ready() -> bool:
            listening = tcp_listening(bus.tcp) if "tcp" in transport else True
            return listening and udp_bound(bus.upstream)

        assert wait_for(ready, 20), processes.logs()
        assert seq.poll() is None, processes.logs()
        if transport.startswith("shm-via"):
            processes.start("dispatcher", [exe, "dispatcher", str(bus.path)])
            assert wait_for(bus.ring.exists, 20), processes.logs()
        elif transport == "shm":
            assert wait_for(bus.ring.exists, 20), processes.logs()
        procs = {}
        for index, name in enumerate(NODES):
            sender = index - 1  # LISTEN: -1 (sends nothing), SEND0: 0, SEND1: 1
            procs[name] = processes.start(
                name,
                [
                    exe,
                    "node",
                    str(bus.node_paths[name]),
                    name,
                    "2",
                    str(sender),
                    str(SHARE),
                    str(tmp_path / f"{name}.json"),
                ],
            )
        for name, proc in procs.items():
            assert proc.wait(timeout=600) == 0, f"{name} failed\n{processes.logs()}"
        assert seq.poll() is None, f"the sequencer died\n{processes.logs()}"
        if mode == "pipelined":
            assert "sequencer: pipelined" in processes.log("sequencer"), processes.logs()
    reports = read_reports(tmp_path)
    for name, r in reports.items():
        assert "error" not in r, (name, r)
        assert r["messages"] == 2 * SHARE, (name, r)
    assert len({r["hash"] for r in reports.values()}) == 1, reports
    assert len({(r["first"], r["last"]) for r in reports.values()}) == 1, reports
