"""Downstream authentication (docs/sites.md, "Downstream authentication"), over real sockets: a
sequencer process with ``downstream.key``; an attacker multicasts, on the bus's group, packets
that claim the next sequence number (one without a MAC, one with a made-up MAC). A node with the
key drops and counts both, and delivers the real message of that sequence number. And a bridge
between two keyed sites carries the stream end to end, each site under its own key."""

from __future__ import annotations

import socket
import struct
import time
from pathlib import Path
from typing import Any

import pytest

from seqbus import _core
from seqbus.errors import SeqbusError
from tests.conftest import Processes, free_udp_port, seqbus_cli
from tests.ha.cluster import BODY, HEADER, Stream
from tests.sites.sitebus import Deadline, Site, wait_until

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("multicast")]

KEY = "5a" * 32
GROUP = "239.7.9.3"
SESSION = "DOWNAUTH01"


def write_config(tmp_path: Path) -> tuple[Path, int]:
    group = free_udp_port()
    replayer = free_udp_port()
    path = tmp_path / "bus.toml"
    path.write_text(
        f"""\
[bus]
session = "{SESSION}"

[sequencer]
upstream = "127.0.0.1:{free_udp_port()}"
journal_dir = "{tmp_path / "journal"}"
clock_tick_ms = 0
heartbeat_ms = 50

[downstream]
transport = "udp-multicast"
group = "{GROUP}:{group}"
key = "{KEY}"

[replayer]
listen = "127.0.0.1:{replayer}"

[node]
replayers = ["127.0.0.1:{replayer}"]
"""
    )
    return path, group


def wait_for(cond: Any, timeout: float, what: str, pump: Any) -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout} s")
        pump()


def messages(records: bytes) -> list[tuple[int, str, int]]:
    """(sequence, tag, counter) of every message in a batch of records."""
    out = []
    at = 0
    while at < len(records):
        length = int.from_bytes(records[at : at + 4], "little")
        if int.from_bytes(records[at + 4 : at + 6], "little") == 1:
            seq = int.from_bytes(records[at + 8 : at + 16], "little")
            tag, n = BODY.unpack_from(records, at + 48 + 8)
            out.append((seq, tag.rstrip(b"\0").decode(), n))
        at += length
    return out


def forged_packet(seq: int) -> bytes:
    """A MoldUDP64 packet of one well-formed application message of account SENDER under
    ``seq``, without a MAC."""
    payload = BODY.pack(b"FORGED".ljust(8, b"\0"), 1)
    body = HEADER + payload
    envelope = b"\0" * 8 + (1).to_bytes(8, "little") + b"SENDER\0\0" + (1).to_bytes(2, "little")
    envelope += bytes([1, 0]) + len(body).to_bytes(4, "little")
    message = envelope + body
    packet = SESSION.encode() + seq.to_bytes(8, "big") + (1).to_bytes(2, "big")
    return packet + len(message).to_bytes(2, "big") + message


