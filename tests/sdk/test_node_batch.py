"""seqbus.Node's loop over batches, against batches built here (no transport)."""

from __future__ import annotations

import struct
from typing import Any, ClassVar

import pytest

from seqbus import DecodeError, Node, SeqbusError, UnknownMessageError
from seqbus.batch import RECORD_MESSAGE, RECORD_REWOUND, RECORD_TIME, pack_record

SCHEMA = 9
PING = struct.Struct("<HHHHQ")  # message header + one u64 field


def ping(value: int, template: int = 1, schema: int = SCHEMA) -> bytes:
    return PING.pack(8, template, schema, 1, value)


def dispatch(node: Any, template_id: int, buf: Any, offset: int, length: int, mine: bool) -> bool:
    """What a generated Cython switch does, by hand: wrap the body and call the handler."""
    if template_id == 1:
        node.on_ping(PING.unpack_from(buf, offset)[4], mine)
        return True
    if template_id == 2:
        node.on_pong(PING.unpack_from(buf, offset)[4], mine)
        return True
    return False


class FakePackageNode(Node):
    """Stands for a generated base: SCHEMA_ID, handlers and the dispatch function."""

    SCHEMA_ID: ClassVar[int] = SCHEMA
    _seqbus_handlers_: ClassVar[dict[int, str]] = {1: "on_ping", 2: "on_pong"}
    _seqbus_dispatch_ = staticmethod(dispatch)

    def on_ping(self, msg: int, mine: bool) -> None:
        pass

    def on_pong(self, msg: int, mine: bool) -> None:
        pass


class FakeClient:
    def __init__(self, batches: list[bytes] | None = None) -> None:
        self.batches = list(batches or [])
        self.sent: list[bytes] = []

    def poll(self, max_records: int, timeout: float) -> bytes:
        return self.batches.pop(0) if self.batches else b""

    def send(self, body: Any) -> int:
        self.sent.append(bytes(body))
        return len(self.sent)

    def is_rewinding(self) -> bool:
        return False


class Recorder(FakePackageNode):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, int, bool, int, int]] = []

    def on_opened(self) -> None:
        self.seen.append(("opened", 0, False, self.sequencer_time(), self.sequence()))

    def on_ping(self, msg: int, mine: bool) -> None:
        self.seen.append(("ping", msg, mine, self.sequencer_time(), self.sequence()))

    def on_rewound(self) -> None:
        self.seen.append(("rewound", 0, False, self.sequencer_time(), self.sequence()))


def msg(seq: int, ts: int, body: bytes, account: bytes = b"OTHER") -> bytes:
    return pack_record(RECORD_MESSAGE, seq, timestamp_ns=ts, account=account, body=body)


def attached(node: Node, rewinding: bool = False) -> FakeClient:
    client = FakeClient()
    node.attach(client, "ME", 1, rewinding=rewinding)
    return client


def test_handlers_see_stream_order_clock_and_mine() -> None:
    node = Recorder()
    attached(node, rewinding=True)
    assert node.is_rewinding
    batch = (
        msg(1, 100, ping(7))
        + msg(2, 150, ping(8), account=b"ME\0\0\0\0\0\0")
        + pack_record(RECORD_REWOUND)
    )
    assert node.handle_batch(batch) == 3
    assert node.seen == [
        ("opened", 0, False, 0, 0),
        ("ping", 7, False, 100, 1),
        ("ping", 8, True, 150, 2),
        ("rewound", 0, False, 150, 2),
    ]
    assert not node.is_rewinding
    assert node.account == "ME" and node.instance == 1


def test_topics_are_the_overridden_handlers_plus_explicit() -> None:
    assert Recorder.topics() == [(SCHEMA, 1)]

    class Extra(Recorder):
        TOPICS = ((SCHEMA, 2), (3, 4))

    assert Extra.topics() == [(3, 4), (SCHEMA, 1), (SCHEMA, 2)]
    assert FakePackageNode.topics() == []


