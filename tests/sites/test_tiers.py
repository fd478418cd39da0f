"""Tiered replayers (docs/sites.md): two replayers follow the bus's multicast and serve
SoupBinTCP; a second-tier replayer follows both of them over SoupBinTCP (the first copy of each
message wins) and serves a late joiner, whose only replayer it is. The first-tier replayer the
second tier read first is killed while the late joiner rewinds: the late joiner's stream is
whole, the second tier goes on through the other one; once both first-tier replayers are dead
a third late joiner still rewinds the whole session from the second tier; every journal holds
the same bytes."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.conftest import Processes, seqbus_cli
from tests.ha.cluster import Stream
from tests.sites.sitebus import Deadline, Site, journal_bytes, tls_files, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("multicast")]


@pytest.mark.parametrize("tls", [False, True], ids=["tcp", "tls"])
def test_a_tiered_replayer_serves_a_late_joiner_while_the_first_tier_is_killed(
    tmp_path: Path, processes: Processes, tls: bool
) -> None:
    # no idle clock ticks: the stream stops growing with the last command, so that a second tier
    # left without a first tier still holds all of it
    site = Site(tmp_path, "a", clock_tick_ms=0)
    if tls:
        table = tls_files(tmp_path, "127.0.0.1")
        if table is None:
            pytest.skip("openssl is not installed (scripts/system-deps.sh installs it)")
        site.extra = table
    bus = site.bus()
    t1a, _, t1a_tcp = site.follower("t1a")
    t1b, _, t1b_tcp = site.follower("t1b")
    t2, t2_udp, _ = site.follower(
        "t2", tcp=False, follow_tcp=[f"127.0.0.1:{t1a_tcp}", f"127.0.0.1:{t1b_tcp}"]
    )
    # the late joiner asks the second tier only: no static list, no discovery
    late_cfg = site.write("late", site.base(discovery=False, replayers=[t2_udp]))
    cli = seqbus_cli()
    processes.start("sequencer", [*cli, "sequencer", "-c", str(bus)])
    replayers = {
        name: processes.start(name, [*cli, "replayer", "-c", str(cfg)])
        for name, cfg in (("t1a", t1a), ("t1b", t1b), ("t2", t2))
    }
    sender = Stream(bus, "S1", start="live")
    wait_until(
        lambda: sender.poll() >= 0 and sender.client.is_ready(), 20, "the sender", processes.logs
    )
    total = 30000
    sender.send_all(total, Deadline(60, "sending the stream", processes.logs).check)
    wait_until(lambda: sender.has("S1", total), 60, "the stream", processes.logs)
    last = sender.messages()[-1][0]
    wait_until(
        lambda: len(journal_bytes(tmp_path / "journal-t2"))
        >= len(journal_bytes(tmp_path / "journal")) - 4096
        and b"" != journal_bytes(tmp_path / "journal-t2"),
        30,
        "the second tier",
        processes.logs,
    )
    late = Stream(late_cfg, "LATE", start="rewind")
    # its first batch of history (one poll hands out at most 4096 records): mid-rewind
    wait_until(lambda: late.poll(0.05) > 0, 30, "the late joiner's first history", processes.logs)
    got = len(late.messages())
    assert 0 < got < total, f"the late joiner is mid-rewind ({got} of {total})"
    processes.kill(replayers["t1a"], signal.SIGKILL)
    replayers["t1a"].wait(timeout=10)
    # more of the stream after the kill: the second tier gets it through t1b
    more = total + 5000
    sending = Deadline(60, "sending the rest", processes.logs)
    while sender.sent < more:
        sending.check()
        sender.send_upto(more)
        sender.poll()
        late.poll()
    wait_until(
        lambda: (
            sender.poll() >= 0
            and late.poll() >= 0
            and late.caught_up
            and len(late.from_tag("S1")) >= more
            and len(sender.from_tag("S1")) >= more
        ),
        60,
        "the late joiner",
        processes.logs,
    )
    assert late.from_tag("S1") == list(range(more))
    n = min(len(sender.messages()), len(late.messages()))
    assert late.messages()[:n] == sender.messages()[:n]
    stats = late.client.stats()
    assert stats["retransmits"] >= got, stats  # its history came from the second tier

    # a second late joiner after the kill rewinds everything from the second tier, which
    # holds the messages sent after t1a died
    def rewind_all(account: str) -> Stream:
        """A late joiner whose only replayer is the second tier, once it has all of S1's."""
        late = Stream(late_cfg, account, start="rewind")
        wait_until(
            lambda: late.poll() >= 0 and late.caught_up and len(late.from_tag("S1")) >= more,
            60,
            f"the late joiner {account}",
            processes.logs,
        )
        assert late.from_tag("S1") == list(range(more))
        return late

    late2 = rewind_all("LATE2")
    if tls:
        # the links spoke TLS: a plain SoupBinTCP login to a first-tier server fails
        import socket

        with socket.create_connection(("127.0.0.1", t1b_tcp), timeout=5) as s:
            login = b"L" + b"bridge" + b"s3cret    " + b" " * 10 + b"1".rjust(20)
            s.sendall(len(login).to_bytes(2, "big") + login)
            s.settimeout(5)
            try:
                answer = s.recv(64)
            except OSError:
                answer = b""
        assert not answer.startswith(b"\x00\x1fA"), "a plain login was accepted"
    # the second tier holds the whole session: with no first-tier replayer left, a third late
    # joiner still rewinds all of it from the second tier alone
    ahead = len(journal_bytes(tmp_path / "journal"))
    wait_until(
        lambda: len(journal_bytes(tmp_path / "journal-t2")) >= ahead,
        30,
        "the second tier's journal",
        processes.logs,
    )
    processes.kill(replayers["t1b"], signal.SIGKILL)
    replayers["t1b"].wait(timeout=10)
    late3 = rewind_all("LATE3")
    assert late3.client.stats()["retransmits"] >= more, late3.client.stats()
    for name in ("t1a", "t1b", "t2"):
        j = journal_bytes(tmp_path / f"journal-{name}")
        assert len(j) > 1_000_000
        assert journal_bytes(tmp_path / "journal").startswith(j), (
            f"{name}'s journal differs from the sequencer's"
        )
    assert last > 0
    for c in (sender, late, late2, late3):
        c.client.close()
