"""A command lost on the remote site's LAN is asked for by the bridge (docs/sites.md): the
sequencer's NAKs do not cross a link, so the bridge NAKs the gaps it sees in each account's
commands as they pass. Site B's upstream loses one datagram in 20 on the way to the bridge; a
sender at site B sends a burst of 3,000 commands. Every command is sequenced, the sender was
NAKed (no NAK reached a sender behind a bridge before) and the bridge counts the NAKs it sent."""

from __future__ import annotations

import json
import re
import signal
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, Processes, seqbus_cli
from tests.sites.sitebus import Site, wait_until
from tests.sites.twosites import A_IP, two_sites

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("multicast")]

COMMANDS = 3000


def test_the_bridge_naks_a_gap_in_its_sites_commands(tmp_path: Path, processes: Processes) -> None:
    with two_sites() as link:
        a = Site(tmp_path, "a", ip=A_IP)
        b = Site(tmp_path, "b")
        bus_a = a.bus()
        t1, _, t1_tcp = a.follower("t1")
        bus_b = b.bridge([f"{A_IP}:{t1_tcp}"])
        link.drop_every(b.upstream, 20)
        cli = seqbus_cli()
        processes.start("sequencer", [*cli, "sequencer", "-c", str(bus_a)])
        processes.start("t1", [*cli, "replayer", "-c", str(t1)])
        bridge = processes.start("bridge", [*link.in_b(), *cli, "bridge", "-c", str(bus_b)])
        wait_until(lambda: "(bridge): logged in" in processes.log("t1"), 30, "the link",
                   processes.logs)
        sender = processes.start(
            "sender",
            [*link.in_b(), sys.executable, "-m", "tests.sites.burst_sender", str(bus_b), "S1",
             str(COMMANDS)],
            env={"PYTHONPATH": str(ROOT)},
        )
        assert processes.wait(sender, 150) == 0, processes.logs()
        stats = json.loads(processes.log("sender").strip().splitlines()[-1])
        # all sequenced (the sender saw its 3,000 in the stream), nothing left in flight
        assert (stats["sent"], stats["in_flight"]) == (COMMANDS, 0), stats
        # the loss was asked for by NAK, from the bridge
        assert stats["naks"] > 0, stats
        processes.kill(bridge, signal.SIGTERM)
        processes.wait(bridge, 10)
        naks = re.search(r"NAKs to this site's senders (\d+)", processes.log("bridge"))
        assert naks and int(naks.group(1)) >= stats["naks"], processes.log("bridge")