def test_unknown_template_is_counted_or_raised() -> None:
    node = Recorder()
    attached(node)
    node.handle_batch(msg(1, 1, ping(1, template=77)) + msg(2, 2, ping(1, schema=55)))
    assert node.stats.unknown == 2

    class Strict(Recorder):
        ON_UNKNOWN = "raise"

    strict = Strict()
    attached(strict)
    with pytest.raises(UnknownMessageError, match="template 77 at sequence 5"):
        strict.handle_batch(msg(5, 1, ping(1, template=77)))


def test_deterministic_timer_fires_at_the_first_record_at_or_past_it() -> None:
    node = Recorder()
    attached(node)
    fired: list[tuple[int, int]] = []
    node.set_timer(200, lambda: fired.append((node.sequence(), node.sequencer_time())))
    node.handle_batch(
        msg(1, 100, ping(1))
        + pack_record(RECORD_TIME, 2, timestamp_ns=150)
        + pack_record(RECORD_TIME, 3, timestamp_ns=210)
    )
    assert fired == [(3, 210)]
    # A timer is fired before the message that reaches its time is handled.
    node.set_timer(300, lambda: fired.append((node.sequence(), -1)))
    node.handle_batch(msg(3, 300, ping(2)))
    assert fired[-1] == (3, -1)
    assert node.seen[-1][:2] == ("ping", 2)


def test_cancelled_timer_does_not_fire() -> None:
    node = Recorder()
    attached(node)
    fired: list[int] = []
    node.set_timer(50, lambda: fired.append(1)).cancel()
    node.set_timer(60, lambda: fired.append(2))
    node.handle_batch(msg(1, 100, ping(1)))
    assert fired == [2]
    assert node.stats.timers_fired == 1


def test_local_timer_runs_from_the_poll_loop() -> None:
    node = Recorder()
    attached(node)
    fired: list[bool] = []
    timer = node.set_local_timer(0.0, lambda: fired.append(True))
    assert not timer.deterministic
    node.poll_once(0.01)
    assert fired == [True]


def test_send_encodes_messages_and_passes_bytes() -> None:
    class Msg:  # what makes a generated message class, for send()
        TEMPLATE_ID = 1
        SCHEMA_ID = 2

        def encode(self) -> bytes:
            return ping(3)

    node = Recorder()
    client = attached(node)
    assert node.send(Msg()) == 1
    assert node.send(ping(4)) == 2
    assert client.sent == [ping(3), ping(4)]
    with pytest.raises(TypeError):
        node.send(42)
    with pytest.raises(TypeError, match="not str"):  # a str has encode() too (issue 13)
        node.send("some text")
    assert client.sent == [ping(3), ping(4)]


def test_send_before_attach_is_an_error() -> None:
    with pytest.raises(SeqbusError, match="not connected"):
        Recorder().send(ping(1))


@pytest.mark.parametrize(
    ("batch", "field"),
    [
        (msg(1, 1, ping(1))[:30], "record_length"),
        (struct.pack("<I", 10) + bytes(44), "record_length"),
        (msg(1, 1, ping(1))[:-1], "record_length"),
        (pack_record(9, 1), "record_type"),
        (msg(1, 1, b"abc"), "body_length"),
    ],
)
def test_corrupt_batches_raise_decode_error(batch: bytes, field: str) -> None:
    node = Recorder()
    attached(node)
    with pytest.raises(DecodeError) as info:
        node.handle_batch(batch)
    assert info.value.field == field


def test_bad_account_is_rejected() -> None:
    with pytest.raises(SeqbusError, match="1 to 8"):
        Recorder().attach(FakeClient(), "MUCH-TOO-LONG", 1)


