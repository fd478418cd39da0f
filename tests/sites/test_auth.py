"""Commands no one can forge (docs/upstream.md, "Authentication"; docs/sites.md, the threat
model), over real sockets: a sequencer process with per-account keys; a legitimate sender whose
datagrams pass through a tap that copies them (an attacker on the path); attackers sending as
the legitimate account without a key, with a wrong key, as an account without a key, and
replaying the tapped datagrams. Every forgery and replay is dropped and counted apart, and the
legitimate stream is exactly what was sent."""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from seqbus import _core
from seqbus.errors import SeqbusError
from tests.conftest import Processes, free_tcp_port, free_udp_port, seqbus_cli
from tests.ha.cluster import BODY, HEADER
from tests.sites.sitebus import Deadline

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("multicast")]

GOOD_KEY = "11" * 32
READER_KEY = "22" * 32
WRONG_KEY = "33" * 32


def write_config(
    path: Path, *, upstream: int, group: int, replayer: int, status: int, auth: str | None
) -> Path:
    text = f"""\
[bus]
session = "AUTH000001"

[sequencer]
upstream = "127.0.0.1:{upstream}"
journal_dir = "{path.parent / "journal"}"
status = "127.0.0.1:{status}"
clock_tick_ms = 20

[downstream]
transport = "udp-multicast"
group = "239.7.9.1:{group}"

[replayer]
listen = "127.0.0.1:{replayer}"

[node]
replayers = ["127.0.0.1:{replayer}"]
retry_ms = 20
"""
    if auth is not None:
        text += f"\n[auth]\naccounts = [\n{auth}\n]\n"
    path.write_text(text)
    return path


def bus_config(tmp_path: Path, auth: str | None) -> tuple[Path, int, int, int, int]:
    """The sequencer's configuration on fresh ports: (path, upstream, group, replayer, status)."""
    upstream, group, replayer, status = (
        free_udp_port(),
        free_udp_port(),
        free_udp_port(),
        free_tcp_port(),
    )
    bus = write_config(
        tmp_path / "bus.toml",
        upstream=upstream,
        group=group,
        replayer=replayer,
        status=status,
        auth=auth,
    )
    return bus, upstream, group, replayer, status


class Tap:
    """A UDP relay between a sender and the sequencer that keeps a copy of every datagram the
    sender sent and passes the sequencer's answers (NAKs) back."""

    def __init__(self, sequencer: tuple[str, int]) -> None:
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.settimeout(0.05)
        self.port = int(self.sock.getsockname()[1])
        self.sequencer = sequencer
        self.copies: list[bytes] = []
        self.sender: tuple[str, int] | None = None
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.done.is_set():
            try:
                data, addr = self.sock.recvfrom(65536)
            except TimeoutError:
                continue
            if addr == self.sequencer:
                if self.sender is not None:
                    self.sock.sendto(data, self.sender)
            else:
                self.sender = addr
                self.copies.append(data)
                self.sock.sendto(data, self.sequencer)

    def replay(self, datagram: bytes) -> None:
        self.sock.sendto(datagram, self.sequencer)

    def close(self) -> None:
        self.done.set()
        self.thread.join(2)
        self.sock.close()


#: The anti-replay window of the sequencer, in packets (seqbus_wire::auth::WINDOW).
WINDOW = 64


def counter(datagram: bytes) -> int:
    """The nonce's counter of an authenticated upstream packet: its trailer is
    ``boot_ns u64 | counter u64 | mac [16]`` (little-endian)."""
    return int.from_bytes(datagram[-24:-16], "little")


def counters(status: int) -> dict[str, int]:
    with urllib.request.urlopen(f"http://127.0.0.1:{status}/status", timeout=2) as r:
        doc: dict[str, Any] = json.loads(r.read())
    return {k: int(v) for k, v in doc["counters"].items()}


def wait_for(cond: Any, timeout: float, what: str, pump: Any = None) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout} s")
        if pump is not None:
            pump()
        else:
            time.sleep(0.01)


def body(tag: str, n: int) -> bytes:
    return HEADER + BODY.pack(tag.encode().ljust(8, b"\0"), n)


