"""An HTTP order-entry gateway: ``POST /orders`` turns a JSON order into a ``NewOrder`` on the
bus and answers with the matching engine's reply (``OrderAccepted`` or ``OrderRejected``).

The HTTP server (aiohttp) and the bus node (``seqbus.aio``) share one asyncio loop: a request
handler sends the order with ``await bus.send(...)`` — which waits while the node's window of
in-flight commands is full — and awaits a future the node's ``on_order_accepted`` /
``on_order_rejected`` handler resolves when the engine's answer comes down the stream.

Order ids are the gateway's own: ``client_id * 10**9 + n``. The gateway starts by rewinding
the session, so it sees the orders its account sent before (``on_new_order``, ``mine``) and
numbers on after them; it serves HTTP once it has caught up (``on_rewound``).

Run it beside the exchange's sequencer and engine (``pip install 'seqbus[http-gateway]'``)::

    python -m examples.exchange.http_gateway -c bus.toml --port 8080
    curl -s localhost:8080/orders -d '{"symbol": "AAPL", "side": "buy", "price": 10025,
                                        "quantity": 10}'
    {"order_id": 7000000000, "status": "accepted", "at_ns": ..., "sequence": ...}

``price`` is in units of ``10**PRICE_EXPONENT`` (cents). The engine's checks decide the rest:
an unknown symbol, a price or quantity of 0, a halted market come back as ``"rejected"`` with
the engine's reason. A body that is not such an order gets 400 naming the field; no answer
within ``ANSWER_TIMEOUT_S`` gets 504 (the order may still be answered on the stream).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Annotated, Any, Literal

import msgspec
from aiohttp import web

from seqbus import SeqbusError, aio

from .engine import PRICE_EXPONENT
from .messages import (
    ExchangeNode,
    ExecInst,
    NewOrder,
    NewOrderView,
    OrderAcceptedView,
    OrderRejectedView,
    Price,
    Side,
)

__all__ = ["HttpGateway", "OrderRequest", "make_app", "serve"]

#: Orders of one gateway: ``client_id * ORDER_ID_BASE + n``.
ORDER_ID_BASE = 1_000_000_000
ANSWER_TIMEOUT_S = 10.0
CONNECTION_KEY = web.AppKey("connection", aio.Connection["HttpGateway"])


class OrderRequest(msgspec.Struct, forbid_unknown_fields=True):
    """The body of ``POST /orders``."""

    symbol: Annotated[str, msgspec.Meta(min_length=1, max_length=8, pattern="^[ -~]+$")]
    side: Literal["buy", "sell"]
    #: In units of ``10**PRICE_EXPONENT``.
    price: Annotated[int, msgspec.Meta(ge=-(2**63), le=2**63 - 1)]
    quantity: Annotated[int, msgspec.Meta(ge=0, lt=2**32)]
    post_only: bool = False


class HttpGateway(ExchangeNode):
    """The bus side of the gateway: order ids, and the engine's answers to its orders."""

    def __init__(self, client_id: int = 7) -> None:
        super().__init__()
        self.client_id = client_id
        self.next_n = 0
        #: Orders sent and not answered yet: the request handlers await these.
        self.pending: dict[int, asyncio.Future[dict[str, Any]]] = {}
        self.answered = 0

    def new_order_id(self) -> int:
        order_id = self.client_id * ORDER_ID_BASE + self.next_n
        self.next_n += 1
        return order_id

    def on_new_order(self, msg: NewOrderView, mine: bool) -> None:
        # the orders this account sent before (replayed at start): number on after them
        if mine and msg.client_id == self.client_id:
            self.next_n = max(self.next_n, msg.order_id - self.client_id * ORDER_ID_BASE + 1)

    def on_order_accepted(self, msg: OrderAcceptedView, mine: bool) -> None:
        self._answer(msg.order_id, {"status": "accepted"}, msg.at)

    def on_order_rejected(self, msg: OrderRejectedView, mine: bool) -> None:
        self._answer(
            msg.order_id,
            {"status": "rejected", "reason": msg.reason.name, "text": msg.text},
            msg.at,
        )

    def _answer(self, order_id: int, answer: dict[str, Any], at: int) -> None:
        future = self.pending.pop(order_id, None)
        if future is None or future.done():
            return  # another client's order, or its request gave up
        self.answered += 1
        future.set_result(
            {"order_id": order_id, **answer, "at_ns": at, "sequence": self.sequence()}
        )


