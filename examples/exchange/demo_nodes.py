"""The exchange nodes as ``seqbus demo`` runs them: the example classes plus reports written to
files named by the environment.

* ``EXCHANGE_REPORT_DIR``: where each node writes ``<account>-<instance>.json``.
* ``EXCHANGE_CHECKPOINT_AT``: after sending that many orders the gateway sends a checkpoint
  marker (a cancel of order 1); every engine writes ``<account>-<instance>.checkpoint.json``
  (its state hash) when it handles it, so primary, hot backup and late joiner describe the
  same point of the stream. The demo kills the primary once its checkpoint is written.
* The gateway also writes ``progress`` (answers so far) every 100 answers, and its report
  (with order → answer latencies from its own clock) at the end of the run (below).
* ``EXCHANGE_HOLD_AT``: answer counts, comma-separated. At the k-th, once that many orders are
  answered, the gateway writes ``hold-k`` and keeps only ``EXCHANGE_HOLD_IN_FLIGHT`` orders in
  flight (2 by default; 0 stops it) until a file ``release-k`` appears (looked for every 5 ms on
  its local clock): the demo kills the leading sequencer meanwhile, so the takeover happens with
  orders in flight, however fast the run; a test stops the gateway at each point it acts at.
* When every order is answered the gateway sends an end-of-run marker (a cancel of order 0).
  Engines write their report when they handle it, answer it (it cancels no order) and stop
  once their answer is in the stream. The gateway writes its report when that answer is in
  the stream: every command the engines sent is sequenced before it, so the report's counts
  are the stream's (a last order's trades come after its answer, timers expire orders until
  the engines stop). Market data publishes the whole book at the marker and writes its report
  once every update it published is in the stream.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import struct
import time
from pathlib import Path
from typing import Any

from seqbus.node import Sendable

from .messages import (
    BookUpdateView,
    CancelOrder,
    CancelOrderView,
    NewOrder,
    NewOrderView,
    OrderAcceptedView,
    OrderCancelledView,
    OrderRejectedView,
    TradeView,
)

from .engine import MatchingEngine
from .gateway import IN_FLIGHT, OrderGateway
from .market_data import MarketDataPublisher

__all__ = ["DemoEngine", "DemoGateway", "DemoMarketData"]

log = logging.getLogger("seqbus.examples.exchange")


def _bus_stats(node: Any) -> dict[str, int]:
    """The node's protocol counters (retransmissions, gaps, NAKs…), when it runs on a bus."""
    client = getattr(node, "_client", None)
    stats = getattr(client, "stats", None)
    return dict(stats()) if callable(stats) else {}


def _write(name: str, data: dict[str, Any]) -> None:
    folder = Path(os.environ["EXCHANGE_REPORT_DIR"])
    tmp = folder / f".{name}.tmp"
    tmp.write_text(json.dumps(data))
    tmp.replace(folder / name)


END_MARKER = 0
CHECKPOINT_MARKER = 1
#: What DemoMarketData digests per message: sequence, sequencer time, key field.
SEEN = struct.Struct("<QQQ")


class DemoEngine(MatchingEngine):
    ending = False

    def on_cancel_order(self, msg: CancelOrderView, mine: bool) -> None:
        super().on_cancel_order(msg, mine)  # the end marker cancels no order: it is answered
        if msg.order_id == CHECKPOINT_MARKER:
            self._report("checkpoint.json")
        elif msg.order_id == END_MARKER:
            self._report("json")
            self.ending = True  # nothing more is sent; stop once the answer is in the stream

    def on_order_rejected(self, msg: OrderRejectedView, mine: bool) -> None:
        if self.ending and mine and msg.order_id == END_MARKER:
            self.stop()

    def _expire(self, order_id: int) -> None:
        if not self.ending:
            super()._expire(order_id)

    def _report(self, suffix: str) -> None:
        _write(
            f"{self.account}-{self.instance}.{suffix}",
            {
                "state_hash": self.state_hash(),
                "handled": self.handled,
                "trades": self.trades,
                "last_sequence": self.sequence(),
                "bus": _bus_stats(self),
            },
        )