def test_seqbus_batch_reads_every_record_and_refuses_a_cut_one() -> None:
    """seqbus.batch, the one Python reader of the layout, against records packed here."""
    from seqbus.batch import account_key, message_type, record_at, records, sender

    batch = (pack_record(RECORD_MESSAGE, 7, timestamp_ns=70, command_seq=3,
                         account=account_key("GW"), instance=2, body=ping(5))
             + pack_record(RECORD_TIME, 8, timestamp_ns=80)
             + pack_record(RECORD_REWOUND, 8))
    got = list(records(batch))
    assert [(r.record_type, r.sequence) for r in got] == [
        (RECORD_MESSAGE, 7), (RECORD_TIME, 8), (RECORD_REWOUND, 8)]
    first = got[0]
    assert (first.timestamp_ns, first.command_seq, first.sender, first.instance) == (
        70, 3, "GW", 2)
    assert batch[first.body : first.end] == ping(5) and first.body_length == len(ping(5))
    assert message_type(batch, first) == (SCHEMA, 1)
    assert sender(batch, first.body) == "GW"
    assert record_at(batch, got[1].offset) == got[1]
    assert got[2].end == len(batch)

    with pytest.raises(DecodeError, match="record_length at offset 0"):
        list(records(batch[:20]))  # shorter than a header
    with pytest.raises(DecodeError, match=r"Record.record_length at offset 0: 64 bytes \(header 48, 63 left"):
        list(records(batch[: first.end - 1]))  # the body runs past the batch
    with pytest.raises(DecodeError, match="shorter than a message header"):
        short = pack_record(RECORD_MESSAGE, 9, body=b"abcd")
        message_type(short, record_at(short, 0))
    with pytest.raises(SeqbusError, match="1 to 8 ASCII characters"):
        account_key("TOOLONGNAME")


class WalkingClient(FakeClient):
    """Has ``poll_walk`` as seqbus._core.NodeClient does: poll and walk in one call."""

    def __init__(self, batches: list[bytes]) -> None:
        super().__init__(batches)
        self.walked = 0

    def poll_walk(self, max_records: int, timeout: float, node: Any, dispatchers: Any,
                  account: bytes, clock: Any, skip_from: int = 2**63 - 1) -> Any:
        from seqbus import _core

        batch = self.poll(max_records, timeout)
        if not batch:
            return None
        self.walked += 1
        return (batch, *_core.walk_batch(batch, 0, node, dispatchers, account, clock, skip_from))


class Auditor(Recorder):
    def __init__(self) -> None:
        super().__init__()
        self.batches: list[bytes] = []

    def on_batch(self, batch: bytes) -> None:
        # after the batch's handlers: the last ping of the batch is already seen
        self.batches.append(batch)
        self.seen.append(("batch", len(batch), False, self.sequencer_time(), self.sequence()))


@pytest.mark.parametrize("client_class", [FakeClient, WalkingClient])
def test_on_batch_sees_each_batch_after_its_handlers_on_either_feed(client_class: Any) -> None:
    first, second = msg(1, 100, ping(7)) + msg(2, 110, ping(8)), msg(3, 120, ping(9))
    node = Auditor()
    client = client_class([first, second])
    node.attach(client, "ME", 1)
    assert node.poll_once(0.0) == 2 and node.poll_once(0.0) == 1 and node.poll_once(0.0) == 0
    assert node.batches == [first, second]
    assert [s[0] for s in node.seen] == ["opened", "ping", "ping", "batch", "ping", "batch"]
    assert node.seen[3][4] == 2 and node.seen[5][4] == 3
    if client_class is WalkingClient:
        assert client.walked == 2  # the fused path, with the hook on


def test_a_node_without_on_batch_is_not_called_per_batch() -> None:
    node = Recorder()
    assert node._on_batch is None
    assert Auditor()._on_batch is not None


def test_overriding_handle_batch_is_refused_when_the_class_is_defined() -> None:
    with pytest.raises(TypeError, match="override on_batch"):
        class Overriding(FakePackageNode):
            def handle_batch(self, batch: Any) -> int:
                return 0
