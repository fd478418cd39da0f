"""The requester: sends quote requests and checks their answers.

``rfq-request -c bus.toml --account CLIENT --count 1000`` sends ``count`` requests (every
tenth for a symbol the dealer does not quote), waits until each has exactly one answer, prints
a JSON summary and exits with status 0 when every answer is the dealer's price, else 1.
"""

from __future__ import annotations

import argparse
import json
import sys

import seqbus
from rfq.dealer import MIDS, price
from rfq.messages import QuoteRefusedView, QuoteRequest, QuoteView, RfqNode, Side

__all__ = ["Requester", "main"]

UNKNOWN_SYMBOL = "GME"


class Requester(RfqNode):
    """Sends ``count`` requests on opening; stops once every one is answered."""

    def __init__(self, count: int) -> None:
        super().__init__()
        self.count = count
        self.requests: dict[int, tuple[str, Side, int]] = {}
        self.answers: dict[int, int] = {}
        self.wrong: list[str] = []

    def on_opened(self) -> None:
        symbols = sorted(MIDS)
        for n in range(self.count):
            symbol = UNKNOWN_SYMBOL if n % 10 == 9 else symbols[n % len(symbols)]
            side = Side.Buy if n % 2 else Side.Sell
            quantity = 100 * (1 + n % 50)
            self.requests[n] = (symbol, side, quantity)
            self.post(QuoteRequest(request_id=n, symbol=symbol, side=side, quantity=quantity))

    def _answered(self, request_id: int) -> None:
        self.answers[request_id] = self.answers.get(request_id, 0) + 1
        if len(self.answers) == self.count:
            self.stop()

    def on_quote(self, msg: QuoteView, mine: bool) -> None:
        want = self.requests.get(msg.request_id)
        if want is None:
            self.wrong.append(f"quote for unknown request {msg.request_id}")
        elif (msg.symbol, msg.quantity) != (want[0], want[2]) or (msg.bid, msg.ask) != price(
                *want):
            self.wrong.append(f"request {msg.request_id}: {msg.to_dict()} for {want}")
        self._answered(msg.request_id)

    def on_quote_refused(self, msg: QuoteRefusedView, mine: bool) -> None:
        want = self.requests.get(msg.request_id)
        if want is None or want[0] != UNKNOWN_SYMBOL:
            self.wrong.append(f"request {msg.request_id} refused: {msg.reason}")
        self._answered(msg.request_id)

    def summary(self) -> dict[str, object]:
        return {
            "requests": len(self.requests),
            "answered": len(self.answers),
            "duplicates": sum(n - 1 for n in self.answers.values()),
            "refused_expected": sum(1 for s, _, _ in self.requests.values()
                                    if s == UNKNOWN_SYMBOL),
            "wrong": self.wrong[:10],
        }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="rfq-request", description=__doc__.splitlines()[0])
    ap.add_argument("-c", "--config", required=True, help="bus configuration (TOML)")
    ap.add_argument("--account", default="CLIENT", help="the requester's account")
    ap.add_argument("--count", type=int, default=1000, help="requests to send")
    ap.add_argument("--listen", metavar="HOST:PORT", help="udp-unicast receive address")
    args = ap.parse_args(argv)
    node = Requester(args.count)
    seqbus.run(node, args.config, args.account, listen=args.listen)
    summary = node.summary()
    print(json.dumps(summary))
    ok = (summary["answered"] == summary["requests"] == args.count
          and summary["duplicates"] == 0 and not node.wrong)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
