"""A small exchange on seqbus (messages: ``exchange.idl``, which imports ``common.idl``,
generated into :mod:`examples.exchange.messages`).

* :mod:`.gateway` — ``OrderGateway``: sends a seeded flow of orders and cancels, and checks that
  every order gets exactly one answer.
* :mod:`.engine` — ``MatchingEngine``: limit order books with price-time priority; a
  deterministic state machine (it reads only the stream, ``sequencer_time()`` and deterministic
  timers), so a hot backup (same account, instance 2) and a late joiner reach the same
  :meth:`~.engine.MatchingEngine.state_hash`.
* :mod:`.market_data` — ``MarketDataPublisher``: rebuilds price levels from the engine's
  output and publishes ``BookUpdate`` for changed levels on a deterministic timer.

Run them as processes (``seqbus node examples.exchange.engine:MatchingEngine -c bus.toml
--account ME --instance 1 --rewind``) or together on the test harness (tests/sdk/test_exchange.py).
"""