async def post_order(request: web.Request) -> web.Response:
    bus = request.app[CONNECTION_KEY]
    gateway = bus.node
    try:
        order = msgspec.json.decode(await request.read(), type=OrderRequest)
    except msgspec.DecodeError as exc:  # ValidationError included: it names the field
        return web.json_response({"error": str(exc)}, status=400)
    order_id = gateway.new_order_id()
    answer: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()
    gateway.pending[order_id] = answer
    try:
        await bus.send(
            NewOrder(
                order_id=order_id,
                client_id=gateway.client_id,
                symbol=order.symbol,
                side=Side.Buy if order.side == "buy" else Side.Sell,
                price=Price(mantissa=order.price, exponent=PRICE_EXPONENT),
                quantity=order.quantity,
                inst=ExecInst.PostOnly if order.post_only else ExecInst(0),
                account="http",
            )
        )
        result = await asyncio.wait_for(answer, ANSWER_TIMEOUT_S)
    except TimeoutError:
        return web.json_response(
            {
                "error": f"no answer from the engine within {ANSWER_TIMEOUT_S:g} s",
                "order_id": order_id,
            },
            status=504,
        )
    except SeqbusError as exc:
        return web.json_response({"error": str(exc), "order_id": order_id}, status=503)
    finally:
        gateway.pending.pop(order_id, None)
    return web.json_response(result)


async def get_stats(request: web.Request) -> web.Response:
    bus = request.app[CONNECTION_KEY]
    return web.json_response(
        {
            "answered": bus.node.answered,
            "pending": len(bus.node.pending),
            "send_waits": bus.send_waits,
            "sequence": bus.node.sequence(),
        }
    )


def make_app(bus: aio.Connection[HttpGateway]) -> web.Application:
    app = web.Application()
    app[CONNECTION_KEY] = bus
    app.router.add_post("/orders", post_order)
    app.router.add_get("/stats", get_stats)
    return app


async def serve(
    config: str,
    *,
    host: str = "127.0.0.1",
    port: int = 8080,
    account: str = "HG",
    instance: int = 1,
    client_id: int = 7,
    window: int | None = None,
) -> HttpGateway:
    """Run the gateway until SIGINT/SIGTERM (or the bus connection fails)."""
    async with aio.connect(
        HttpGateway(client_id), config, account, instance, start="rewind", window=window
    ) as bus:
        await bus.rewound()
        runner = web.AppRunner(make_app(bus))
        await runner.setup()
        try:
            await web.TCPSite(runner, host, port).start()
            print(f"http gateway: listening on http://{host}:{port}", flush=True)
            with aio.close_on_signals(bus):
                return await bus.wait_closed()
        finally:
            await runner.cleanup()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m examples.exchange.http_gateway",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    parser.add_argument("-c", "--config", required=True, help="the bus configuration")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8080)
    parser.add_argument("--account", default="HG")
    parser.add_argument("--instance", type=int, default=1)
    parser.add_argument("--client-id", type=int, default=7)
    parser.add_argument(
        "--window", type=int, default=None, help="most commands in flight (default: node.window)"
    )
    args = parser.parse_args(argv)
    try:
        gateway = asyncio.run(
            serve(
                args.config,
                host=args.host,
                port=args.port,
                account=args.account,
                instance=args.instance,
                client_id=args.client_id,
                window=args.window,
            )
        )
    except SeqbusError as exc:
        print(f"http gateway: error: {exc}", file=sys.stderr)
        return 1
    print(f"http gateway: stopped after {gateway.answered} answers", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
