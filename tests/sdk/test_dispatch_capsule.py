"""The generated dispatch as a C function (``_seqbus_dispatch_c_``, a capsule ``walk_batch``
calls with no argument tuple per message): the same handler calls, unknown template ids and
handler errors as through the Python function; a capsule of another version is refused."""

from __future__ import annotations

import ctypes
from typing import Any

import pytest

from examples.pingpong.messages import Ping, PingpongNode, PingView, Pong, PongView
from examples.pingpong.messages import _codec
from seqbus.batch import RECORD_MESSAGE, pack_record

BAD = 1000  # the id the handler raises on


class Recorder(PingpongNode):
    ON_ERROR = "skip"

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, int, int, bool, int]] = []

    def on_ping(self, msg: PingView, mine: bool) -> None:
        if msg.id == BAD:
            raise ValueError("bad ping")
        self.seen.append(("ping", msg.id, msg.sent_at_ns, mine, self.sequence()))

    def on_pong(self, msg: PongView, mine: bool) -> None:
        self.seen.append(("pong", msg.id, msg.ping_sent_at_ns, mine, self.sequence()))


class NullClient:
    def poll(self, max_records: int, timeout: float) -> bytes:
        return b""

    def send(self, body: Any) -> int:
        return 0

    def is_rewinding(self) -> bool:
        return False


def batch() -> bytes:
    records = []
    for seq in range(1, 41):
        if seq % 10 == 0:  # a template id this schema does not have
            body = bytearray(Ping(id=seq, sent_at_ns=0).encode())
            body[2:4] = (99).to_bytes(2, "little")
        elif seq % 3 == 0:
            body = bytearray(Pong(id=seq, ping_sent_at_ns=seq * 2).encode())
        else:
            body = bytearray(Ping(id=BAD if seq == 14 else seq, sent_at_ns=seq * 3).encode())
        account = b"ME\0\0\0\0\0\0" if seq % 2 else b"OTHER\0\0\0"
        records.append(pack_record(RECORD_MESSAGE, seq, timestamp_ns=seq, account=account,
                                   body=bytes(body)))
    return b"".join(records)


def run(through_c: bool) -> Recorder:
    node = Recorder()
    node.attach(NullClient(), "ME", 1)
    if through_c:
        assert type(node._dispatchers[_codec.SCHEMA_ID]).__name__ == "PyCapsule"
    else:
        node._dispatchers[_codec.SCHEMA_ID] = _codec._seqbus_dispatch_
    node.handle_batch(batch())
    return node


def test_the_c_dispatch_does_what_the_python_one_does() -> None:
    via_c, via_python = run(True), run(False)
    assert via_c.seen == via_python.seen
    assert len(via_c.seen) == 40 - 4 - 1  # 4 unknown, 1 raised
    assert ("pong", 3, 6, True, 3) in via_c.seen and ("ping", 2, 6, False, 2) in via_c.seen
    for node in (via_c, via_python):
        assert node.stats.unknown == 4 and node.stats.messages == 40
        assert node.stats.skipped_sequences == [14]
        assert node.stats.last_error is not None
        assert node.stats.last_error.error == "ValueError: bad ping"
        assert "in on_ping" in node.stats.last_error.traceback


def test_a_capsule_of_another_version_is_refused() -> None:
    make = ctypes.pythonapi.PyCapsule_New
    make.restype = ctypes.py_object
    make.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    name = ctypes.create_string_buffer(b"seqbus.dispatch.v0")
    node = Recorder()
    node.attach(NullClient(), "ME", 1)
    node._dispatchers[_codec.SCHEMA_ID] = make(ctypes.addressof(name), name, None)
    with pytest.raises(TypeError, match="regenerate the module"):
        node.handle_batch(batch())
    assert node.seen == []
