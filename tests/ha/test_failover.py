"""A cluster of three sequencer processes over real UDP multicast in a private network
namespace, with loss injected by nftables: the leader is killed with SIGKILL again and again
under load, stopped with SIGSTOP past the election timeout (split brain), and the nodes must
see one stream, every command exactly once and in order (docs/ha.md)."""

from __future__ import annotations

import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import Processes
from tests.ha.cluster import Cluster, Stream, pump, write_cluster

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("multicast")]


def nft(*args: str) -> bool:
    if shutil.which("nft") is None:
        return False
    return subprocess.run(["nft", *args], capture_output=True, check=False).returncode == 0


@pytest.fixture
def udp_loss_5pct() -> object:
    """5% of every UDP datagram in the namespace dropped (downstream, upstream, replayer and
    sequencer-to-sequencer traffic alike)."""
    if not nft("add", "table", "inet", "haloss"):
        pytest.skip("nftables is not available (scripts/system-deps.sh installs it as root)")
    try:
        assert nft("add", "chain", "inet", "haloss", "in", "{ type filter hook input priority 0; }")
        assert nft(
            "add",
            "rule",
            "inet",
            "haloss",
            "in",
            "meta",
            "l4proto",
            "udp",
            "numgen",
            "random",
            "mod",
            "100",
            "<",
            "5",
            "drop",
        )
        yield None
    finally:
        nft("delete", "table", "inet", "haloss")


def check_streams(readers: list[Stream], tags: dict[str, int]) -> None:
    """One stream everywhere; every tagged command exactly once, in the order sent."""
    first = readers[0].messages()
    for r in readers[1:]:
        assert r.messages() == first, f"{r.account}'s stream differs"
    seqs = [s for s, _ in first]
    assert seqs == sorted(set(seqs)), "sequence numbers repeat or go back"
    for r in readers:
        for tag, n in tags.items():
            assert r.from_tag(tag) == list(range(n)), f"{r.account}: {tag}'s commands"


def kill_leaders_under_load(
    cluster: Cluster, rounds: int, per_round: int
) -> tuple[list[Stream], Stream, list[float]]:
    """Two senders and a reader; each round, the leader is killed while commands are in
    flight, and started again as a standby once another leads. Returns the senders, the
    reader (every command of every round delivered to all three) and each takeover's time
    (kill → a status reports the new leader)."""
    for m in cluster.members:
        cluster.start(m)
    cluster.leader()
    senders = [Stream(cluster, "S1"), Stream(cluster, "S2")]
    reader = Stream(cluster, "R1")
    nodes = [*senders, reader]
    takeovers = []
    for k in range(rounds):
        leader = cluster.leader()
        target = per_round * (k + 1)
        half = target - per_round // 2
        # load, then the leader is killed while commands are in flight
        pump(
            nodes,
            lambda: all(s.send_upto(half) or s.sent >= half for s in senders),
            30,
            f"round {k}: sending",
            cluster,
        )
        cluster.kill(leader)
        killed = time.monotonic()
        new = cluster.leader(exclude=leader)
        takeovers.append(time.monotonic() - killed)
        cluster.start(leader)  # back as a standby
        pump(
            nodes,
            lambda: all(s.send_upto(target) or s.sent >= target for s in senders)
            and all(
                len(n.from_tag("S1")) >= target and len(n.from_tag("S2")) >= target for n in nodes
            ),
            60,
            f"round {k}: everything after the takeover by {new}",
            cluster,
        )
    return senders, reader, takeovers


def test_twenty_leader_kills_under_load_with_5pct_loss(
    tmp_path: Path, processes: Processes, udp_loss_5pct: object
) -> None:
    cluster = write_cluster(tmp_path, processes)
    per_round = 150
    senders, reader, takeovers = kill_leaders_under_load(cluster, 20, per_round)
    late = Stream(cluster, "LATE")
    pump(
        [*senders, reader, late],
        lambda: late.caught_up and len(late.messages()) >= len(reader.messages()),
        60,
        "the late joiner rewinds",
        cluster,
    )
    total = per_round * 20
    check_streams([*senders, reader, late], {"S1": total, "S2": total})
    stats = reader.client.stats()
    assert stats["leader_changes"] >= 20 and stats["gaps"] > 0, stats
    takeovers.sort()
    print(
        f"takeover seen by the test (kill → a status reports the new leader): "
        f"p50 {takeovers[10] * 1e3:.0f} ms, max {takeovers[-1] * 1e3:.0f} ms; reader {stats}"
    )


def three_leader_kills_lose_nothing(tmp_path: Path, processes: Processes, sequencer: str) -> Cluster:
    """A cluster whose members have ``sequencer`` in their ``[sequencer]``: three rounds of
    300 commands per sender, the leader killed in each; every command exactly once, in order,
    on every node. Returns the cluster, still running."""
    cluster = write_cluster(tmp_path, processes, sequencer=sequencer)
    per_round, rounds = 300, 3
    senders, reader, _ = kill_leaders_under_load(cluster, rounds, per_round)
    total = per_round * rounds
    check_streams([*senders, reader], {"S1": total, "S2": total})
    assert reader.client.stats()["leader_changes"] >= rounds
    return cluster


