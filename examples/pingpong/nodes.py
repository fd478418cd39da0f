"""The nodes of ``seqbus demo --pingpong``: a pinger and a ponger bouncing ``pingpong`` messages.

The pinger keeps one Ping in flight, times each round trip on its own clock (the only
non-deterministic use of time here, and it changes no state), and when ``SEQBUS_DEMO_COUNT``
round trips are done writes a JSON summary to ``SEQBUS_DEMO_OUT`` and stops.
"""

from __future__ import annotations

import json
import os
import sys
import time

from .messages import PingpongNode, PingView, PongView

__all__ = ["Pinger", "Ponger"]

PRINTED = 3


class Ponger(PingpongNode):
    """Answers every Ping with a Pong of the same id."""

    def on_ping(self, msg: PingView, mine: bool) -> None:
        self.send_pong(id=msg.id, ping_sent_at_ns=msg.sent_at_ns)
        if msg.id < PRINTED:
            print(f"ponger  seq={self.sequence()} t={self.sequencer_time()} Ping id={msg.id}")


class Pinger(PingpongNode):
    """Sends Pings one at a time and measures the round trip through the sequencer."""

    def __init__(self) -> None:
        super().__init__()
        self.count = int(os.environ.get("SEQBUS_DEMO_COUNT", "10000"))
        self.out = os.environ.get("SEQBUS_DEMO_OUT", "")
        self.rtts: list[int] = []
        self.next_id = 0
        self.started = 0.0

    def on_opened(self) -> None:
        self.started = time.perf_counter()
        self._ping()

    def _ping(self) -> None:
        self.send_ping(id=self.next_id, sent_at_ns=time.perf_counter_ns())
        self.next_id += 1

    def on_pong(self, msg: PongView, mine: bool) -> None:
        if msg.id != self.next_id - 1:
            return
        self.rtts.append(time.perf_counter_ns() - msg.ping_sent_at_ns)
        if msg.id < PRINTED:
            print(f"pinger  seq={self.sequence()} t={self.sequencer_time()} Pong id={msg.id}")
        if len(self.rtts) < self.count:
            self._ping()
            return
        elapsed = time.perf_counter() - self.started
        summary = {"round_trips": len(self.rtts), "elapsed_s": elapsed, "rtt_ns": self.rtts}
        if self.out:
            with open(self.out, "w") as fh:
                json.dump(summary, fh)
        sys.stdout.flush()
        self.stop()
