"""The exchange example on the deterministic harness: a gateway, a matching engine with a hot
backup, market data and a late joiner."""

from __future__ import annotations

from examples.exchange.engine import MatchingEngine
from examples.exchange.gateway import OrderGateway
from examples.exchange.market_data import MarketDataPublisher
from seqbus.testing import Harness

SECOND = 1_000_000_000


def test_hot_backup_takes_over_with_zero_lost_orders_and_a_late_joiner_agrees() -> None:
    bus = Harness(seed=21)
    primary = bus.add(MatchingEngine, "ME", 1, start="rewind")
    backup = bus.add(MatchingEngine, "ME", 2, start="rewind")
    market_data = bus.add(MarketDataPublisher, "MD", 1, start="rewind")
    gateway = bus.add(OrderGateway(orders=600, seed=3), "GW", 1, start="rewind")

    bus.run(until=lambda: len(gateway.answers) >= 250, for_ns=30 * SECOND)
    assert primary.trades > 0
    bus.kill(primary)  # mid-run: the backup's identical commands now count
    bus.run(until=lambda: gateway.done, for_ns=30 * SECOND)
    assert gateway.lost() == []
    assert gateway.accepted + gateway.rejected == 600
    # market data publishes every 50 ms of stream time (idle clock ticks move it on)
    bus.run(until=lambda: market_data.published > 0, for_ns=10 * SECOND)

    late = bus.add(MatchingEngine, "ME", 3, start="rewind")
    late_md = bus.add(MarketDataPublisher, "MD", 2, start="rewind")
    # caught up: every order handled, and told so (on_rewound comes once the stream's end is
    # known, from the next heartbeat or live packet)
    bus.run(until=lambda: late.handled == backup.handled and not late.is_rewinding,
            for_ns=10 * SECOND)
    bus.settle(late, backup)
    bus.settle(late_md, market_data)
    assert late.state_hash() == backup.state_hash()
    assert late.trades == backup.trades > 0
    assert late_md.state_hash() == market_data.state_hash()
    assert market_data.published > 0


def test_the_same_seed_gives_the_same_session() -> None:
    def session() -> tuple[str, int, int]:
        bus = Harness(seed=8)
        engine = bus.add(MatchingEngine, "ME", 1, start="rewind")
        gateway = bus.add(OrderGateway(orders=200, seed=4), "GW", 1, start="rewind")
        bus.run(until=lambda: gateway.done, for_ns=30 * SECOND)
        return engine.state_hash(), engine.trades, bus.now_ns

    assert session() == session()
