"""Nodes in Python, C++ and Java on one bus (issue 31 item 3), over real processes and UDP
multicast: the exchange demo's gateway and matching engine (Python) drive orders, and the
market-data node runs as three hot-hot instances of one account, MD: the demo's Python node
(instance 1), the C++ example (examples/exchange/cpp, instance 2) and the Java example
(examples/exchange/java, instance 3).

The C++ and Java instances start late, once the gateway has had answers: they rewind the
session from its first message (a late joiner, a hot backup), then follow it live. Every
instance publishes the same BookUpdates on deterministic timers (the sequencer keeps the first
copy of each), and each writes its report when every update it published is back in the
stream after the end-of-run marker: per message type a count and a BLAKE2b-16 digest of
(sequence, sequencer time, key field), the sequence it stopped at and its book's state hash.
The three reports must be equal, and the gateway must have lost no order.
"""

from __future__ import annotations

import json
import os
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
FOREIGN = (("cpp", 2),)


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
    }
    cli = seqbus_cli()
    sequencer = processes.start("sequencer", [*cli, "sequencer", "-c", str(bus.path)], env=env)
    if not wait_udp_bound(bus.upstream, 10.0) or sequencer.poll() is not None:
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

    def wait_for(what: str, ready: Any) -> None:
        """Until ``ready()``, every started process still running (or finished cleanly), at
        most until the deadline."""
        while not ready():
            for name, proc in processes.procs:
                code = proc.poll()
                assert code in (None, 0), f"{name} exited with {code}\n{processes.logs()}"
            assert time.monotonic() < deadline, f"no {what} in time\n{processes.logs()}"
            time.sleep(0.05)

    # the foreign instances join late: the session has history to rewind by then
    wait_for("answers", lambda: (read_json(reports / "progress") or {}).get("answered", 0) >= 100)
    started = {}
    for language, instance in FOREIGN:
        args = ["-c", str(bus.path), "--account", "MD", "--instance", str(instance), "--rewind"]
        if language == "cpp":
            command = [str(programs.cpp_market_data), *args]
        else:
            command = [*programs.java_market_data(), *args]
        started[f"MD-{instance}"] = processes.start(f"MD-{instance}", command, env=env)

    names = ["GW-1", "MD-1", *started]
    wait_for("reports", lambda: all((reports / f"{n}.json").exists() for n in names))
    for name, proc in processes.procs:
        if name != "sequencer":
            try:
                code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
            except Exception:
                pytest.fail(f"{name} did not stop\n{processes.logs()}")
            assert code == 0, f"{name} exited with {code}\n{processes.logs()}"

    gateway = read_json(reports / "GW-1.json")
    assert gateway is not None
    assert gateway["orders"] == ORDERS and gateway["lost"] == 0, gateway
    assert gateway["trades"] > 0, gateway

    python = read_json(reports / "MD-1.json")
    state = read_json(reports / "MD-1.state.json")
    assert python is not None and state is not None
    # the run exercised every message type the digest covers
    assert {"exchange.NewOrder", "exchange.OrderAccepted", "exchange.Trade",
            "exchange.CancelOrder", "exchange.OrderCancelled",
            "exchange.BookUpdate"} <= set(python["seen"]), python
    assert python["seen"]["exchange.NewOrder"]["count"] == ORDERS
    assert python["updates"] > 0
    for name in started:
        other = read_json(reports / f"{name}.json")
        assert other is not None
        assert other["seen"] == python["seen"], (name, other, python)
        assert other["last_sequence"] == python["last_sequence"], name
        assert other["updates"] == python["updates"], name
        assert other["state_hash"] == state["state_hash"], name
        # the foreign node rewound the session: its log says it caught up
        assert "caught up" in processes.log(name), processes.log(name)[-2000:]