class DemoMarketData(MarketDataPublisher):
    """The publisher, also recording what it saw of every exchange message type: a count and a
    digest of (sequence, sequencer time, key field) in stream order. Its report is what a
    session archive of the run must decode to (tests/spark/test_exchange_run.py)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: dict[str, int] = {}
        self.digests: dict[str, Any] = {}
        #: BookUpdates of this node's account seen in the stream; after the end marker it
        #: reports once they number what it published.
        self.own_updates = 0
        self.ending = False

    def _saw(self, name: str, key: int) -> None:
        self.seen[name] = self.seen.get(name, 0) + 1
        digest = self.digests.get(name)
        if digest is None:
            digest = self.digests[name] = hashlib.blake2b(digest_size=16)
        digest.update(SEEN.pack(self.sequence(), self.sequencer_time(), key))

    def on_new_order(self, msg: NewOrderView, mine: bool) -> None:
        super().on_new_order(msg, mine)
        self._saw("exchange.NewOrder", msg.order_id)

    def on_order_accepted(self, msg: OrderAcceptedView, mine: bool) -> None:
        super().on_order_accepted(msg, mine)
        self._saw("exchange.OrderAccepted", msg.order_id)

    def on_order_rejected(self, msg: OrderRejectedView, mine: bool) -> None:
        super().on_order_rejected(msg, mine)
        self._saw("exchange.OrderRejected", msg.order_id)

    def on_order_cancelled(self, msg: OrderCancelledView, mine: bool) -> None:
        super().on_order_cancelled(msg, mine)
        self._saw("exchange.OrderCancelled", msg.order_id)

    def on_trade(self, msg: TradeView, mine: bool) -> None:
        super().on_trade(msg, mine)
        self._saw("exchange.Trade", msg.trade_id)

    def on_book_update(self, msg: BookUpdateView, mine: bool) -> None:
        self._saw("exchange.BookUpdate", sum(level.quantity for level in msg.levels))
        if mine:
            self.own_updates += 1
            self._maybe_finish()

    def on_cancel_order(self, msg: CancelOrderView, mine: bool) -> None:
        self._saw("exchange.CancelOrder", msg.order_id)
        if msg.order_id == END_MARKER:
            # the final book, then the report once every update this node published is back
            # in the stream: the run always holds BookUpdates, however short it was
            self.ending = True
            self.publish_book()
            self._maybe_finish()

    def _maybe_finish(self) -> None:
        if not self.ending or self.own_updates < self.published:
            return
        _write(
            f"{self.account}-{self.instance}.json",
            {
                "updates": self.published,
                "last_sequence": self.sequence(),
                "seen": {
                    name: {"count": n, "digest": self.digests[name].hexdigest()}
                    for name, n in self.seen.items()
                },
            },
        )
        self.stop()


class DemoGateway(OrderGateway):
    """The gateway with latencies, progress, the checkpoint marker and the hold (above)."""

    def __init__(self) -> None:
        super().__init__()
        self.sent_at: dict[int, int] = {}
        self.latencies: list[int] = []
        #: wall-clock time (ns since the epoch) of every answer, and the sequencer time it
        #: carries: the demo finds when the bus stood still (its sequencer takeover) from them
        self.answered_at: list[int] = []
        self.answered_sequencer_ns: list[int] = []
        self.started = 0.0
        self.elapsed_s = 0.0
        self.checkpoint_at = int(os.environ.get("EXCHANGE_CHECKPOINT_AT", "0"))
        self.hold_at = sorted(
            int(n) for n in os.environ.get("EXCHANGE_HOLD_AT", "").split(",") if n.strip()
        )
        self.hold_in_flight = int(os.environ.get("EXCHANGE_HOLD_IN_FLIGHT", "2"))
        #: holds reached so far, and whether the last one is still waiting for its release
        self.holds = 0
        self.holding = False

    def on_opened(self) -> None:
        self.started = time.perf_counter()
        super().on_opened()

    def _release(self) -> None:
        if (Path(os.environ["EXCHANGE_REPORT_DIR"]) / f"release-{self.holds}").exists():
            self.holding = False
            self.in_flight_limit = IN_FLIGHT
            log.info("gateway: release-%d found, sending again", self.holds)
            self.pump()
        else:
            self.set_local_timer(0.005, self._release)

    def post(self, message: Sendable) -> None:
        if isinstance(message, NewOrder):
            self.sent_at[message.order_id] = time.perf_counter_ns()
        super().post(message)
        if isinstance(message, NewOrder) and self.sent + 1 == self.checkpoint_at:
            super().post(CancelOrder(order_id=CHECKPOINT_MARKER, client_id=self.client_id))

    def _answer(self, order_id: int) -> None:
        sent = self.sent_at.pop(order_id, None)
        if sent is not None:
            self.latencies.append(time.perf_counter_ns() - sent)
            self.answered_at.append(time.time_ns())
            self.answered_sequencer_ns.append(self.sequencer_time())
        super()._answer(order_id)
        if len(self.answers) % 100 == 0:
            _write("progress", {"answered": len(self.answers)})
        if (
            not self.holding
            and self.holds < len(self.hold_at)
            and len(self.answers) >= self.hold_at[self.holds]
        ):
            self.holds += 1
            self.holding = True
            self.in_flight_limit = self.hold_in_flight
            _write(f"hold-{self.holds}", {"answered": len(self.answers)})
            log.info(
                "gateway: holding at %d answers with at most %d orders in flight until "
                "release-%d appears in %s",
                len(self.answers),
                self.hold_in_flight,
                self.holds,
                os.environ["EXCHANGE_REPORT_DIR"],
            )
            self.set_local_timer(0.005, self._release)
        if self.done and not self.elapsed_s:
            # every order answered: the end marker goes out; the report is written when the
            # engines' answer to it is in the stream, so that its counts hold every trade and
            # cancel the engines sent (the last order's trades come after its answer, timers
            # may expire orders until the engines stop)
            self.elapsed_s = time.perf_counter() - self.started
            self.post(CancelOrder(order_id=END_MARKER, client_id=self.client_id))

    def on_order_rejected(self, msg: OrderRejectedView, mine: bool) -> None:
        super().on_order_rejected(msg, mine)
        # the engines' answer to the end marker: every command they sent before it is in the
        # stream before it (one account's commands are sequenced in order), and after it they
        # send nothing
        if msg.order_id != END_MARKER or not self.elapsed_s:
            return
        _write(
            f"{self.account}-{self.instance}.json",
            {
                "orders": self.total,
                "answered": len(self.answers),
                "lost": len(self.lost()),
                "accepted": self.accepted,
                "rejected": self.rejected,
                "cancelled": self.cancelled,
                "trades": self.trades,
                "end_sequence": self.sequence(),
                "elapsed_s": self.elapsed_s,
                "latency_ns": self.latencies,
                "bus": _bus_stats(self),
                "answered_at_ns": self.answered_at,
                "answered_sequencer_ns": self.answered_sequencer_ns,
            },
        )
        self.stop()
