"""Benchmarks of the Python SDK, each beside its baseline measured in the same run.

    python -m benchmarks.sdk [--quick] [--json]

* ingest: a Python node's typed handlers reading two fields of every message, fed batches as
  the Rust core hands them over, vs pyzmq PUB/SUB receiving raw bytes (no decoding at all).
* round trip: Python node → sequencer → Python node and back over UDP on loopback, beside the
  same between two Rust NodeClients and pyzmq DEALER/ROUTER echo over TCP loopback. Three
  processes on this 2-core machine: where the scheduler puts them moves it by tens of µs.
* self round trip: one node's Ping back to it through the sequencer, a Python node against a
  Rust NodeClient in alternating pairs: two processes, one core each, so it shows what the
  Python side adds to each wake of a node.

Not a test: numbers depend on the machine; what matters is the ratio to the baseline.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import zmq

from examples.pingpong.messages import Ping, PingpongNode, PingView

from seqbus.batch import RECORD_MESSAGE, pack_record
from seqbus.demo import bus_config, free_udp_port, percentiles

MESSAGE_BYTES = 48  # envelope-free Ping body (24) rounded up to a typical small order


def _zmq_pub(ports: Any, count: int, size: int, go: Any) -> None:
    ctx = zmq.Context()
    pub = ctx.socket(zmq.PUB)
    pub.setsockopt(zmq.SNDHWM, 0)
    ports.put(pub.bind_to_random_port("tcp://127.0.0.1"))
    go.wait(30)
    payload = b"x" * size
    for _ in range(count):
        pub.send(payload)
    pub.send(b"")  # end marker
    pub.close(linger=-1)  # deliver everything, the end marker included
    ctx.term()


def zmq_pubsub_rate(count: int, size: int = MESSAGE_BYTES) -> float:
    """Messages per second a pyzmq SUB ingests from a PUB in another process (TCP loopback).

    The publisher finishes first and every message waits in the SUB socket's queue, so what is
    timed is the subscriber's ingest alone, as for the seqbus node."""
    spawn = mp.get_context("spawn")
    ports = spawn.Queue()
    go = spawn.Event()
    proc = spawn.Process(target=_zmq_pub, args=(ports, count, size, go))
    proc.start()
    ctx = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    sub.setsockopt(zmq.RCVHWM, 0)
    sub.setsockopt(zmq.SUBSCRIBE, b"")
    sub.setsockopt(zmq.RCVTIMEO, 10_000)
    try:
        sub.connect(f"tcp://127.0.0.1:{ports.get(timeout=30)}")
        time.sleep(0.5)  # let the subscription reach the publisher
        go.set()
        proc.join(120)
        time.sleep(0.5)
        start = time.perf_counter()
        received = 0
        while sub.recv():
            received += 1
        elapsed = time.perf_counter() - start
    finally:
        proc.join(30)
        if proc.is_alive():
            proc.kill()
        sub.close(linger=0)
        ctx.term()
    if received != count:
        raise AssertionError(f"pyzmq SUB received {received} of {count}")
    return received / elapsed


def _zmq_router(endpoint: str, count: int) -> None:
    ctx = zmq.Context()
    router = ctx.socket(zmq.ROUTER)
    router.bind(endpoint)
    for _ in range(count):
        router.send_multipart(router.recv_multipart())
    router.close(linger=1000)
    ctx.term()


def zmq_round_trip_ns(count: int) -> list[int]:
    """Round trips of a 16-byte message DEALER → ROUTER (another process) → DEALER."""
    with zmq.Context() as ctx, ctx.socket(zmq.DEALER) as probe:
        port = probe.bind_to_random_port("tcp://127.0.0.1")
        probe.unbind(f"tcp://127.0.0.1:{port}")
    endpoint = f"tcp://127.0.0.1:{port}"
    spawn = mp.get_context("spawn")
    proc = spawn.Process(target=_zmq_router, args=(endpoint, count))
    proc.start()
    ctx = zmq.Context()
    dealer = ctx.socket(zmq.DEALER)
    dealer.connect(endpoint)
    rtts: list[int] = []
    try:
        payload = bytes(16)
        for _ in range(count):
            t0 = time.perf_counter_ns()
            dealer.send(payload)
            dealer.recv()
            rtts.append(time.perf_counter_ns() - t0)
    finally:
        proc.join(30)
        if proc.is_alive():
            proc.kill()
        dealer.close(linger=0)
        ctx.term()
    return rtts


