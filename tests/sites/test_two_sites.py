"""The exchange across two sites (docs/sites.md). Site A (this test's network namespace) runs
the sequencer, two replayers that follow its multicast and serve SoupBinTCP, the gateway and the
primary matching engine. Site B (a second namespace, joined by a veth pair with nftables loss in
both directions and on site B's own UDP) runs a bridge with one link to each of those replayers,
the matching engine's hot backup and, late, a rewinding engine. Site B's nodes reach only site
B's addresses: its multicast, its bridge (commands, gap fills, rewinds).

The primary engine at A is killed after its checkpoint: the backup at B answers every order from
then on, through the bridge. One of the bridge's two links is killed mid-run. Every order is
answered once, the engines' state hashes agree, and the bridge's journal is the sequencer's,
byte for byte."""

from __future__ import annotations

import json
import re
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, Processes, seqbus_cli
from tests.sites.sitebus import Site, journal_bytes, wait_until
from tests.sites.twosites import A_IP, two_sites

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("multicast")]

ORDERS = 1500


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        data: dict[str, Any] = json.loads(path.read_text())
        return data
    except (OSError, ValueError):
        return None


def test_the_exchange_across_two_sites_with_loss_failover_and_a_lost_link(
    tmp_path: Path, processes: Processes
) -> None:
    with two_sites() as link:
        a = Site(tmp_path, "a", ip=A_IP)
        b = Site(tmp_path, "b")
        link.loss(link_pct=1, site_b_udp_pct=2, site_b_group=b.group_address)
        bus_a = a.bus()
        t1a, _, t1a_tcp = a.follower("t1a")
        t1b, _, t1b_tcp = a.follower("t1b")
        bus_b = b.bridge([f"{A_IP}:{t1a_tcp}", f"{A_IP}:{t1b_tcp}"])
        reports = tmp_path / "reports"
        reports.mkdir()
        env = {
            "EXCHANGE_REPORT_DIR": str(reports),
            "EXCHANGE_ORDERS": str(ORDERS),
            "EXCHANGE_CHECKPOINT_AT": str(ORDERS // 2),
            # at three quarters the gateway keeps two orders in flight until told to go on:
            # the link is killed then, with orders in flight, however fast the run
            "EXCHANGE_HOLD_AT": str(ORDERS * 3 // 4),
            "PYTHONPATH": str(ROOT),
        }
        cli = seqbus_cli()
        at_b = link.in_b()

        def node(name: str, target: str, config: Path, site_b: bool) -> subprocess.Popen[bytes]:
            account, instance = name.split("-")
            cmd = [
                *cli,
                "node",
                f"examples.exchange.demo_nodes:{target}",
                "-c",
                str(config),
                "--rewind",
                "--account",
                account,
                "--instance",
                instance,
                "--path",
                str(ROOT),
            ]
            return processes.start(name, [*(at_b if site_b else []), *cmd], env=env)

        def logs() -> str:
            return processes.logs()

        processes.start("sequencer", [*cli, "sequencer", "-c", str(bus_a)])
        links = {
            name: processes.start(name, [*cli, "replayer", "-c", str(cfg)])
            for name, cfg in (("t1a", t1a), ("t1b", t1b))
        }
        bridge = processes.start("bridge", [*at_b, *cli, "bridge", "-c", str(bus_b)])
        # both links up before the run starts (a connect whose SYN the link's loss dropped is
        # retried after a second; a short run could otherwise end before that link carried
        # anything)
        for name in ("t1a", "t1b"):
            wait_until(
                lambda name=name: "(bridge): logged in" in processes.log(name),
                30,
                f"the bridge's link to {name}",
                logs,
            )
        primary = node("ME-1", "DemoEngine", bus_a, site_b=False)
        node("ME-2", "DemoEngine", bus_b, site_b=True)
        node("GW-1", "DemoGateway", bus_a, site_b=False)

        def answered() -> int:
            p = read_json(reports / "progress")
            return int(p["answered"]) if p else 0

        wait_until(
            lambda: (reports / "ME-1.checkpoint.json").exists(),
            120,
            "the primary's checkpoint",
            logs,
        )
        processes.kill(primary, signal.SIGKILL)  # from now on site B's engine answers
        wait_until(
            lambda: (reports / "ME-2.checkpoint.json").exists(), 60, "the backup's checkpoint", logs
        )
        killed_at = answered()
        wait_until(lambda: (reports / "hold-1").exists(), 120, "answers from site B", logs)
        processes.kill(links["t1a"], signal.SIGKILL)  # one of the bridge's two links
        link_killed_at = answered()
        (reports / "release-1").write_text("go on")
        # a late joiner at site B rewinds from site B's bridge (nothing else is in its reach)
        node("ME-3", "DemoEngine", bus_b, site_b=True)
        wait_until(lambda: (reports / "GW-1.json").exists(), 180, "every order answered", logs)
        for name in ("ME-2", "ME-3"):
            wait_until(
                lambda name=name: (reports / f"{name}.json").exists(), 60, f"{name}'s report", logs
            )
        gw = read_json(reports / "GW-1.json")
        me2, me3 = read_json(reports / "ME-2.json"), read_json(reports / "ME-3.json")
        cp1 = read_json(reports / "ME-1.checkpoint.json")
        cp2 = read_json(reports / "ME-2.checkpoint.json")
        assert gw and me2 and me3 and cp1 and cp2
        # 0 lost: every order answered exactly once (the gateway counts answers per order)
        assert (gw["orders"], gw["answered"], gw["lost"]) == (ORDERS, ORDERS, 0), gw
        assert killed_at < ORDERS and link_killed_at < ORDERS, (killed_at, link_killed_at)
        # the same state at the same point of the stream, at both sites
        assert cp1["state_hash"] == cp2["state_hash"]
        assert cp1["last_sequence"] == cp2["last_sequence"]
        assert me2["state_hash"] == me3["state_hash"]
        assert me2["last_sequence"] == me3["last_sequence"]
        # the late joiner's history came from site B's replayer (the bridge)
        assert me3["bus"]["retransmits"] >= me3["last_sequence"] // 2, me3["bus"]
        # site B's loss was filled at site B
        assert me2["bus"]["gaps"] > 0 and me2["bus"]["retransmits"] > 0, me2["bus"]
        # the bridge's remaining link carried the stream after the other was killed
        wait_until(lambda: "connection lost" in processes.log("bridge"), 10, "the lost link", logs)
        # both links carried the stream at once (redundancy, not a failover): the bridge's
        # counters per link, printed when it stops
        processes.kill(bridge, signal.SIGTERM)
        processes.wait(bridge, 10)
        stats = re.search(
            r"stopped at message (\d+); first copies per link \[(\d+), (\d+)\], "
            r"later copies \[(\d+), (\d+)\], commands sent per link \[(\d+), (\d+)\]",
            processes.log("bridge"),
        )
        assert stats, processes.log("bridge")
        end, first_a, first_b, later_a, later_b, up_a, up_b = map(int, stats.groups())
        # the surviving link took over first copies; the killed one carried the stream too while
        # it lived, and messages came over both (copies after the first); which link brings a
        # message first is a race, so neither is required to win one; site B's commands went
        # out on both
        assert first_b > 0 and first_a + later_a > 0 and later_a + later_b > 0, stats.groups()
        assert up_a > 0 and up_b > 0, stats.groups()
        # 0 lost, 0 duplicated, same order, same bytes: the bridge's journal is the sequencer's
        bridge_journal = journal_bytes(tmp_path / "journal-bridge")
        assert len(bridge_journal) > 100_000
        assert journal_bytes(tmp_path / "journal").startswith(bridge_journal)
        verify = subprocess.run(
            [*cli, "journal", "verify", str(tmp_path / "journal-bridge"), "--json"],
            capture_output=True,
            text=True,
            check=True,
        )
        report = json.loads(verify.stdout)
        assert report["next_sequence"] > me2["last_sequence"], (report, me2)
        # every message of the journal was taken once, from one link or the other
        assert first_a + first_b == end - 1 == report["next_sequence"] - 1, stats.groups()
