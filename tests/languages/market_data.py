"""The Python market-data node of the cross-language test: the demo's DemoMarketData, which
also writes its book's state hash (``MarketDataPublisher.state_hash``) beside its report, to
compare with the C++ and Java instances of its account."""

from __future__ import annotations

from examples.exchange.demo_nodes import DemoMarketData, _write

__all__ = ["MarketDataWithState"]


class MarketDataWithState(DemoMarketData):
    def _maybe_finish(self) -> None:
        super()._maybe_finish()
        if self.stopped:  # the report was written at this message
            _write(
                f"{self.account}-{self.instance}.state.json",
                {"state_hash": self.state_hash(), "last_sequence": self.sequence()},
            )