ROOT = Path(__file__).resolve().parent.parent
RUST_EXAMPLE = ROOT / "rust" / "target" / "release" / "examples" / "rust_round_trip"


def build_rust_example() -> Path:
    """Build the Rust-only ping-pong (an example of the py crate) with cargo."""
    subprocess.run(
        ["cargo", "build", "--release", "-q", "-p", "seqbus-py", "--example", "rust_round_trip"],
        cwd=ROOT / "rust",
        check=True,
        env=dict(os.environ, CARGO_TARGET_DIR=str(ROOT / "rust" / "target")),
    )
    return RUST_EXAMPLE


def _stop_all(procs: list[subprocess.Popen[bytes]]) -> None:
    for proc in procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in procs:
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def bus_round_trip_ns(
    kind: str, count: int, idle: str = "hybrid", *, alone: bool = False
) -> list[int]:
    """Round trips Ping → sequencer → Pong → sequencer over UDP on loopback, one in flight,
    between two Python nodes (``kind="python"``) or two Rust NodeClients (``"rust"``), each
    pair on a fresh sequencer with the same configuration (``idle``: the idle strategy of the
    sequencer and both nodes). ``alone``: one node and its own Ping back from the sequencer
    (a Python :class:`SelfPinger` or the Rust example's ``self``)."""
    multicast = os.environ.get("SEQBUS_IN_NETNS") == "1"
    with tempfile.TemporaryDirectory(prefix="seqbus-bench-") as tmp:
        workdir = Path(tmp)
        listen = [f"127.0.0.1:{free_udp_port()}" for _ in range(2)]
        config = workdir / "bus.toml"
        config.write_text(bus_config(workdir, multicast, listen, idle))
        cli = [sys.executable, "-m", "seqbus.cli"]
        out = workdir / "summary.json"
        env = dict(os.environ, SEQBUS_DEMO_COUNT=str(count), SEQBUS_DEMO_OUT=str(out))
        procs: list[subprocess.Popen[bytes]] = []

        def extra(i: int, flag: bool) -> list[str]:
            if multicast:
                return []
            return ["--listen", listen[i]] if flag else [listen[i]]

        try:
            procs.append(subprocess.Popen([*cli, "sequencer", "-c", str(config)], env=env))
            if kind == "python":
                node = [*cli, "node", "-c", str(config)]
                if not alone:
                    procs.append(
                        subprocess.Popen(
                            [*node, "examples.pingpong.nodes:Ponger", "--account", "PONGER",
                             "--rewind"] + extra(0, True),
                            env=env,
                            stdout=subprocess.DEVNULL,
                        )
                    )
                pinger_class = "benchmarks.sdk:SelfPinger" if alone else "examples.pingpong.nodes:Pinger"
                pinger = subprocess.Popen(
                    [*node, pinger_class, "--account", "PINGER", "--path", str(ROOT)] + extra(1, True),
                    env=env,
                    stdout=subprocess.DEVNULL,
                )
                procs.append(pinger)
                if pinger.wait(300) != 0:
                    raise RuntimeError(f"the pinger exited with status {pinger.returncode}")
                result: dict[str, Any] = json.loads(out.read_text())
            else:
                if not alone:
                    ponger = subprocess.Popen(
                        [str(RUST_EXAMPLE), str(config), "pong", *extra(0, False)],
                        stdout=subprocess.PIPE,
                    )
                    procs.append(ponger)
                    assert ponger.stdout is not None
                    if ponger.stdout.readline().strip() != b"ready":
                        raise RuntimeError("the Rust ponger did not start")
                pinger = subprocess.Popen(
                    [str(RUST_EXAMPLE), str(config), "self" if alone else "ping", str(count),
                     *extra(1, False)],
                    stdout=subprocess.PIPE,
                )
                procs.append(pinger)
                stdout, _ = pinger.communicate(timeout=300)
                result = json.loads(stdout)
        finally:
            _stop_all(procs)
    rtts: list[int] = result["rtt_ns"]
    return rtts


