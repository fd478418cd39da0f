"""The SDK's end-to-end test (tests/e2e: Python nodes, `seqbus` CLI) on the other transports:
the sequencer and three Python nodes (two senders and a listener, all rewinding from the
start) over SoupBinTCP, shared memory (written by the sequencer, or by a dispatcher reading
SoupBinTCP) and UDP unicast. The node code and the command lines are the same; only the
configuration file differs. Every node must deliver the same stream (equal hashes), each
sender's Pings once and in order.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from tests.conftest import ROOT, Processes, seqbus_cli
from tests.transports.harness import NODES, tcp_listening, udp_bound, wait_for, write_config

pytestmark = [pytest.mark.slow]

TOTAL = int(os.environ.get("SEQBUS_E2E_MESSAGES", "100000"))
TARGETS = {
    "LISTEN": ("tests.e2e.stream_nodes:Listener", -1),
    "SEND0": ("tests.e2e.stream_nodes:Sender", 0),
    "SEND1": ("tests.e2e.stream_nodes:Sender", 1),
}


@pytest.mark.parametrize("transport", ["tcp", "shm", "shm-via-tcp", "udp-unicast"])
def test_python_nodes_see_the_same_stream(
    transport: str, tmp_path: Path, processes: Processes, transport_bus: Path
) -> None:
    bus = write_config(tmp_path, transport)
    cli = seqbus_cli()
    seq = processes.start("sequencer", [*cli, "sequencer", "-c", str(bus.path)])

    def ready() -> bool:
        listening = tcp_listening(bus.tcp) if "tcp" in transport else True
        return listening and udp_bound(bus.upstream)

    assert wait_for(ready, 30) and seq.poll() is None, processes.logs()
    if transport == "shm-via-tcp":
        processes.start("dispatcher", [*cli, "dispatcher", "-c", str(bus.path)])
    if transport.startswith("shm"):
        assert wait_for(bus.ring.exists, 20), processes.logs()

    share = TOTAL // 2
    release = tmp_path / "release"
    procs = {}
    for account in NODES:
        target, index = TARGETS[account]
        env = {
            "SEQBUS_E2E_TOTAL": str(share * 2),
            "SEQBUS_E2E_SHARE": str(share),
            "SEQBUS_E2E_OUT": str(tmp_path / f"{account}.json"),
            "SEQBUS_E2E_INDEX": str(index),
            "SEQBUS_E2E_RELEASE": str(release),
        }
        procs[account] = processes.start(
            account,
            [
                *cli,
                "node",
                target,
                "-c",
                str(bus.node_paths[account]),
                "--account",
                account,
                "--path",
                str(ROOT),
                "--rewind",
            ],
            env=env,
        )
    deadline = time.monotonic() + 60
    while not all(f"{a}: opened" in processes.log(a) for a in NODES):
        for account, proc in procs.items():
            assert proc.poll() is None, f"{account} exited early\n{processes.logs()}"
        assert time.monotonic() < deadline, f"the nodes did not open\n{processes.logs()}"
        time.sleep(0.05)
    release.write_text("go")
    for account, proc in procs.items():
        try:
            code = proc.wait(timeout=600)
        except Exception:
            pytest.fail(f"{account} did not finish in time\n{processes.logs()}")
        assert code == 0, f"{account} exited with {code}\n{processes.logs()}"

    reports = {a: json.loads((tmp_path / f"{a}.json").read_text()) for a in NODES}
    for account, report in reports.items():
        assert report["seen"] == share * 2, (account, report)
        assert report["order_violations"] == 0, (account, report)
        assert report["out_of_order_per_sender"] == 0, (account, report)
        assert report["per_sender"] == {"0": share, "1": share}, (account, report)
    assert len({r["hash"] for r in reports.values()}) == 1, reports
