"""The asyncio HTTP order gateway (examples/exchange/http_gateway.py) against the running
exchange: a sequencer and a matching engine as processes, the gateway as a process, a real
HTTP client (aiohttp) posting orders 32 at a time.

Every request gets the engine's answer: each HTTP response equals what an independent node,
replaying the session afterwards, reads on the stream for that order (status, reason, stream
time, sequence), every order of the gateway is on the stream exactly once and answered exactly
once — 0 lost — and a window of 4 commands made the gateway's awaitable send wait.
"""

from __future__ import annotations

import asyncio
import random
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from examples.exchange.messages import (
    ExchangeNode,
    NewOrderView,
    OrderAcceptedView,
    OrderRejectedView,
)
from seqbus import run
from tests.conftest import ROOT, Processes, free_tcp_port, seqbus_cli
from tests.transports.harness import tcp_listening, udp_bound, wait_for, write_config

pytestmark = [pytest.mark.slow]

REQUESTS = 400
CONCURRENCY = 32
CLIENT_ID = 7
LIMIT_S = 120.0


class Recorder(ExchangeNode):
    """Reads the session: the gateway's orders and every answer, by order id."""

    def __init__(self) -> None:
        super().__init__()
        self.orders: dict[int, int] = {}  # order id -> times seen
        self.answers: dict[int, list[dict[str, Any]]] = {}

    def on_new_order(self, msg: NewOrderView, mine: bool) -> None:
        if msg.client_id == CLIENT_ID:
            self.orders[msg.order_id] = self.orders.get(msg.order_id, 0) + 1

    def on_order_accepted(self, msg: OrderAcceptedView, mine: bool) -> None:
        self._answer(msg.order_id, {"status": "accepted"}, msg.at)

    def on_order_rejected(self, msg: OrderRejectedView, mine: bool) -> None:
        self._answer(
            msg.order_id,
            {"status": "rejected", "reason": msg.reason.name, "text": msg.text},
            msg.at,
        )

    def _answer(self, order_id: int, answer: dict[str, Any], at: int) -> None:
        entry = {"order_id": order_id, **answer, "at_ns": at, "sequence": self.sequence()}
        self.answers.setdefault(order_id, []).append(entry)


def order(i: int, rng: random.Random) -> dict[str, Any]:
    """Every tenth order names an unknown symbol and every tenth has no quantity: the engine
    rejects those; the rest it accepts (and some trade)."""
    body: dict[str, Any] = {
        "symbol": rng.choice(["AAPL", "MSFT"]),
        "side": rng.choice(["buy", "sell"]),
        "price": 10_000 + rng.randrange(-20, 21),
        "quantity": rng.randrange(1, 50),
    }
    if i % 10 == 3:
        body["symbol"] = "ZZZZ"
    elif i % 10 == 7:
        body["quantity"] = 0
    return body


def expected(i: int) -> tuple[str, str | None]:
    if i % 10 == 3:
        return "rejected", "UnknownSymbol"
    if i % 10 == 7:
        return "rejected", "BadQuantity"
    return "accepted", None


async def post_all(url: str) -> tuple[list[tuple[int, dict[str, Any]]], list[int], dict[str, Any]]:
    rng = random.Random(17)
    bodies = [order(i, rng) for i in range(REQUESTS)]
    gate = asyncio.Semaphore(CONCURRENCY)
    timeout = aiohttp.ClientTimeout(total=LIMIT_S)
    async with aiohttp.ClientSession(timeout=timeout) as http:

        async def one(i: int) -> tuple[int, dict[str, Any]]:
            async with gate, http.post(f"{url}/orders", json=bodies[i]) as response:
                return response.status, await response.json()

        results = await asyncio.gather(*(one(i) for i in range(REQUESTS)))
        bad = []
        for body in (
            b"{",
            b'{"symbol": "AAPL", "side": "up", "price": 1, "quantity": 1}',
            b'{"symbol": "AAPL", "side": "buy", "price": 1, "quantity": -1}',
        ):
            async with http.post(f"{url}/orders", data=body) as response:
                bad.append(response.status)
                assert "error" in await response.json()
        async with http.get(f"{url}/stats") as response:
            stats = await response.json()
    return list(results), bad, stats


def test_http_orders_get_the_engines_answers(tmp_path: Path, processes: Processes) -> None:
    bus = write_config(tmp_path, "tcp", session="HTTPGW")
    config = str(bus.path)
    cli = seqbus_cli()
    sequencer = processes.start("sequencer", [*cli, "sequencer", "-c", config])
    assert wait_for(lambda: tcp_listening(bus.tcp) and udp_bound(bus.upstream), 30), (
        processes.logs()
    )
    assert sequencer.poll() is None, processes.logs()
    engine = processes.start(
        "engine",
        [
            *cli,
            "node",
            "examples.exchange.engine:MatchingEngine",
            "-c",
            config,
            "--account",
            "ME",
            "--path",
            str(ROOT),
            "--rewind",
        ],
    )
    port = free_tcp_port()
    gateway = processes.start(
        "gateway",
        [
            sys.executable,
            "-m",
            "examples.exchange.http_gateway",
            "-c",
            config,
            "--port",
            str(port),
            "--client-id",
            str(CLIENT_ID),
            "--window",
            "4",
        ],
    )
    assert wait_for(lambda: "http gateway: listening" in processes.log("gateway"), 60), (
        processes.logs()
    )

    responses, bad, stats = asyncio.run(post_all(f"http://127.0.0.1:{port}"))

    # every request answered by the engine, as the request asked
    assert [status for status, _ in responses] == [200] * REQUESTS, responses[:5]
    for i, (_, answer) in enumerate(responses):
        status, reason = expected(i)
        assert (answer["status"], answer.get("reason")) == (status, reason), (i, answer)
    ids = [answer["order_id"] for _, answer in responses]
    assert len(set(ids)) == REQUESTS
    assert bad == [400, 400, 400]
    assert stats["answered"] == REQUESTS and stats["pending"] == 0
    assert stats["send_waits"] > 0, "a window of 4 under 32 requests at a time must wait"

    # an independent node replays the session: each response is exactly the engine's answer
    recorder = Recorder()
    stop = threading.Event()
    errors: list[BaseException] = []

    def record() -> None:
        try:
            run(recorder, config, "REC", start="rewind", stop=stop)
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=record)
    thread.start()
    try:
        deadline = time.monotonic() + LIMIT_S
        while not all(i in recorder.answers for i in ids):
            assert not errors and thread.is_alive(), errors
            assert time.monotonic() < deadline, "the recorder did not see every answer"
            time.sleep(0.05)
    finally:
        stop.set()
        thread.join(30)
    assert not errors, errors
    assert sorted(recorder.orders) == sorted(ids)
    assert set(recorder.orders.values()) == {1}, "each order on the stream exactly once"
    for _, answer in responses:
        assert recorder.answers[answer["order_id"]] == [answer]

    # SIGTERM: the gateway closes its node cleanly
    processes.kill(gateway, signal.SIGTERM)
    assert processes.wait(gateway, 30) == 0, processes.logs()
    assert f"stopped after {REQUESTS} answers" in processes.log("gateway")
    assert engine.poll() is None, processes.logs()
