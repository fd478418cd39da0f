"""The exchange nodes as ``seqbus demo --exchange`` runs them: the example classes plus
reports written to files named by the environment.

* ``EXCHANGE_REPORT_DIR``: where each node writes ``<account>-<instance>.json``.
* The gateway also writes ``progress`` (answers so far) every 100 answers, and its report
  (with order → answer latencies from its own clock) once every order is answered.
* When every order is answered the gateway sends an end-of-run marker (a cancel of order 0);
  every engine writes its state hash when it handles the marker, so the hashes of a hot
  backup and a late joiner describe the same point of the stream. A late joiner (instance 3)
  then stops.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from exchange import CancelOrder, CancelOrderView, NewOrder

from examples.exchange.engine import MatchingEngine
from examples.exchange.gateway import OrderGateway

__all__ = ["DemoEngine", "DemoGateway"]


def _write(name: str, data: dict[str, Any]) -> None:
    folder = Path(os.environ["EXCHANGE_REPORT_DIR"])
    tmp = folder / f".{name}.tmp"
    tmp.write_text(json.dumps(data))
    tmp.replace(folder / name)


END_MARKER = 0


class DemoEngine(MatchingEngine):
    def on_cancel_order(self, msg: CancelOrderView, mine: bool) -> None:
        super().on_cancel_order(msg, mine)
        if msg.order_id == END_MARKER:
            self._report()
            if self.instance == 3:
                self.stop()

    def _report(self) -> None:
        _write(
            f"{self.account}-{self.instance}.json",
            {
                "state_hash": self.state_hash(),
                "handled": self.handled,
                "trades": self.trades,
                "last_sequence": self.sequence(),
            },
        )


class DemoGateway(OrderGateway):
    def __init__(self) -> None:
        super().__init__()
        self.sent_at: dict[int, int] = {}
        self.latencies: list[int] = []
        self.started = 0.0

    def on_opened(self) -> None:
        self.started = time.perf_counter()
        super().on_opened()

    def post(self, message: object) -> None:
        if isinstance(message, NewOrder):
            self.sent_at[message.order_id] = time.perf_counter_ns()
        super().post(message)

    def _answer(self, order_id: int) -> None:
        sent = self.sent_at.pop(order_id, None)
        if sent is not None:
            self.latencies.append(time.perf_counter_ns() - sent)
        super()._answer(order_id)
        if len(self.answers) % 100 == 0:
            _write("progress", {"answered": len(self.answers)})
        if self.done:
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
                    "elapsed_s": time.perf_counter() - self.started,
                    "latency_ns": self.latencies,
                },
            )
            self.post(CancelOrder(order_id=END_MARKER, client_id=self.client_id))
            self.stop()
