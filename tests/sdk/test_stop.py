"""A node that stops keeps nothing it sent to itself: commands in flight and commands queued
by ``post`` behind a full window are sequenced before ``seqbus.run`` returns."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from seqbus import _core, run
from seqbus.demo import bus_config, free_udp_port
from examples.pingpong.messages import Ping, PingpongNode, PingView

POSTED = 40


class Poster(PingpongNode):
    """Posts more Pings than the window holds, then stops at once."""

    def on_opened(self) -> None:
        for i in range(POSTED):
            self.post(Ping(id=i, sent_at_ns=0))
        self.stop()


def test_stop_waits_until_posted_and_in_flight_commands_are_sequenced(tmp_path: Path) -> None:
    listen = [f"127.0.0.1:{free_udp_port()}" for _ in range(2)]
    config = tmp_path / "bus.toml"
    text = bus_config(tmp_path, False, listen)
    assert "[node]\n" in text
    config.write_text(text.replace("[node]\n", "[node]\nwindow = 4\n", 1))
    sequencer = _core.Sequencer(str(config))
    try:
        poster = run(Poster, config, "POSTER", start="live", listen=listen[0])
        assert isinstance(poster, Poster) and poster.posted == 0

        # a late joiner rewinds the journal and counts the Pings (bounded wait)
        seen: list[int] = []
        done = threading.Event()

        class Reader(PingpongNode):
            def on_ping(self, msg: PingView, mine: bool) -> None:
                seen.append(msg.id)
                if len(seen) == POSTED:
                    self.stop()

        def deadline() -> None:
            if not done.wait(30):
                done.set()

        timer = threading.Thread(target=deadline, daemon=True)
        timer.start()
        t0 = time.monotonic()
        run(Reader, config, "READER", start="rewind", listen=listen[1], stop=done)
        done.set()
        assert seen == list(range(POSTED)), (
            f"{len(seen)} of {POSTED} posted commands sequenced ({time.monotonic() - t0:.1f} s)"
        )
    finally:
        sequencer.stop()
        assert sequencer.join(10.0)
