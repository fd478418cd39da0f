"""The dealer: a deterministic quoting node.

Prices come only from the stream: the request, the dealer's table and ``sequencer_time()``.
So a hot backup (same account, another instance) or a dealer rewinding the session sends the
same answers as the primary, and the sequencer keeps one copy of each.

Run it with ``seqbus node rfq.dealer:Dealer -c bus.toml --account DEALER --rewind``.
"""

from __future__ import annotations

from rfq.messages import Quote, QuoteRefused, QuoteRequestView, RfqNode, Side

__all__ = ["MIDS", "VALID_NS", "Dealer", "price"]

#: Mid prices in ticks of the symbols the dealer makes a market in.
MIDS = {"AAPL": 18_950, "MSFT": 41_220, "NVDA": 12_875, "TSLA": 24_410}
#: How long a quote is good for, in stream time.
VALID_NS = 2_000_000_000


def price(symbol: str, side: Side, quantity: int) -> tuple[int, int]:
    """Bid and ask in ticks: the spread widens by a tick per 1,000 shares, skewed by one tick
    away from the side the client asks for."""
    mid = MIDS[symbol]
    half = 1 + quantity // 1_000
    skew = 1 if side == Side.Buy else -1
    return mid - half + skew, mid + half + skew


class Dealer(RfqNode):
    """Answers each request once; ``quoted`` and ``refused`` count the answers."""

    def __init__(self) -> None:
        super().__init__()
        self.quoted = 0
        self.refused = 0

    def on_quote_request(self, msg: QuoteRequestView, mine: bool) -> None:
        symbol = msg.symbol
        if symbol not in MIDS:
            self.refused += 1
            self.post(QuoteRefused(request_id=msg.request_id,
                                   reason=f"no market in {symbol!r}"))
            return
        bid, ask = price(symbol, msg.side, msg.quantity)
        self.quoted += 1
        self.post(Quote(request_id=msg.request_id, symbol=symbol, bid=bid, ask=ask,
                        quantity=msg.quantity, valid_until=self.sequencer_time() + VALID_NS))
