"""Nodes in Python, C++ and Java on one bus (issue 31 item 3), over real processes and UDP
multicast: the exchange demo's gateway and matching engine (Python) drive orders, and the
market-data node runs as hot-hot instances of one account, MD: the demo's Python node
(instance 1, the primary), the C++ example (examples/exchange/cpp, instance 2) and the Java
example (examples/exchange/java, instance 3).

* The C++ and Java instances start late, while the gateway is paused at a third of its orders:
  they rewind the session from its first message (late joiners, hot backups) and catch up with
  the live stream; then the gateway goes on.
* At two thirds the Python primary is killed (kill -9): the rest of the run's BookUpdates are
  the C++ and Java instances' (the sequencer keeps the first copy of each command of the
  account). A Python instance (4) joins late in its place.
* Every instance writes its report when every update it published is back in the stream after
  the end-of-run marker: per message type a count and a BLAKE2b-16 digest of (sequence,
  sequencer time, key field), the sequence it stopped at, the updates it published, and its
  book's state hash. The Python, C++ and Java reports must be equal, and the gateway must have
  lost no order.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, Processes, seqbus_cli
from tests.e2e.busconfig import wait_udp_bound, write_bus_config
from tests.languages.conftest import Programs

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("multicast")]

ORDERS = int(os.environ.get("SEQBUS_LANGUAGES_ORDERS", "1500"))
#: The foreign instances of the market-data account: (language, instance).
FOREIGN = (("cpp", 2), ("java", 3))


def read_json(path: Path) -> dict[str, Any] | None:
    try:
        data: dict[str, Any] = json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    return data


def test_python_cpp_and_java_market_data_instances_agree(
    tmp_path: Path, processes: Processes, programs: Programs
) -> None:
    bus = write_bus_config(tmp_path, session="LANGS00001")
    reports = tmp_path / "reports"
    reports.mkdir()
    env = {
        "EXCHANGE_REPORT_DIR": str(reports),
        "EXCHANGE_ORDERS": str(ORDERS),
        "EXCHANGE_SEED": "7",
        "PYTHONPATH": str(ROOT),
        # at a third and at two thirds of the orders the gateway stops (no order in flight)
        # until the test releases it: the points below are reached however fast the run
        # (unheld, 1,500 orders can all be answered between two looks at a progress file)
        "EXCHANGE_HOLD_AT": f"{ORDERS // 3},{2 * ORDERS // 3}",
        "EXCHANGE_HOLD_IN_FLIGHT": "0",
    }
    cli = seqbus_cli()
    sequencer = processes.start("sequencer", [*cli, "sequencer", "-c", str(bus.path)], env=env)
    if not wait_udp_bound(bus.upstream, 30.0) or sequencer.poll() is not None:
        pytest.fail(f"the sequencer did not start\n{processes.logs()}")

    def python_node(name: str, target: str) -> None:
        account, instance = name.split("-")
        processes.start(
            name,
            [*cli, "node", target, "-c", str(bus.path), "--rewind", "--account", account,
             "--instance", instance, "--path", str(ROOT)],
            env=env,
        )

    python_node("ME-1", "examples.exchange.demo_nodes:DemoEngine")
    python_node("MD-1", "tests.languages.market_data:MarketDataWithState")
    python_node("GW-1", "examples.exchange.demo_nodes:DemoGateway")

    deadline = time.monotonic() + 240
    killed: set[str] = set()

    def wait_for(what: str, ready: Any) -> None:
        """Until ``ready()``, every started process still running (or finished cleanly, or
        killed by the test), at most until the deadline."""
        while not ready():
            for name, proc in processes.procs:
                code = proc.poll()
                assert code in (None, 0) or name in killed, (
                    f"{name} exited with {code}\n{processes.logs()}"
                )
            assert time.monotonic() < deadline, f"no {what} in time\n{processes.logs()}"
            time.sleep(0.05)

    def paused_gateway() -> Any:
        """The gateway stopped (SIGSTOP) for the block: no new orders meanwhile."""
        gateway = next(proc for name, proc in processes.procs if name == "GW-1")

        class Paused:
            def __enter__(self) -> None:
                os.kill(gateway.pid, signal.SIGSTOP)

            def __exit__(self, *exc: object) -> None:
                os.kill(gateway.pid, signal.SIGCONT)

        return Paused()

    def caught_up(names: list[str]) -> None:
        wait_for("caught up", lambda: all("caught up" in processes.log(n) for n in names))

    # The foreign instances join late: at a third of the orders, with the gateway paused, they
    # rewind the session's history and catch up with the live stream; then they are live
    # hot-hot instances.
    wait_for("a third of the answers", lambda: (reports / "hold-1").exists())
    foreign = []
    with paused_gateway():
        for language, instance in FOREIGN:
            args = ["-c", str(bus.path), "--account", "MD", "--instance", str(instance), "--rewind"]
            if language == "cpp":
                command = [str(programs.cpp_market_data), *args]
            else:
                command = [*programs.java_market_data(), *args]
            processes.start(f"MD-{instance}", command, env=env)
            foreign.append(f"MD-{instance}")
        caught_up(foreign)
    (reports / "release-1").write_text("go on")

    # At two thirds the Python primary dies (kill -9): the BookUpdates of the rest of the run
    # are the C++ and Java instances'. A Python instance joins late in its place, for the
    # Python side of the comparison.
    wait_for("two thirds of the answers", lambda: (reports / "hold-2").exists())
    with paused_gateway():
        primary = next(proc for name, proc in processes.procs if name == "MD-1")
        killed.add("MD-1")
        processes.kill(primary)
        primary.wait(timeout=10)
        python_node("MD-4", "tests.languages.market_data:MarketDataWithState")
        caught_up(["MD-4"])
    assert not (reports / "MD-1.json").exists(), "the primary finished before it was killed"
    (reports / "release-2").write_text("go on")

    names = ["GW-1", "MD-4", *foreign]
    wait_for("reports", lambda: all((reports / f"{n}.json").exists() for n in names))
    for name, proc in processes.procs:
        if name != "sequencer" and name not in killed:
            try:
                code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
            except Exception:
                pytest.fail(f"{name} did not stop\n{processes.logs()}")
            assert code == 0, f"{name} exited with {code}\n{processes.logs()}"

    gateway = read_json(reports / "GW-1.json")
    assert gateway is not None
    assert gateway["orders"] == ORDERS and gateway["lost"] == 0, gateway
    assert gateway["trades"] > 0, gateway

    python = read_json(reports / "MD-4.json")
    state = read_json(reports / "MD-4.state.json")
    assert python is not None and state is not None
    # the run exercised every message type the digest covers
    assert {"exchange.NewOrder", "exchange.OrderAccepted", "exchange.Trade",
            "exchange.CancelOrder", "exchange.OrderCancelled",
            "exchange.BookUpdate"} <= set(python["seen"]), python
    assert python["seen"]["exchange.NewOrder"]["count"] == ORDERS
    for name in foreign:
        other = read_json(reports / f"{name}.json")
        assert other is not None
        assert other["seen"] == python["seen"], (name, other, python)
        assert other["last_sequence"] == python["last_sequence"], name
        assert other["updates"] == python["updates"], name
        assert other["state_hash"] == state["state_hash"], name