class SelfPinger(PingpongNode):
    """Keeps one Ping in flight to itself: sends the next when its last comes back through
    the sequencer, timing each on its own clock; after ``SEQBUS_DEMO_COUNT`` writes
    ``{"rtt_ns": [...]}`` to ``SEQBUS_DEMO_OUT`` and stops (the Rust example's ``self``)."""

    def __init__(self) -> None:
        super().__init__()
        self.count = int(os.environ["SEQBUS_DEMO_COUNT"])
        self.rtts: list[int] = []
        self.sent_at = 0

    def on_opened(self) -> None:
        self._ping()

    def _ping(self) -> None:
        self.sent_at = time.perf_counter_ns()
        self.send_ping(id=len(self.rtts), sent_at_ns=0)

    def on_ping(self, msg: PingView, mine: bool) -> None:
        if not mine or msg.id != len(self.rtts):
            return
        self.rtts.append(time.perf_counter_ns() - self.sent_at)
        if len(self.rtts) < self.count:
            self._ping()
            return
        with open(os.environ["SEQBUS_DEMO_OUT"], "w") as fh:
            json.dump({"round_trips": len(self.rtts), "rtt_ns": self.rtts}, fh)
        self.stop()


def round_trip_pairs(pairs: int, trips: int, idle: str, *, alone: bool) -> dict[str, Any]:
    """:func:`bus_round_trip_ns` for Python and Rust in ``pairs`` pairs (which runs first
    alternating, so that the load of the moment weighs on both alike): each side's median of
    its per-run medians, p99 over all its round trips, and the median and range of the
    per-pair gaps (the target compares them)."""
    python: list[float] = []
    rust: list[float] = []
    every: dict[str, list[int]] = {"python": [], "rust": []}
    for i in range(pairs):
        for kind in ("rust", "python") if i % 2 == 0 else ("python", "rust"):
            ns = bus_round_trip_ns(kind, trips, idle, alone=alone)
            every[kind] += ns
            (python if kind == "python" else rust).append(statistics.median(ns) / 1000)
    gaps = [p - r for p, r in zip(python, rust)]
    return {
        "idle": idle,
        "pairs": pairs,
        "round_trips_per_run": trips,
        "seqbus_python_p50_us": round(statistics.median(python), 2),
        "seqbus_rust_p50_us": round(statistics.median(rust), 2),
        "seqbus_python_p99_us": round(percentiles(every["python"], (99,))["p99"], 1),
        "seqbus_rust_p99_us": round(percentiles(every["rust"], (99,))["p99"], 1),
        "python_minus_rust_p50_us_median": round(statistics.median(gaps), 2),
        "python_minus_rust_p50_us_range": [round(min(gaps), 2), round(max(gaps), 2)],
        "pairs_within_2_us": sum(g <= 2.0 for g in gaps),
    }


class Flooder(PingpongNode):
    """Sends ``SEQBUS_BENCH_COUNT`` Pings as fast as the window allows, then stops once the
    last one is in the stream."""

    def __init__(self) -> None:
        super().__init__()
        self.count = int(os.environ["SEQBUS_BENCH_COUNT"])

    def on_opened(self) -> None:
        for i in range(self.count):
            self.post(Ping(id=i, sent_at_ns=i))

    def on_ping(self, msg: PingView, mine: bool) -> None:
        if mine and msg.id == self.count - 1:
            self.stop()


