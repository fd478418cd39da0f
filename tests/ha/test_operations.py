"""Operating a cluster of sequencers (docs/ha.md): status and metrics name each member's role,
term, lag and last takeover; a planned switchover hands over with nothing lost; a leader that
loses its standbys stops; replayers are found without a static list."""

from __future__ import annotations

import json
import socket
import struct
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from seqbus.status import EXIT_SOME_UNREACHABLE
from tests.conftest import Processes, free_udp_port, seqbus_cli
from tests.ha.cluster import Cluster, Stream, pump, settled_leader, write_cluster
from tests.ha.test_failover import check_streams

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("multicast")]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*seqbus_cli(), *args], capture_output=True, text=True, timeout=60, check=False
    )


def _settled_status(cluster: Cluster) -> tuple[int, dict[str, Any]]:
    """`seqbus admin status --json` once it shows one leader and two followers in its term
    (bounded: an election on a loaded host moves the leadership between two reads)."""
    doc: dict[str, Any] = {}
    for _ in range(50):
        out = _cli("admin", "status", "-c", str(cluster.path), "--json")
        assert out.returncode == 0, out.stderr
        doc = json.loads(out.stdout)
        leader = settled_leader({m: doc[str(m)]["cluster"] for m in cluster.members})
        if leader is not None:
            return leader, doc
        time.sleep(0.05)
    raise AssertionError(f"status never showed one leader and two followers: {doc}")


def test_status_metrics_and_a_planned_switchover(tmp_path: Path, processes: Processes) -> None:
    # who leads is asserted below: a longer election timeout than the default keeps a loaded
    # host from electing anew between two reads (the failover tests keep the default)
    cluster = write_cluster(tmp_path, processes, election_timeout_ms=250)
    for m in cluster.members:
        cluster.start(m)
    cluster.settled()
    sender, reader = Stream(cluster, "S1"), Stream(cluster, "R1")
    nodes = [sender, reader]
    pump(
        nodes,
        lambda: sender.send_upto(500) is None and all(len(n.from_tag("S1")) >= 500 for n in nodes),
        30,
        "a stream",
        cluster,
    )

    leader, doc = _settled_status(cluster)
    lead = doc[str(leader)]["cluster"]
    assert lead["term"] >= 1 and lead["last_takeover_ns"] and lead["takeovers"] >= 1
    assert {s["id"] for s in lead["standbys"]} == set(cluster.members) - {leader}
    assert all(s["lag"] >= 0 for s in lead["standbys"])
    readable = _cli("admin", "status", "-c", str(cluster.path))
    assert readable.returncode == 0 and f"member {leader}: leader" in readable.stdout
    metrics = _cli("admin", "status", "-c", str(cluster.path), "--metrics")
    assert metrics.returncode == 0, metrics.stderr
    for m in cluster.members:  # every member's, each after a line naming it
        assert f"# sequencer {m}: http://" in metrics.stdout, metrics.stdout
    assert metrics.stdout.count("# TYPE seqbus_sequencer_cluster_term gauge") == 3
    assert "seqbus_sequencer_cluster_replication_lag_max{" in metrics.stdout
    for m in set(cluster.members) - {leader}:  # the leader's lag of each standby
        assert f'seqbus_sequencer_cluster_replication_lag{{session="HA00000001",standby="{m}"}}' \
            in metrics.stdout, metrics.stdout

    # a planned switchover to a given member, under a stream
    target = next(m for m in cluster.members if m != leader)
    moved = _cli("admin", "switchover", "-c", str(cluster.path), "--to", str(target), "--json")
    assert moved.returncode == 0, moved.stderr + cluster.processes.logs()
    result = json.loads(moved.stdout)
    assert (result["from"], result["to"]) == (leader, target)
    pump(
        nodes,
        lambda: sender.send_upto(1000) is None
        and all(len(n.from_tag("S1")) >= 1000 for n in nodes),
        30,
        "after the switchover",
        cluster,
    )
    assert cluster.settled()[0] == target
    check_streams(nodes, {"S1": 1000})
    assert reader.client.stats()["leader_changes"] >= 1
    # a switchover to no member is refused, naming why
    bad = _cli("admin", "switchover", "-c", str(cluster.path), "--to", "9")
    assert bad.returncode == 1 and "not another member" in bad.stderr, bad.stderr


