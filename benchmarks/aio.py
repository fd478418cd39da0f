"""The asyncio node (``seqbus.aio``) beside a blocking node, measured in the same run.

    python -m benchmarks.aio [--quick] [--json]

Round trip: a node sends a Ping and waits until its own Ping comes back in the stream (node →
sequencer → node), one in flight; the asyncio node with ``await connection.send(...)`` and a
future its ``on_ping`` resolves, the baseline a blocking node polling its ``NodeClient``
(``Node.poll_once``, as ``seqbus.run`` does). Both run in this process against the same
sequencer (a Rust thread here) over udp-unicast on loopback (udp-multicast inside the network
namespace of ``make bench``), with the default idle strategy (``hybrid``). Also the CPU time of
the whole process per round trip (sequencer included, the same for both).

Not a test: numbers depend on the machine; what matters is the ratio to the baseline.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from examples.pingpong.messages import Ping, PingpongNode, PingView
from seqbus import _core, aio
from seqbus.demo import bus_config, free_udp_port


class Echo(PingpongNode):
    """Notes the id of every Ping of its own that comes back."""

    def __init__(self) -> None:
        super().__init__()
        self.last = -1
        self.waiter: asyncio.Future[None] | None = None

    def on_ping(self, msg: PingView, mine: bool) -> None:
        if mine:
            self.last = msg.id
            if self.waiter is not None and not self.waiter.done():
                self.waiter.set_result(None)


def _percentiles(ns: list[int]) -> dict[str, float]:
    q = statistics.quantiles(ns, n=100)
    return {"p50_us": round(q[49] / 1000, 1), "p99_us": round(q[98] / 1000, 1)}


def blocking_round_trips(config: str, listen: str | None, count: int) -> tuple[list[int], float]:
    node = Echo()
    client = _core.NodeClient(config, "BLOCK", 1, topics=Echo.topics(), listen=listen)
    try:
        deadline = time.monotonic() + 10
        while not client.is_ready():
            if time.monotonic() > deadline:
                raise RuntimeError("no answer from the sequencer")
            batch = client.poll(4096, 0.05)
            if batch:
                node.handle_batch(batch)
        node.attach(client, "BLOCK", 1)
        rtts = []
        cpu = time.process_time()
        for i in range(count):
            start = time.perf_counter_ns()
            node.send(Ping(id=i, sent_at_ns=0))
            while node.last != i:
                node.poll_once(1.0)
            rtts.append(time.perf_counter_ns() - start)
        return rtts, (time.process_time() - cpu) / count
    finally:
        client.close()


async def aio_round_trips(config: str, listen: str | None, count: int) -> tuple[list[int], float]:
    async with aio.connect(Echo, config, "ASYNC", listen=listen) as conn:
        node = conn.node
        loop = asyncio.get_running_loop()
        rtts = []
        cpu = time.process_time()
        for i in range(count):
            start = time.perf_counter_ns()
            node.waiter = loop.create_future()
            await conn.send(Ping(id=i, sent_at_ns=0))
            await asyncio.wait_for(node.waiter, 10)
            rtts.append(time.perf_counter_ns() - start)
        return rtts, (time.process_time() - cpu) / count


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.aio")
    parser.add_argument("--quick", action="store_true", help="fewer round trips")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args()
    count = 2_000 if args.quick else 10_000
    multicast = os.environ.get("SEQBUS_IN_NETNS") == "1"
    results: dict[str, Any] = {
        "transport": "udp-multicast" if multicast else "udp-unicast",
        "idle": "hybrid",
        "round_trips": count,
    }
    with tempfile.TemporaryDirectory(prefix="seqbus-bench-aio-") as tmp:
        workdir = Path(tmp)
        listen = [f"127.0.0.1:{free_udp_port()}" for _ in range(2)]
        config = workdir / "bus.toml"
        config.write_text(bus_config(workdir, multicast, listen))
        sequencer = _core.Sequencer(str(config))
        try:
            # each twice, alternating, the better run of each kept (the machine is shared)
            runs: dict[str, list[tuple[list[int], float]]] = {"blocking": [], "asyncio": []}
            for _ in range(2):
                runs["blocking"].append(
                    blocking_round_trips(str(config), None if multicast else listen[0], count)
                )
                runs["asyncio"].append(
                    asyncio.run(
                        aio_round_trips(str(config), None if multicast else listen[1], count)
                    )
                )
        finally:
            sequencer.stop()
            sequencer.join(10)
    for name, measured in runs.items():
        rtts, cpu = min(measured, key=lambda r: statistics.median(r[0]))
        results[name] = {**_percentiles(rtts), "cpu_us_per_round_trip": round(cpu * 1e6, 1)}
    results["asyncio_over_blocking_p50"] = round(
        results["asyncio"]["p50_us"] / results["blocking"]["p50_us"], 2
    )
    if args.json:
        print(json.dumps(results))
    else:
        for key, value in results.items():
            print(f"  {key:28} {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
