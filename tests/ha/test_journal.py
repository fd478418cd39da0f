"""A sequencer's journal is never cut where it is damaged, only where a write was cut short;
damage is refused by every reader, named by file and offset, and repaired from a standby's
copy byte for byte. A primary whose journal disk fills stops, and a standby takes over with
nothing lost (docs/ha.md)."""

from __future__ import annotations

import filecmp
import json
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.conftest import Processes, seqbus_cli
from tests.ha.cluster import Cluster, Stream, pump, write_cluster
from tests.ha.test_failover import check_streams

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("multicast")]


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*seqbus_cli(), *args], capture_output=True, text=True, timeout=120, check=False
    )


def _segments(journal: Path) -> list[Path]:
    return sorted(journal.glob("*.seg"))


def _journal(cluster: Cluster, member: int) -> Path:
    return cluster.workdir / f"journal-{member}"


def _run_and_stop(
    tmp_path: Path, processes: Processes, n: int, segment_size: int | None = None
) -> tuple[Cluster, list[Stream]]:
    cluster = write_cluster(tmp_path, processes, segment_size=segment_size)
    for m in cluster.members:
        cluster.start(m)
    cluster.leader()
    sender, reader = Stream(cluster, "S1"), Stream(cluster, "R1")
    pump(
        [sender, reader],
        lambda: sender.send_upto(n) is None and len(reader.from_tag("S1")) >= n,
        60,
        "a session",
        cluster,
    )
    # every member holds everything before they stop
    end = cluster.status_of(cluster.leader())["cluster"]["last_index"]
    deadline = time.monotonic() + 20
    while not all(
        (cluster.status(m) or {}).get("cluster", {}).get("commit_index", 0) >= end
        for m in cluster.members
    ):
        assert time.monotonic() < deadline
        time.sleep(0.02)
    for m in list(cluster.running):
        cluster.kill(m, signal.SIGTERM)
        cluster.running[m].wait(timeout=20)
        del cluster.running[m]
    return cluster, [sender, reader]