def test_a_pipelined_cluster_loses_nothing_across_leader_kills(
    tmp_path: Path, processes: Processes
) -> None:
    """``sequencer.pipeline = "on"`` (receive, loop, peers and publish threads) on every
    member: a leader killed with packets handed to its publish thread and commands still in
    its receive thread's batches loses nothing that was published, and the stream is one."""
    cluster = three_leader_kills_lose_nothing(tmp_path, processes, 'pipeline = "on"')
    # every member ran the stage threads (the first lines of its first start say so)
    for m in cluster.members:
        first = processes.log(f"seq{m}-1")
        assert 'pipelined (sequencer.pipeline = "on")' in first, first


def test_a_cluster_syncing_each_batch_loses_nothing_across_leader_kills(
    tmp_path: Path, processes: Processes
) -> None:
    """``sequencer.fsync = "batch"`` on every member: each batch is synced before it counts as
    durable, on the journal's sync thread while the loop goes on. A leader killed while syncs
    are running loses nothing that was published, standbys acknowledge only what their syncs
    completed, and the stream is one."""
    cluster = three_leader_kills_lose_nothing(tmp_path, processes, 'fsync = "batch"')
    # the syncs ran on each running member's sync thread (counted from its last start: the
    # member started last counts those of its catch-up, which may still be running)
    deadline = time.monotonic() + 20
    while True:
        _, statuses = cluster.settled()
        syncs = {m: s["counters"]["journal_syncs"] for m, s in statuses.items()}
        if all(n > 0 for n in syncs.values()):
            break
        assert time.monotonic() < deadline, f"syncs on each member's sync thread: {syncs}"
        time.sleep(0.05)


def forge_from(address: tuple[str, int], group: tuple[str, int], session: str, seq: int) -> None:
    """A MoldUDP64 packet with a message of our own under ``seq``, sent from ``address`` (a
    dead sequencer's publish address): what a deposed leader could still send."""
    envelope = b"\0" * 8 + (1).to_bytes(8, "little") + b"FORGED\0\0" + (1).to_bytes(2, "little")
    envelope += bytes([1, 0]) + (24).to_bytes(4, "little")
    message = envelope + b"\x10\x00\x01\x00\x09\x00\x01\x00" + b"FORGED\0\0" + b"\0" * 8
    packet = session.encode().ljust(10) + seq.to_bytes(8, "big") + (1).to_bytes(2, "big")
    packet += len(message).to_bytes(2, "big") + message
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton("127.0.0.1"))
        s.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 1)
        s.bind(address)
        for _ in range(3):
            s.sendto(packet, group)


def test_split_brain_a_stopped_leader_that_resumes_is_fenced(
    tmp_path: Path, processes: Processes
) -> None:
    # an election timeout well above the loaded host's pauses: the member stopped below is
    # the leader of the term read just before (the default 40 ms can bring an election
    # nobody caused in between)
    cluster = write_cluster(tmp_path, processes, election_timeout_ms=250)
    for m in cluster.members:
        cluster.start(m)
    sender, reader = Stream(cluster, "S1"), Stream(cluster, "R1")
    nodes = [sender, reader]
    pump(
        nodes,
        lambda: sender.send_upto(300) is None and all(len(x.from_tag("S1")) >= 300 for x in nodes),
        30,
        "before",
        cluster,
    )
    old, statuses = cluster.settled()
    term_before = statuses[old]["cluster"]["term"]
    cluster.kill(old, signal.SIGSTOP)
    new = cluster.leader(exclude=old)
    pump(
        nodes,
        lambda: sender.send_upto(600) is None and all(len(x.from_tag("S1")) >= 600 for x in nodes),
        30,
        "after the takeover",
        cluster,
    )
    cluster.kill(old, signal.SIGCONT)
    pump(
        nodes,
        lambda: sender.send_upto(900) is None and all(len(x.from_tag("S1")) >= 900 for x in nodes),
        30,
        "after the old leader resumed",
        cluster,
    )
    deadline = time.monotonic() + 20
    while True:
        s = cluster.status(old)
        c = (s or {}).get("cluster") or {}
        if c.get("role") == "follower" and c.get("leader") == new:
            break
        assert time.monotonic() < deadline, f"the old leader did not follow: {s}"
        time.sleep(0.05)
    assert c["term"] > term_before
    # what only a deposed leader could still send, from a dead member's publish address: a
    # message of its own under the next sequence number
    third = next(m for m in cluster.members if m not in (old, new))
    cluster.kill(third)
    nxt = cluster.status_of(new)["counters"]["next_sequence"]
    fenced = reader.client.stats()["fenced"]
    forge_from(
        ("127.0.0.1", cluster.members[third].publish),
        ("239.7.7.8", cluster.group),
        "HA00000001",
        nxt,
    )
    cluster.start(third)
    pump(
        nodes,
        lambda: sender.send_upto(1200) is None
        and all(len(x.from_tag("S1")) >= 1200 for x in nodes),
        30,
        "after the forged packet",
        cluster,
    )
    assert reader.client.stats()["fenced"] > fenced
    for n in nodes:
        assert all(b"FORGED" not in data for _, data in n.messages())
    check_streams(nodes, {"S1": 1200})
    assert "stopped leading" in cluster.log(old), cluster.log(old)
