"""What a rewind costs (docs/transports.md, "Gap fill and rewind"): a late joiner whose
application is slow — each batch takes 20 ms to handle, far longer than the replayer's round
trip — rewinds the session from the sequencer's replayer while the live stream goes on. The
answers that arrive while it is away are read before a request can time out, and a timeout asks
again with a one-message probe, so it receives each message about once: at most 1.1 times the
messages it walks, where asking again for whole requests received much of the history twice."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from examples.pingpong.messages import Ping

from seqbus._core import NodeClient
from seqbus.errors import BackPressureError
from tests.conftest import Processes, seqbus_cli
from tests.transports.harness import udp_bound, wait_for, write_config

pytestmark = [pytest.mark.slow]

HISTORY = 30_000  # Pings sequenced before the late joiner starts
DURING = 3_000  # and while it rewinds


def send(sender: NodeClient, first: int, n: int, deadline: float) -> None:
    """Sends Pings first..first+n, polling while the window is full."""
    i = first
    while i < first + n:
        assert time.monotonic() < deadline, f"sent {i - first} of {n}"
        try:
            sender.send(bytes(Ping(id=i, sent_at_ns=i).encode()))
            i += 1
        except BackPressureError:
            sender.poll(4096, 0.01)


def test_a_slow_late_joiner_receives_each_message_about_once(
    tmp_path: Path, processes: Processes
) -> None:
    bus = write_config(tmp_path, "udp-unicast")
    seq = processes.start("sequencer", [*seqbus_cli(), "sequencer", "-c", str(bus.path)])
    assert wait_for(lambda: udp_bound(bus.upstream), 30) and seq.poll() is None, processes.logs()

    sender = NodeClient(str(bus.node_paths["SEND0"]), "SEND0", start="live")
    deadline = time.monotonic() + 120
    while not sender.is_ready():
        assert time.monotonic() < deadline, f"the sender never became ready\n{processes.logs()}"
        sender.poll(1024, 0.05)
    send(sender, 1, HISTORY, deadline)
    while sender.stats()["in_flight"] > 0:  # every Ping sequenced
        assert time.monotonic() < deadline, f"{sender.stats()}\n{processes.logs()}"
        sender.poll(4096, 0.05)

    late = NodeClient(str(bus.node_paths["LISTEN"]), "LISTEN", start="rewind")
    sent = 0
    batches = 0
    while True:
        assert time.monotonic() < deadline, f"{late.stats()}\n{processes.logs()}"
        if sent < DURING:  # the live stream goes on while it rewinds
            send(sender, HISTORY + 1 + sent, 300, deadline)
            sent += 300
        sender.poll(4096, 0)
        if late.poll(2000, 0.05):
            batches += 1
            time.sleep(0.02)  # the application handling the batch
        st = late.stats()
        walked = st["delivered"] + st["filtered"]
        if sent >= DURING and not late.is_rewinding() and st["delivered"] >= HISTORY + DURING:
            break
    st = late.stats()
    walked = st["delivered"] + st["filtered"]
    print(f"late joiner: {batches} batches, {st['received'] / walked:.3f}x, {st}")
    assert batches >= 10, st  # the rewind did take many slow batches
    assert st["received"] <= 1.1 * walked, (st["received"] / walked, st)
    assert st["duplicates"] <= 0.05 * walked, st
    late.close()
    sender.close()