def test_a_leader_that_loses_its_standbys_stops_and_the_bus_resumes(
    tmp_path: Path, processes: Processes
) -> None:
    cluster = write_cluster(tmp_path, processes, election_timeout_ms=250)
    for m in cluster.members:
        cluster.start(m)
    sender, reader = Stream(cluster, "S1"), Stream(cluster, "R1")
    nodes = [sender, reader]
    pump(
        nodes,
        lambda: sender.send_upto(200) is None and all(len(n.from_tag("S1")) >= 200 for n in nodes),
        30,
        "a stream",
        cluster,
    )
    leader, _ = cluster.settled()
    standbys = [m for m in cluster.members if m != leader]
    for m in standbys:
        cluster.kill(m)
    deadline = time.monotonic() + 20
    # (a status that does not come in time is no answer: only a role read ends the wait)
    while (cluster.status_of(leader)).get("cluster", {}).get("role") == "leader":
        sender.send_upto(400)
        for n in nodes:
            n.poll()
        assert time.monotonic() < deadline, "the leader kept leading without a majority"
    # the line is logged before the role is published
    assert "no majority heard" in cluster.log(leader)
    # some members answer, some do not: said, with an exit status of its own
    partial = _cli("admin", "status", "-c", str(cluster.path))
    assert partial.returncode == EXIT_SOME_UNREACHABLE, partial.stderr
    assert f"member {leader}:" in partial.stdout
    assert all(f"sequencer {m}: " in partial.stdout for m in standbys), partial.stdout
    stuck = len(reader.from_tag("S1"))
    for _ in range(50):  # nothing is published without a majority
        for n in nodes:
            n.poll(0.005)
    assert len(reader.from_tag("S1")) == stuck
    cluster.start(standbys[0])
    pump(
        nodes,
        lambda: sender.send_upto(400) is None and all(len(n.from_tag("S1")) >= 400 for n in nodes),
        60,
        "with a majority again",
        cluster,
    )
    check_streams(nodes, {"S1": 400})


def test_replayers_are_found_without_a_static_list(tmp_path: Path, processes: Processes) -> None:
    """The members run no replayer; one standalone replayer follows the stream and announces
    itself on [discovery]; a late joiner rewinds through it, knowing no replayer address."""
    group = free_udp_port()
    replayer = free_udp_port()
    cluster = write_cluster(
        tmp_path,
        processes,
        extra=(
            f'[discovery]\ngroup = "239.7.7.9:{group}"\ninterval_ms = 50\n\n'
            f'[replayer]\nlisten = "127.0.0.1:{replayer}"\nfollow = true\n'
            f'journal_dir = "{tmp_path / "replayer-journal"}"\n'
        ),
    )
    # no member runs a replayer of its own
    text = cluster.path.read_text()
    for m in cluster.members.values():
        text = text.replace(f'replayer = "127.0.0.1:{m.replayer}", ', "")
    cluster.path.write_text(text)
    # the replayer follows the stream from its first message (it has no source for history)
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as listen:
        listen.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listen.bind(("239.7.7.9", group))
        mreq = struct.pack("4s4s", socket.inet_aton("239.7.7.9"), socket.inet_aton("127.0.0.1"))
        listen.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, mreq)
        listen.settimeout(30)
        processes.start("replayer", [*seqbus_cli(), "replayer", "-c", str(cluster.path)])
        # its first announcement: it has joined the stream's group and runs
        announce = listen.recv(64)
        assert announce[:2] == b"SD" and int.from_bytes(announce[18:20], "little") == replayer
    for m in cluster.members:
        cluster.start(m)
    cluster.leader()
    sender = Stream(cluster, "S1", start="live")
    pump(
        [sender],
        lambda: sender.send_upto(500) is None and len(sender.from_tag("S1")) >= 500,
        30,
        "a stream",
        cluster,
    )
    late = Stream(cluster, "LATE")  # rewinds from 1: every message is history to it
    pump(
        [sender, late],
        lambda: late.caught_up and len(late.from_tag("S1")) >= 500,
        60,
        "a rewind through the announced replayer",
        cluster,
    )
    assert late.from_tag("S1") == list(range(500))
    assert late.client.stats()["retransmits"] >= 500