def test_damage_is_refused_named_and_repaired_from_a_standby_byte_for_byte(
    tmp_path: Path, processes: Processes
) -> None:
    # small segments: the damage lies in the last of several, and every tool reads them all
    cluster, _ = _run_and_stop(tmp_path, processes, 3000, segment_size=65536)
    ours, peer = _journal(cluster, 1), _journal(cluster, 2)
    assert len(_segments(ours)) > 2 and len(_segments(peer)) > 2
    seg = _segments(ours)[-1]
    good = seg.read_bytes()
    original = tmp_path / "original"
    shutil.copytree(ours, original)
    # 8 bytes flipped in the middle of the segment
    middle = len(good) // 2
    damaged = bytearray(good)
    damaged[middle : middle + 8] = bytes(b ^ 0x5A for b in damaged[middle : middle + 8])
    seg.write_bytes(bytes(damaged))

    # the sequencer refuses to start on it, naming the file and the offset
    seq = cluster.start(1)
    assert seq.wait(timeout=60) != 0
    log = cluster.log(1)
    assert str(seg) in log and "offset" in log and "not a torn write" in log, log
    assert seg.read_bytes() == bytes(damaged), "nothing was cut"
    del cluster.running[1]

    # so do the journal and archive tools
    verify = _run("journal", "verify", str(ours))
    assert verify.returncode == 1 and str(seg) in verify.stderr, verify.stderr
    schema = tmp_path / "tagged.idl"
    schema.write_text(
        "package hatest;\nschema 9 version 1;\nmessage Tagged = 1 { tag: char[8]; n: u64; }\n"
    )
    seal = _run("archive", "seal", str(ours), str(tmp_path / "archive"), "--schema", str(schema))
    assert seal.returncode != 0 and str(seg) in seal.stderr, seal.stderr
    assert not (tmp_path / "archive").exists(), "a refused seal leaves no archive behind"
    assert seg.read_bytes() == bytes(damaged)

    # a replayer refuses to serve it
    replayer_cfg = tmp_path / "replayer.toml"
    replayer_cfg.write_text(
        cluster.path.read_text()
        + f'\n[replayer]\nlisten = "127.0.0.1:{cluster.members[1].replayer}"\n'
        + f'journal_dir = "{ours}"\n'
    )
    replayer = _run("replayer", "-c", str(replayer_cfg))
    assert replayer.returncode == 1 and str(seg) in replayer.stderr, replayer.stderr

    # repair from member 2's copy restores every byte
    repair = _run("journal", "repair", str(ours), "--from", str(peer))
    assert repair.returncode == 0, repair.stderr
    assert seg.with_suffix(".seg.damaged").read_bytes() == bytes(damaged), (
        "the damaged file is kept"
    )
    for a in _segments(original):
        assert filecmp.cmp(a, ours / a.name, shallow=False), a.name
    verified = _run("journal", "verify", str(ours), "--json")
    assert verified.returncode == 0, verified.stderr
    report = json.loads(verified.stdout)
    assert report["segments"] == len(_segments(ours)) and report["messages"] >= 3000, report
    # a segment missing between others is damage, named by the one after the hole
    hole = tmp_path / "hole"
    shutil.copytree(ours, hole, ignore=shutil.ignore_patterns("*.damaged"))
    holed = _segments(hole)
    holed[1].unlink()
    verify = _run("journal", "verify", str(hole))
    assert verify.returncode == 1 and str(holed[2]) in verify.stderr, verify.stderr
    assert "missing" in verify.stderr, verify.stderr
    seal = _run("archive", "seal", str(hole), str(tmp_path / "holed"), "--schema", str(schema))
    assert seal.returncode != 0 and str(holed[2]) in seal.stderr, seal.stderr
    assert "what lies between is missing" in seal.stderr, seal.stderr

    # and the member rejoins the cluster
    for m in cluster.members:
        cluster.start(m)
    cluster.leader()
    deadline = time.monotonic() + 30
    while (cluster.status(1) or {}).get("cluster", {}).get("role") not in ("follower", "leader"):
        assert time.monotonic() < deadline, cluster.log(1)
        time.sleep(0.05)


def test_a_torn_tail_is_cut_and_the_member_catches_up(tmp_path: Path, processes: Processes) -> None:
    cluster, nodes = _run_and_stop(tmp_path, processes, 1000)
    seg = _segments(_journal(cluster, 3))[-1]
    size = seg.stat().st_size
    with open(seg, "r+b") as f:
        f.truncate(size - 7)  # the last record cut short, as by a crash mid-write
    # an archive of it holds every whole record and says what it left out
    schema = tmp_path / "tagged.idl"
    schema.write_text(
        "package hatest;\nschema 9 version 1;\nmessage Tagged = 1 { tag: char[8]; n: u64; }\n"
    )
    whole = json.loads(_run("journal", "verify", "--json", str(seg.parent)).stdout)
    assert whole["torn_tail"] == [str(seg), size - 7 - (size - 7 - whole["torn_tail"][1])]
    seal = _run("archive", "seal", str(seg.parent), str(tmp_path / "a3"), "--schema", str(schema))
    assert seal.returncode == 0, seal.stderr
    assert f"sealed, {whole['messages']} records in" in seal.stdout, seal.stdout
    assert f"torn tail at {seg}:{whole['torn_tail'][1]}" in seal.stderr, seal.stderr
    for m in cluster.members:
        cluster.start(m)
    cluster.leader()
    deadline = time.monotonic() + 30
    while "a write cut short" not in cluster.log(3):
        assert time.monotonic() < deadline, cluster.log(3)
        time.sleep(0.05)
    sender, reader = Stream(cluster, "S2", start="live"), Stream(cluster, "R2")
    pump(
        [sender, reader],
        lambda: sender.send_upto(1000) is None and len(reader.from_tag("S2")) >= 1000,
        60,
        "after the restart",
        cluster,
    )
    check_streams([reader], {"S1": 1000, "S2": 1000})
    # member 3 holds the whole stream again
    end = cluster.status_of(cluster.leader())["cluster"]["last_index"]
    deadline = time.monotonic() + 30
    while (cluster.status(3) or {}).get("cluster", {}).get("last_index", 0) < end:
        assert time.monotonic() < deadline, cluster.log(3)
        time.sleep(0.05)