def tags(records: bytes) -> list[tuple[str, int, str, int]]:
    """(sender account, instance, tag, counter) of every message in a batch of records."""
    out = []
    at = 0
    while at < len(records):
        length = int.from_bytes(records[at : at + 4], "little")
        if int.from_bytes(records[at + 4 : at + 6], "little") == 1:
            env = records[at + 16 : at + 48]
            account = env[16:24].rstrip(b"\0").decode()
            instance = int.from_bytes(env[24:26], "little")
            tag, n = BODY.unpack_from(records, at + 48 + 8)
            out.append((account, instance, tag.rstrip(b"\0").decode(), n))
        at += length
    return out


def test_forged_wrong_key_and_replayed_commands_are_dropped_and_counted(
    tmp_path: Path, processes: Processes
) -> None:
    keys = f'  {{ account = "GOOD", key = "{GOOD_KEY}" }},\n  {{ account = "READER", key = "{READER_KEY}" }},'
    bus, upstream, group, replayer, status = bus_config(tmp_path, keys)
    seq = processes.start("sequencer", [*seqbus_cli(), "sequencer", "-c", str(bus)])
    reader = _core.NodeClient(str(bus), "READER", 1, start="rewind")
    got: list[tuple[str, int, str, int]] = []

    def pump() -> None:
        got.extend(tags(reader.poll(4096, 0.002)))

    wait_for(
        lambda: "upstream authentication ON: 2 account keys" in processes.log("sequencer"),
        20,
        "the start-up line",
        pump,
    )
    # the legitimate sender's datagrams pass the tap
    tap = Tap(("127.0.0.1", upstream))
    via_tap = write_config(
        tmp_path / "good.toml",
        upstream=tap.port,
        group=group,
        replayer=replayer,
        status=free_tcp_port(),
        auth=keys,
    )
    good = _core.NodeClient(str(via_tap), "GOOD", 1, start="live")
    # attackers: GOOD without a key (keys off in their configuration), GOOD with a wrong key,
    # an account with no key at the sequencer
    no_auth = write_config(
        tmp_path / "noauth.toml",
        upstream=upstream,
        group=group,
        replayer=replayer,
        status=free_tcp_port(),
        auth=None,
    )
    wrong = write_config(
        tmp_path / "wrong.toml",
        upstream=upstream,
        group=group,
        replayer=replayer,
        status=free_tcp_port(),
        auth=f'  {{ account = "GOOD", key = "{WRONG_KEY}" }},\n  {{ account = "EVIL", key = "{WRONG_KEY}" }},',
    )
    unsigned = _core.NodeClient(str(no_auth), "GOOD", 2, start="rewind")
    wrong_key = _core.NodeClient(str(wrong), "GOOD", 3, start="rewind")
    no_key = _core.NodeClient(str(wrong), "EVIL", 1, start="rewind")
    attackers = [unsigned, wrong_key, no_key]
    try:
        wait_for(good.is_ready, 20, "GOOD's SenderState", lambda: (good.poll(64, 0.002), pump()))
        # a rewinding sender numbers from 1 without asking: the attackers send at once
        for i in range(50):
            for a in attackers:
                a.send(body("FORGED", i))
        sent = 0
        sending = Deadline(30, "GOOD's sends", processes.logs)
        while sent < 300:
            sending.check()
            try:
                good.send(body("GOOD", sent))
                sent += 1
            except SeqbusError:
                pass
            good.poll(64, 0.001)
            for a in attackers:
                a.poll(64, 0)
            pump()
        wait_for(
            lambda: sum(1 for g in got if g[2] == "GOOD") >= 300,
            30,
            "GOOD's commands",
            lambda: (good.poll(64, 0.001), [a.poll(64, 0) for a in attackers], pump()),
        )
        # the attackers' datagrams are dropped as forged (each of the three retries until then)
        wait_for(
            lambda: counters(status)["upstream_forged"] >= 3,
            10,
            "the attackers' datagrams counted",
            lambda: (good.poll(64, 0.001), [a.poll(64, 0.001) for a in attackers], pump()),
        )
        for a in attackers:
            a.close()
        # a marker from GOOD, sent after the attackers stopped: once it is in the stream, the
        # sequencer has read every datagram the attackers sent before (one socket, in order)
        marking = Deadline(10, "GOOD's marker", processes.logs)
        while True:
            marking.check()
            try:
                good.send(body("GOOD", 300))
                break
            except SeqbusError:
                good.poll(64, 0.001)
        wait_for(
            lambda: any(t == "GOOD" and n == 300 for _, _, t, n in got),
            10,
            "GOOD's marker in the stream",
            lambda: (good.poll(64, 0.001), pump()),
        )
        before = counters(status)
        # replay the tap's copies: the newest 40 are within the window (replayed), the
        # earliest are more than 64 datagrams behind the newest (stale)
        # by nonce: every packet GOOD sealed passed the tap (commands, hellos, retransmissions),
        # so the sequencer's window for GOOD ends at the newest counter the tap saw; the copies
        # well inside it (a margin for anything GOOD still sends) are replays, those 64 or more
        # behind it stale
        top = max(counter(c) for c in tap.copies)
        copies = [c for c in tap.copies if c[3] == 1]  # command packets
        inside = [c for c in copies if counter(c) > top - WINDOW + 16][-40:]
        behind = [c for c in copies if counter(c) <= top - WINDOW][:20]
        assert (len(inside), len(behind)) == (40, 20), (len(inside), len(behind), top)
        for c in inside + behind:
            tap.replay(c)
        # a tapped datagram with one byte of its command changed: forged
        changed = bytearray(copies[-1])
        changed[28 + 16 + 9] ^= 1
        tap.replay(bytes(changed))
        wait_for(
            lambda: (c := counters(status))["upstream_replayed"] - before["upstream_replayed"] >= 40
            and c["upstream_stale"] - before["upstream_stale"] >= 20
            and c["upstream_forged"] > before["upstream_forged"],
            30,
            "the replays counted",
            pump,
        )
        after = counters(status)
        assert after["upstream_replayed"] - before["upstream_replayed"] == 40, (before, after)
        assert after["upstream_stale"] - before["upstream_stale"] == 20, (before, after)
        assert after["upstream_forged"] - before["upstream_forged"] == 1, (before, after)
        # the legitimate stream: GOOD's commands once each, in order; nothing else from anyone
        for _ in range(20):
            pump()
        assert [n for a, _, t, n in got if t == "GOOD"] == list(range(301))
        assert all(a == "GOOD" and i == 1 for a, i, t, _ in got), {g[:3] for g in got}
        assert not any(t == "FORGED" for _, _, t, _ in got)
        # the replays stopped at the window, before the duplicate filter (which may still count
        # a late retransmission of GOOD's own, as the marker's under load)
        assert after["commands_duplicate"] - before["commands_duplicate"] < len(inside), (
            "replays reached the duplicate filter",
            before,
            after,
        )
        m = urllib.request.urlopen(f"http://127.0.0.1:{status}/metrics", timeout=2).read().decode()
        assert "seqbus_sequencer_upstream_forged" in m and "seqbus_sequencer_upstream_stale" in m, (
            m[:500]
        )
    finally:
        tap.close()
        for c in [good, reader, *attackers]:
            try:
                c.close()
            except SeqbusError:
                pass
        processes.kill(seq)


def test_keys_off_says_so_and_a_node_without_its_key_is_refused(
    tmp_path: Path, processes: Processes
) -> None:
    bus, upstream, group, replayer, status = bus_config(tmp_path, None)
    seq = processes.start("sequencer", [*seqbus_cli(), "sequencer", "-c", str(bus)])
    node = _core.NodeClient(str(bus), "ANY", 1, start="live")
    wait_for(node.is_ready, 20, "a SenderState with keys off", lambda: node.poll(64, 0.005))
    log = processes.log("sequencer")
    assert "upstream authentication OFF" in log and "trusted networks only" in log, log
    node.close()
    processes.kill(seq)
    keyed = write_config(
        tmp_path / "keyed.toml",
        upstream=upstream,
        group=group,
        replayer=replayer,
        status=status,
        auth=f'  {{ account = "GOOD", key = "{GOOD_KEY}" }},',
    )
    with pytest.raises(SeqbusError, match='"NOKEY" has no key in \\[auth\\]'):
        _core.NodeClient(str(keyed), "NOKEY", 1, start="live")