def test_a_forged_packet_on_the_group_is_counted_and_not_delivered(
    tmp_path: Path, processes: Processes
) -> None:
    bus, group = write_config(tmp_path)
    # a listener on the group, as any host on the network could be
    listen = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    listen.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listen.bind((GROUP, group))
    mreq = struct.pack("4s4s", socket.inet_aton(GROUP), socket.inet_aton("127.0.0.1"))
    listen.setsockopt(socket.IPPROTO_IP, socket.IP_ADD_MEMBERSHIP, mreq)
    listen.settimeout(0.2)
    seq = processes.start("sequencer", [*seqbus_cli(), "sequencer", "-c", str(bus)])
    reader: _core.NodeClient | None = None
    sender: _core.NodeClient | None = None
    got: list[tuple[int, str, int]] = []
    try:
        wait_for(
            lambda: "downstream authentication ON" in processes.log("sequencer"),
            20,
            "the start-up line",
            lambda: time.sleep(0.01),
        )
        reader = _core.NodeClient(str(bus), "READER", 1, start="rewind")
        sender = _core.NodeClient(str(bus), "SENDER", 1, start="live")
        r, s = reader, sender

        def pump() -> None:
            got.extend(messages(r.poll(4096, 0.002)))
            s.poll(64, 0.001)

        wait_for(lambda: r.is_ready() and s.is_ready(), 20, "the nodes ready", pump)
        # the stream is quiet (no clock ticks): two heartbeats alike name the next sequence
        # number; each is MoldUDP64's 20 bytes and a 16-byte MAC
        heard: list[bytes] = []
        deadline = time.monotonic() + 20
        while len(heard) < 2 or heard[-1] != heard[-2]:
            assert time.monotonic() < deadline, heard[-4:]
            pump()
            try:
                d = listen.recv(65536)
            except TimeoutError:
                continue
            if int.from_bytes(d[18:20], "big") == 0:
                assert len(d) == 20 + 16, d
                heard.append(d)
        nxt = int.from_bytes(heard[-1][10:18], "big")
        # the attacker: the next message without a MAC, and with a MAC made up
        forged = forged_packet(nxt)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as a:
            a.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_IF, socket.inet_aton("127.0.0.1"))
            a.setsockopt(socket.IPPROTO_IP, socket.IP_MULTICAST_LOOP, 1)
            a.sendto(forged, (GROUP, group))
            a.sendto(forged + b"\x42" * 16, (GROUP, group))
        wait_for(
            lambda: r.stats()["downstream_forged"] >= 2, 10, "the forged packets counted", pump
        )
        # the real message of that sequence number, sent after them
        s.send(HEADER + BODY.pack(b"REAL".ljust(8, b"\0"), 1))
        wait_for(lambda: any(t == "REAL" for _, t, _ in got), 10, "the real message", pump)
        # nothing forged reached the application; the real message came at or after the
        # sequence number the forgeries claimed (a control message may come first)
        real = [g for g in got if g[1] in ("REAL", "FORGED")]
        assert [g[1:] for g in real] == [("REAL", 1)] and real[0][0] >= nxt, (nxt, got)
        assert r.stats()["downstream_forged"] == 2
        assert r.stats()["malformed"] == 0
        # every node with the key drops them
        wait_for(lambda: s.stats()["downstream_forged"] == 2, 10, "the sender's count", pump)
    finally:
        listen.close()
        for c in (reader, sender):
            if c is not None:
                try:
                    c.close()
                except SeqbusError:
                    pass
        processes.kill(seq)


def test_a_bridge_between_two_keyed_sites_delivers_end_to_end(
    tmp_path: Path, processes: Processes
) -> None:
    # each site signs its own downstream with its own key: site A's multicast (read by the
    # following replayer the bridge links to), site B's (republished by the bridge, whose
    # replayer also answers site B's rewinds)
    a = Site(tmp_path, "a", downstream_key="a1" * 32)
    b = Site(tmp_path, "b", downstream_key="b2" * 32)
    bus_a = a.bus()
    t1, _, t1_tcp = a.follower("t1")
    bus_b = b.bridge([f"127.0.0.1:{t1_tcp}"])
    cli = seqbus_cli()
    processes.start("sequencer", [*cli, "sequencer", "-c", str(bus_a)])
    processes.start("t1", [*cli, "replayer", "-c", str(t1)])
    processes.start("bridge", [*cli, "bridge", "-c", str(bus_b)])
    wait_until(lambda: "(bridge): logged in" in processes.log("t1"), 30, "the link", processes.logs)
    # a sender at site B: its commands go through the bridge to site A's sequencer, and come
    # back through site A's multicast, the follower, the link and site B's multicast
    sender = Stream(bus_b, "S1", start="live")
    wait_until(
        lambda: sender.poll() >= 0 and sender.client.is_ready(), 30, "the sender", processes.logs
    )
    total = 500
    sender.send_all(total, Deadline(60, "sending", processes.logs).check)
    wait_until(lambda: sender.has("S1", total), 60, "the stream at site B", processes.logs)
    assert sender.from_tag("S1") == list(range(total))
    # a late joiner at site B rewinds from the bridge's replayer (keyed answers)
    late = Stream(bus_b, "LATE", start="rewind")
    wait_until(lambda: late.has("S1", total), 60, "the late joiner at site B", processes.logs)
    assert late.from_tag("S1") == list(range(total))
    # and at site A, the same under site A's key
    at_a = Stream(bus_a, "RA", start="rewind")
    wait_until(lambda: at_a.has("S1", total), 60, "a reader at site A", processes.logs)
    for s in (sender, late, at_a):
        assert s.client.stats()["downstream_forged"] == 0, s.account
    assert "without a valid MAC" not in processes.logs()
    for s in (sender, late, at_a):
        s.client.close()