def test_a_primary_whose_journal_disk_fills_stops_and_a_standby_takes_over(
    tmp_path: Path, processes: Processes
) -> None:
    if (
        shutil.which("unshare") is None
        or subprocess.run(["unshare", "-m", "true"], capture_output=True, check=False).returncode
        != 0
    ):
        pytest.skip("no mount namespace can be made here (unshare -m)")
    small = tmp_path / "small"
    small.mkdir()
    # an election timeout above the loaded host's pauses: member 1 keeps the lead it is given
    cluster = write_cluster(
        tmp_path, processes, journal_dirs={1: small / "journal"}, election_timeout_ms=250
    )
    # member 1's journal on a 512 KiB tmpfs of its own mount namespace
    wrap = [
        "unshare",
        "-m",
        "sh",
        "-c",
        f'mount -t tmpfs -o size=512k tmpfs {small} && exec "$@"',
        "sh",
    ]
    cluster.start(1, wrap=wrap)
    cluster.start(2)
    cluster.start(3)
    if cluster.leader() != 1:
        # hand the leadership to member 1: its disk is the one that fills
        out = _run("admin", "switchover", "-c", str(cluster.path), "--to", "1")
        assert out.returncode == 0, out.stderr
        deadline = time.monotonic() + 20
        while cluster.settled()[0] != 1:
            assert time.monotonic() < deadline, "member 1 does not lead after the switchover"
            time.sleep(0.05)
    sender, reader = Stream(cluster, "S1"), Stream(cluster, "R1")
    n = 20_000  # about 1.4 MB of journal: more than the disk holds
    pump(
        [sender, reader],
        lambda: sender.send_upto(n) is None
        and all(len(x.from_tag("S1")) >= n for x in (sender, reader)),
        120,
        "past the full disk",
        cluster,
    )
    seq1 = cluster.running[1]
    assert seq1.wait(timeout=30) != 0
    log = cluster.log(1)
    assert "No space left on device" in log and "this sequencer stops" in log, log
    assert cluster.leader() in (2, 3)
    check_streams([sender, reader], {"S1": n})


def test_a_member_whose_vote_record_is_lost_refuses_to_start_naming_it(
    tmp_path: Path, processes: Processes
) -> None:
    """Raft's persistent state is never silently reset (docs/ha.md, "The vote record"): a
    member whose cluster-state is gone, with a journal holding elected terms, is refused at
    start naming the file; moved aside as the message says, it rejoins empty and catches up."""
    cluster, _ = _run_and_stop(tmp_path, processes, 300)
    journal = _journal(cluster, 3)
    (journal / "cluster-state").unlink()
    proc = cluster.start(3)
    assert proc.wait(timeout=60) != 0
    log = cluster.log(3)
    assert f"{journal / 'cluster-state'}: is missing, but the journal holds entries of term" in log
    assert "could vote twice in one term" in log
    del cluster.running[3]
    # the two others go on as a majority; member 3's journal moved aside, it rejoins empty
    for m in (1, 2):
        cluster.start(m)
    leader = cluster.leader()
    journal.rename(journal.with_name("journal-3.lost"))
    cluster.start(3)
    end = cluster.status_of(leader)["cluster"]["last_index"]
    deadline = time.monotonic() + 60
    while (cluster.status(3) or {}).get("cluster", {}).get("last_index", 0) < end:
        assert time.monotonic() < deadline, cluster.log(3)
        time.sleep(0.05)
