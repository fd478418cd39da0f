"""The SDK over real sockets: the Rust client, configuration errors, the demo end to end."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from seqbus import ConfigError, _core
from tests.conftest import run_demo


def test_a_bad_configuration_key_is_named(tmp_path: Path) -> None:
    config = tmp_path / "bus.toml"
    config.write_text('[bus]\nsession = "S"\n[sequencer]\nupstream = "127.0.0.1:1"\nbogus = 1\n')
    with pytest.raises(ConfigError, match="bogus"):
        _core.check_config(str(config))
    with pytest.raises(ConfigError, match="bogus"):
        _core.NodeClient(str(config), "A")
    with pytest.raises(ConfigError, match="bogus"):
        _core.Sequencer(str(config))


def test_a_missing_configuration_file_is_a_config_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        _core.check_config(str(tmp_path / "absent.toml"))


def test_node_command_exits_1_on_a_bad_config(tmp_path: Path) -> None:
    config = tmp_path / "bus.toml"
    config.write_text("[bus]\n")
    proc = subprocess.run(
        [sys.executable, "-m", "seqbus.cli", "node", "seqbus.node:Node", "-c", str(config)]
        + ["--account", "A"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 1
    assert "seqbus node: error:" in proc.stderr and "session" in proc.stderr


def test_node_command_imports_the_module_from_the_working_directory(tmp_path: Path) -> None:
    """`seqbus node mymodule:Class` from the directory that holds mymodule.py, as `python -m`
    would find it (a console script has only its own directory on sys.path)."""
    (tmp_path / "cwd_node_module.py").write_text(
        "from pathlib import Path\n"
        "from seqbus import Node\n"
        "Path('imported').write_text('yes')\n"
        "class Quick(Node):\n"
        "    pass\n"
    )
    (tmp_path / "bus.toml").write_text("[bus]\n")  # refused after the class is loaded
    script = Path(sys.executable).with_name("seqbus")
    proc = subprocess.run(
        [str(script), "node", "cwd_node_module:Quick", "-c", "bus.toml", "--account", "A"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        cwd=tmp_path,
    )
    assert "cannot import" not in proc.stderr, proc.stderr
    assert (tmp_path / "imported").read_text() == "yes"
    assert proc.returncode == 1 and "session" in proc.stderr, proc.stderr


@pytest.mark.slow
def test_demo_prints_a_json_summary_over_unicast() -> None:
    env = dict(os.environ, SEQBUS_IN_NETNS="0")
    proc = subprocess.run(
        [sys.executable, "-m", "seqbus.cli", "demo", "--pingpong", "--unicast", "--json"]
        + ["--count", "300"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)  # stdout is exactly one JSON object
    assert summary["transport"] == "udp-unicast"
    assert summary["idle"] == "hybrid"  # the default strategy
    assert summary["round_trips"] == 300
    assert 0 < summary["rtt_us"]["p50"] <= summary["rtt_us"]["p99"]


@pytest.mark.slow
def test_demo_over_multicast_in_a_private_namespace() -> None:
    if os.environ.get("SEQBUS_NO_NETNS") == "1":
        pytest.skip("no private network namespace can be made here")
    env = {k: v for k, v in os.environ.items() if k != "SEQBUS_IN_NETNS"}
    proc = subprocess.run(
        [sys.executable, "-m", "seqbus.cli", "demo", "--pingpong", "--json", "--count", "300"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)  # stdout is exactly one JSON object
    if "no private network namespace" in " ".join(summary["notes"]):
        pytest.skip(summary["notes"][0])
    assert summary["transport"] == "udp-multicast"
    assert summary["round_trips"] == 300


@pytest.mark.slow
@pytest.mark.parametrize("transport", ["udp-multicast", "udp-unicast"])
def test_exchange_demo_keeps_every_order_through_a_failover(
    tmp_path: Path, transport: str
) -> None:
    """The main job, briefly: the primary engine is killed mid-run, the hot backup carries on,
    a late joiner rewinds; every order is answered once and every state hash agrees. Over
    unicast too (what the demo falls back to without a network namespace): its following
    replayer then receives the stream as a subscriber of its own."""
    if transport == "udp-multicast" and os.environ.get("SEQBUS_NO_NETNS") == "1":
        pytest.skip("no private network namespace can be made here")
    orders = 3000
    argv = ["--json", "--orders", str(orders), "--timeout", "150"]
    argv += ["--workdir", str(tmp_path / "run")]
    if transport == "udp-unicast":
        argv.append("--unicast")
    proc = run_demo(
        argv,
        tmp_path,  # not the repository: the demo finds examples/ from its own installation
        timeout=200,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)  # stdout is exactly one JSON object
    assert summary["transport"] == transport
    assert (summary["orders"], summary["answered"], summary["lost_orders"]) == (orders, orders, 0)
    # every order answered exactly once (the gateway counts answers per order id)
    assert summary["accepted"] + summary["rejected"] == orders
    assert 0 < summary["primary_killed_after_answers"] < orders
    checkpoint = summary["checkpoint_state_hash"]
    assert checkpoint["primary"] == checkpoint["backup"] == checkpoint["late_joiner"]
    final = summary["final_state_hash"]
    assert final["backup"] == final["late_joiner"] != checkpoint["backup"]
    assert summary["hashes_equal"] is True
    assert summary["final_sequence"] > summary["checkpoint_sequence"] > 0
    # the leading sequencer was killed at three quarters and a standby took over
    takeover = summary["sequencer_takeover"]
    assert takeover["new_leader"] != takeover["killed_member"]
    assert 0 < takeover["killed_after_answers"] < orders
    assert 0 < takeover["takeover_ms"] <= takeover["first_answer_ms"] < 10_000
    # the run's journal is kept with --workdir, and its engine reports agree with the summary
    assert any((tmp_path / "run" / "journal").glob("*.seg"))
    me2 = json.loads((tmp_path / "run" / "reports" / "ME-2.json").read_text())
    assert me2["state_hash"] == final["backup"]


def test_run_many_runs_a_pinger_and_a_ponger_in_one_process(tmp_path: Path) -> None:
    import threading

    from seqbus import NodeSpec, run_many
    from seqbus.demo import bus_config, free_udp_port
    from examples.pingpong.nodes import Pinger, Ponger

    listen = [f"127.0.0.1:{free_udp_port()}" for _ in range(2)]
    config = tmp_path / "bus.toml"
    config.write_text(bus_config(tmp_path, False, listen))
    stop = threading.Event()

    class CountedPinger(Pinger):
        def stop(self) -> None:
            super().stop()
            stop.set()

    pinger = CountedPinger()
    pinger.count = 50
    sequencer = _core.Sequencer(str(config))
    try:
        nodes = run_many(
            [
                NodeSpec(Ponger, "PONGER", 1, "rewind", listen[0]),
                NodeSpec(pinger, "PINGER", 1, "live", listen[1]),
            ],
            config,
            stop=stop,
        )
    finally:
        sequencer.stop()
        assert sequencer.join(10.0)
    assert nodes[1] is pinger
    assert len(pinger.rtts) == 50


def test_a_second_sequencer_of_a_journal_is_refused_and_the_first_goes_on(
    tmp_path: Path,
) -> None:
    """Starting the sequencer twice on one configuration: the second is refused before it
    touches the journal (it used to cut the first one's reserved tail under it, which then
    died of SIGBUS), and the first keeps sequencing."""
    from seqbus import JournalError
    from seqbus.demo import bus_config, free_udp_port

    listen = f"127.0.0.1:{free_udp_port()}"
    config = tmp_path / "bus.toml"
    config.write_text(bus_config(tmp_path, False, [listen]))
    first = _core.Sequencer(str(config))
    client = _core.NodeClient(str(config), "A", 1, listen=listen)
    try:
        deadline = time.monotonic() + 30
        while not client.is_ready():
            assert time.monotonic() < deadline, "no answer from the sequencer"
            client.poll(64, 0.01)

        def sequenced(what: str) -> None:
            # the stream confirms the command: nothing is left in flight
            client.send(what.encode())
            assert client.stats()["in_flight"] == 1
            while client.stats()["in_flight"] > 0:
                assert time.monotonic() < deadline, f"{what}: not sequenced"
                client.poll(64, 0.01)

        sequenced("before")
        with pytest.raises(JournalError, match="written by another process") as refused:
            second = _core.Sequencer(str(config))
            second.join(30)
        assert f"(pid {os.getpid()})" in str(refused.value)
        sequenced("after")  # the first sequencer goes on
    finally:
        client.close()
        first.stop()
        assert first.join(10)
    report = _core.verify_journal(str(tmp_path / "journal"))
    assert int(str(report["messages"])) >= 3  # SessionStart and the two commands