class RewindReader(PingpongNode):
    """Rewinds the session into a typed handler reading two fields; times the rewind."""

    def __init__(self) -> None:
        super().__init__()
        self.total = 0
        self.seen = 0
        self.started = 0.0
        self.elapsed = 0.0

    def on_opened(self) -> None:
        self.started = time.perf_counter()

    def on_ping(self, msg: PingView, mine: bool) -> None:
        self.total += msg.id + msg.sent_at_ns
        self.seen += 1

    def on_rewound(self) -> None:
        self.elapsed = time.perf_counter() - self.started
        self.stop()


def rewind_rate(count: int) -> float:
    """Messages per second a Python node rewinds from the replayer into its handlers, after a
    Flooder has put ``count`` Pings into a fresh session (UDP on loopback)."""
    from seqbus import run

    multicast = os.environ.get("SEQBUS_IN_NETNS") == "1"
    with tempfile.TemporaryDirectory(prefix="seqbus-bench-") as tmp:
        workdir = Path(tmp)
        listen = [f"127.0.0.1:{free_udp_port()}" for _ in range(2)]
        config = workdir / "bus.toml"
        config.write_text(bus_config(workdir, multicast, listen))
        cli = [sys.executable, "-m", "seqbus.cli"]
        env = dict(os.environ, SEQBUS_BENCH_COUNT=str(count))
        procs: list[subprocess.Popen[bytes]] = []
        try:
            procs.append(subprocess.Popen([*cli, "sequencer", "-c", str(config)], env=env))
            flood = [*cli, "node", "benchmarks.sdk:Flooder", "-c", str(config), "--account", "FLOOD"]
            flood += ["--path", str(ROOT)] + ([] if multicast else ["--listen", listen[0]])
            flooder = subprocess.Popen(flood, env=env)
            procs.append(flooder)
            if flooder.wait(600) != 0:
                raise RuntimeError(f"the flooder exited with status {flooder.returncode}")
            reader = RewindReader()
            run(reader, config, "READER", start="rewind", listen=None if multicast else listen[1])
        finally:
            _stop_all(procs)
    if reader.seen != count or reader.total != count * (count - 1):
        raise AssertionError(f"rewound {reader.seen} of {count} Pings")
    return count / reader.elapsed


