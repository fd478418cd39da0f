"""Nodes of the end-to-end stream test: two senders and a listener, all hashing the stream.

Every node handles ``Ping`` and folds (sequence, sequencer time, id, sent_at) of each one into a
BLAKE2b hash; when it has seen ``SEQBUS_E2E_TOTAL`` Pings (and the file ``SEQBUS_E2E_RELEASE`` exists,
when that is set) it writes a JSON report to ``SEQBUS_E2E_OUT`` and stops. Senders send ``SEQBUS_E2E_SHARE`` Pings each, ids
``index * 10**9 + n``, keeping the in-flight window full: they send on opening (once the file
``SEQBUS_E2E_GO`` exists, when that is set) and again each time one of their own Pings comes
back, and a full window (``BackPressureError``) just waits.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct

from examples.pingpong.messages import Ping, PingpongNode, PingView

from seqbus.errors import BackPressureError

_PACK = struct.Struct("<QQQQ")


class Listener(PingpongNode):
    def __init__(self) -> None:
        super().__init__()
        self.total = int(os.environ["SEQBUS_E2E_TOTAL"])
        self.out = os.environ["SEQBUS_E2E_OUT"]
        self.hash = hashlib.blake2b(digest_size=16)
        self.seen = 0
        self.last_seq = 0
        self.order_violations = 0
        self.next_from: dict[int, int] = {}
        self.out_of_order_per_sender = 0
        self.release = os.environ.get("SEQBUS_E2E_RELEASE", "")
        self.ticks = 0

    def on_opened(self) -> None:
        print(f"{self.account}: opened", flush=True)
        self.set_local_timer(0.1, self.tick)

    def tick(self) -> None:
        """Ten times a second: finish once released; once a second: progress for the logs."""
        self.ticks += 1
        if self.ticks % 10 == 0:
            client = getattr(self, "_client", None)
            stats = dict(client.stats()) if client is not None and hasattr(client, "stats") else {}
            print(f"{self.account}: seen={self.seen} sent={getattr(self, 'sent', 0)} {stats}", flush=True)
        self.maybe_finish()
        if not self.stopped:
            self.set_local_timer(0.1, self.tick)

    def maybe_finish(self) -> None:
        """Stop once every Ping is seen and the test has released the node (file exists)."""
        if self.seen == self.total and (not self.release or os.path.exists(self.release)):
            self.report()
            self.stop()

    def on_ping(self, msg: PingView, mine: bool) -> None:
        seq = self.sequence()
        if seq <= self.last_seq:
            self.order_violations += 1
        self.last_seq = seq
        sender, n = divmod(msg.id, 10**9)
        if self.next_from.get(sender, 0) != n:
            self.out_of_order_per_sender += 1
        self.next_from[sender] = n + 1
        self.hash.update(_PACK.pack(seq, self.sequencer_time(), msg.id, msg.sent_at_ns))
        self.seen += 1
        self.after_ping(mine)
        if self.seen == self.total:
            self.maybe_finish()

    def after_ping(self, mine: bool) -> None:
        pass

    def report(self) -> None:
        client = getattr(self, "_client", None)
        transport = dict(client.stats()) if client is not None and hasattr(client, "stats") else {}
        with open(self.out, "w") as fh:
            json.dump(
                {
                    "account": self.account,
                    "seen": self.seen,
                    "hash": self.hash.hexdigest(),
                    "last_seq": self.last_seq,
                    "order_violations": self.order_violations,
                    "out_of_order_per_sender": self.out_of_order_per_sender,
                    "per_sender": self.next_from,
                    "transport": transport,
                },
                fh,
            )


class Sender(Listener):
    def __init__(self) -> None:
        super().__init__()
        self.index = int(os.environ["SEQBUS_E2E_INDEX"])
        self.share = int(os.environ["SEQBUS_E2E_SHARE"])
        self.sent = 0
        self.go = os.environ.get("SEQBUS_E2E_GO", "")

    def on_opened(self) -> None:
        super().on_opened()
        if not self.go:
            self.pump()

    def tick(self) -> None:
        if self.go and self.sent == 0 and os.path.exists(self.go):
            self.pump()
        super().tick()

    def after_ping(self, mine: bool) -> None:
        if mine:
            self.pump()

    def pump(self) -> None:
        while self.sent < self.share:
            try:
                self.send(Ping(id=self.index * 10**9 + self.sent, sent_at_ns=self.sent))
            except BackPressureError:
                return
            self.sent += 1
