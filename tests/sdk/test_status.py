"""``seqbus admin status`` against a sequencer process with its HTTP status endpoint on."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from seqbus.demo import bus_config
from tests.conftest import Processes, free_tcp_port, seqbus_cli


def _admin_status(config: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "seqbus.cli", "admin", "status", "-c", str(config), *flags],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )


def test_admin_status_reads_the_sequencers_counters(tmp_path: Path, processes: Processes) -> None:
    port = free_tcp_port()
    token = "a-token-long-enough-0123"
    text = bus_config(tmp_path, False, ["127.0.0.1:9"]).replace(
        "[sequencer]\n", f'[sequencer]\nstatus = "127.0.0.1:{port}"\nstatus_token = "{token}"\n'
    )
    config = tmp_path / "bus.toml"
    config.write_text(text)
    seq = processes.start("sequencer", [*seqbus_cli(), "sequencer", "-c", str(config)])
    deadline = time.monotonic() + 20
    while True:
        proc = _admin_status(config, "--json")
        if proc.returncode == 0 or time.monotonic() > deadline or seq.poll() is not None:
            break
        time.sleep(0.1)
    assert proc.returncode == 0, proc.stderr + processes.logs()
    status = json.loads(proc.stdout)
    assert status["session"] == "DEMO000001"
    assert status["counters"]["messages_sequenced"] >= 1  # SessionStart
    readable = _admin_status(config)
    assert readable.returncode == 0 and "messages_sequenced" in readable.stdout
    metrics = _admin_status(config, "--metrics")
    assert 'seqbus_sequencer_next_sequence{session="DEMO000001"}' in metrics.stdout
    # a wrong token is refused, with the endpoint's reason
    config.write_text(text.replace(token, "a-wrong-token-of-length-24"))
    refused = _admin_status(config)
    assert refused.returncode == 1 and "HTTP 401" in refused.stderr


def test_admin_status_without_an_endpoint_names_the_key(tmp_path: Path) -> None:
    config = tmp_path / "bus.toml"
    config.write_text(bus_config(tmp_path, False, ["127.0.0.1:9"]))
    proc = _admin_status(config)
    assert proc.returncode == 1 and "sequencer.status" in proc.stderr