def sdk_ingest_rate(count: int, batch_records: int = 4096, *, empty: bool = False) -> float:
    """Messages per second through seqbus.Node.handle_batch into a typed handler that reads two
    fields (``empty``: a handler that does nothing, the cost of the path alone), on batches
    laid out exactly as seqbus._core hands them over."""
    class Reader(PingpongNode):
        total = 0

        def on_ping(self, msg: PingView, mine: bool) -> None:
            self.total += msg.id + msg.sent_at_ns

    class Empty(Reader):
        def on_ping(self, msg: PingView, mine: bool) -> None:
            pass

    class NullClient:
        def poll(self, max_records: int, timeout: float) -> bytes:
            return b""

        def send(self, body: object) -> int:
            return 0

        def is_rewinding(self) -> bool:
            return False

    batch = b"".join(
        pack_record(
            RECORD_MESSAGE,
            i,
            timestamp_ns=i,
            account=b"PINGER\0\0",
            body=Ping(id=i, sent_at_ns=i).encode(),
        )
        for i in range(1, batch_records + 1)
    )
    node = Empty() if empty else Reader()
    node.attach(NullClient(), "READER", 1)
    batches = max(1, count // batch_records)
    start = time.perf_counter()
    for _ in range(batches):
        node.handle_batch(batch)
    elapsed = time.perf_counter() - start
    expected = 0 if empty else batches * batch_records * (batch_records + 1)
    if node.total != expected:
        raise AssertionError(f"handler saw the wrong values: {node.total} != {expected}")
    return batches * batch_records / elapsed


def idle_strategies(pairs: int, trips: int) -> dict[str, Any]:
    """The Python ping-pong's p50 per idle strategy (every process of the bus on it):
    ``hybrid`` and ``block`` in alternating pairs, so that the load of the moment weighs on
    both alike (issue 12: ``hybrid`` below ``block``), then ``spin-yield`` and ``busy-spin``
    once each (each must finish)."""
    hybrid: list[float] = []
    block: list[float] = []
    for _ in range(pairs):
        hybrid.append(statistics.median(bus_round_trip_ns("python", trips, "hybrid")) / 1000)
        block.append(statistics.median(bus_round_trip_ns("python", trips, "block")) / 1000)
    out: dict[str, Any] = {
        "pairs": pairs,
        "hybrid_p50_us_median": round(statistics.median(hybrid), 1),
        "block_p50_us_median": round(statistics.median(block), 1),
        "hybrid_below_block_pairs": sum(h < b for h, b in zip(hybrid, block, strict=True)),
    }
    for idle in ("spin-yield", "busy-spin"):
        out[f"{idle}_p50_us"] = round(statistics.median(bus_round_trip_ns("python", trips, idle))
                                      / 1000, 1)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.sdk")
    parser.add_argument("--quick", action="store_true", help="fewer iterations")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument(
        "--idle", default="hybrid", choices=("hybrid", "block", "spin-yield", "busy-spin"),
        help="idle strategy of the sequencer and every node of the round trips (default: hybrid,"
        " the configuration's default)",
    )
    parser.add_argument("--skip-round-trip", action="store_true", help="ingest and rewind only")
    args = parser.parse_args()
    scale = 1 if args.quick else 5
    results: dict[str, Any] = {"load_average_at_start": round(os.getloadavg()[0], 2)}

    # interleaved, best of three each: a busy host slows some rounds, not the code
    ingest = empty = pubsub = 0.0
    for _ in range(3):
        ingest = max(ingest, sdk_ingest_rate(400_000 * scale))
        empty = max(empty, sdk_ingest_rate(400_000 * scale, empty=True))
        pubsub = max(pubsub, zmq_pubsub_rate(200_000 * scale))
    results["ingest"] = {
        "seqbus_typed_handlers_msg_per_s": round(ingest),
        "seqbus_empty_handler_msg_per_s": round(empty),
        "pyzmq_pubsub_raw_msg_per_s": round(pubsub),
        "ratio": round(ingest / pubsub, 2),
        "target_ratio": 3.0,
    }
    rewind = rewind_rate(100_000 * scale)
    results["rewind"] = {"seqbus_rewind_into_handlers_msg_per_s": round(rewind)}
    if not args.skip_round_trip:
        build_rust_example()
        pairs = 6 if args.quick else 10
        round_trip = round_trip_pairs(pairs, 2_000 * scale, args.idle, alone=False)
        zmq_p50 = statistics.median(zmq_round_trip_ns(2_000 * scale)) / 1000
        results["round_trip"] = {
            "transport": "udp-multicast" if os.environ.get("SEQBUS_IN_NETNS") == "1"
            else "udp-unicast",
            **round_trip,
            "target_python_minus_rust_us": 2.0,
            "pyzmq_dealer_router_p50_us": round(zmq_p50, 1),
            "pyzmq_over_python": round(zmq_p50 / round_trip["seqbus_python_p50_us"], 2),
        }
        results["self_round_trip"] = round_trip_pairs(pairs, 5_000 * scale, args.idle, alone=True)
        results["idle_strategies"] = idle_strategies(4 if args.quick else 8,
                                                     2_000 if args.quick else 3_000)
    results["load_average_at_end"] = round(os.getloadavg()[0], 2)
    if args.json:
        print(json.dumps(results))
    else:
        for name, values in results.items():
            if not isinstance(values, dict):
                print(f"{name:42} {values}")
                continue
            print(name)
            for key, value in values.items():
                print(f"  {key:40} {value}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
