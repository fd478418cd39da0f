"""``NodeClient.poll_walk``: a live node's poll, walk and flush in one call.

What its handlers send leaves before the call returns (the node's own bookkeeping and its next
poll no longer stand between a message and the answer to it), and it hands back what the walk
found, as ``walk_batch`` does.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from examples.pingpong.messages import Ping, PingpongNode, PingView, Pong
from seqbus import _core
from seqbus.batch import RECORD_HEADER, RECORD_MESSAGE, MESSAGE_HEADER
from seqbus.demo import bus_config, free_udp_port

LIMIT_S = 20.0


class Answerer(PingpongNode):
    """Answers every Ping with a Pong; counts the Pings."""

    pings = 0

    def on_ping(self, msg: PingView, mine: bool) -> None:
        self.pings += 1
        self.send_pong(id=msg.id, ping_sent_at_ns=msg.sent_at_ns)


def _ready(client: _core.NodeClient) -> None:
    deadline = time.monotonic() + LIMIT_S
    while not client.is_ready():
        assert time.monotonic() < deadline, "no answer from the sequencer"
        client.poll(64, 0.01)


def _pongs(batch: bytes) -> list[int]:
    """The ids of the Pongs among a batch's records."""
    ids = []
    at = 0
    while at < len(batch):
        length, kind = RECORD_HEADER.unpack_from(batch, at)[:2]
        if kind == RECORD_MESSAGE:
            body = at + RECORD_HEADER.size
            _block, template_id, schema_id, _version = MESSAGE_HEADER.unpack_from(batch, body)
            if (schema_id, template_id) == (Pong.SCHEMA_ID, Pong.TEMPLATE_ID):
                ids.append(Pong.decode(batch[body : at + length]).id)
        at += length
    return ids


@pytest.fixture
def bus(tmp_path: Path) -> Iterator[tuple[str, list[str]]]:
    listen = [f"127.0.0.1:{free_udp_port()}" for _ in range(2)]
    config = tmp_path / "bus.toml"
    config.write_text(bus_config(tmp_path, False, listen))
    sequencer = _core.Sequencer(str(config))
    try:
        yield str(config), listen
    finally:
        sequencer.stop()
        assert sequencer.join(10.0)


@pytest.mark.parametrize("timer_first", [False, True], ids=["walked", "timers-first"])
def test_what_handlers_send_leaves_before_poll_walk_returns(
    bus: tuple[str, list[str]], timer_first: bool
) -> None:
    """``timers-first``: a timer due at the next record stops the walk before the Ping, and the
    node walks on in Python; what the handler sends then must leave in the same poll too."""
    config, listen = bus
    node = Answerer()
    answering = _core.NodeClient(
        config, "ANSWER", 1, topics=Answerer.topics(), listen=listen[0]
    )
    asking = _core.NodeClient(
        config, "ASK", 1, topics=[(Pong.SCHEMA_ID, Pong.TEMPLATE_ID)], listen=listen[1]
    )
    try:
        _ready(answering)
        _ready(asking)
        node.attach(answering, "ANSWER", 1)
        assert node._poll_walk is not None  # the runner's path for a live node
        fired: list[int] = []
        for ping in range(3):
            if timer_first:
                node.set_timer_after(0, lambda: fired.append(node.pings))
            asking.send(Ping(id=ping, sent_at_ns=7).encode())
            asking.flush()
            # the answering node polls until its handler ran, then never again this round:
            # only poll_walk itself can have sent the Pong
            deadline = time.monotonic() + LIMIT_S
            while node.pings <= ping:
                assert time.monotonic() < deadline, f"Ping {ping} never reached the handler"
                node.poll_once(0.05)
            seen: list[int] = []
            while ping not in seen:
                assert time.monotonic() < deadline, (
                    f"the Pong to Ping {ping} was not sent by the poll that ran its handler"
                )
                seen += _pongs(asking.poll(64, 0.05))
            assert seen == [ping]
        # each timer fired before the Ping it was set ahead of
        assert fired == ([0, 1, 2] if timer_first else [])
    finally:
        answering.close()
        asking.close()


def test_poll_walk_hands_back_what_the_walk_found(bus: tuple[str, list[str]]) -> None:
    config, listen = bus
    node = Answerer()
    client = _core.NodeClient(config, "ANSWER", 1, topics=Answerer.topics(), listen=listen[0])
    asking = _core.NodeClient(config, "ASK", 1, topics=[], listen=listen[1])
    try:
        _ready(client)
        _ready(asking)
        node.attach(client, "ANSWER", 1)
        args = (node, node._dispatchers, b"ANSWER\0\0", node._clock)
        # nothing waiting: nothing to walk (time records may still be on their way)
        for _ in range(1000):
            got = client.poll_walk(64, 0.0, *args)
            if got is None:
                break
            node._walked(*got)
        assert got is None
        for ping in range(5):
            asking.send(Ping(id=ping, sent_at_ns=ping).encode())
        asking.flush()
        dispatched = 0
        deadline = time.monotonic() + LIMIT_S
        while node.pings < 5:
            assert time.monotonic() < deadline, f"{node.pings} of 5 Pings handled"
            got = client.poll_walk(64, 0.05, *args)
            if got is None:
                continue
            batch, offset, stop, count, error = got
            assert type(batch) is bytes and error is None
            if stop == _core.STOP_END:
                assert offset == len(batch)
            else:  # a record for the Python side (a time record): the node walks on from it
                assert stop == _core.STOP_RECORD and offset < len(batch)
            dispatched += count
            node._walked(batch, offset, stop, count, error)
        assert node.pings == 5 and 0 < dispatched <= 5
        assert node.stats.messages == 5
    finally:
        client.close()
        asking.close()
