"""``seqbus admin`` over real sockets: a sequencer and a matching engine primary and hot backup
as processes; the operator halts the market, asks for help, gets an error, times out."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import pytest

from seqbus.cli import EXIT_ADMIN_TIMEOUT
from seqbus.demo import bus_config
from tests.conftest import ROOT, Processes, free_udp_port, seqbus_cli

STARTUP_S = 30.0


def _admin(config: Path, *argv: str, timeout: float = 10.0) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*seqbus_cli(), "admin", *argv, "-c", str(config), "--timeout", str(timeout)],
        capture_output=True,
        text=True,
        timeout=timeout + 30,
        check=False,
    )


def test_admin_command_halts_primary_and_backup_and_reports_errors_and_timeouts(
    tmp_path: Path, processes: Processes, multicast: None
) -> None:
    config = tmp_path / "bus.toml"
    config.write_text(bus_config(tmp_path, True, []))
    processes.start("sequencer", [*seqbus_cli(), "sequencer", "-c", str(config)])
    engines = [
        processes.start(
            f"engine{i}",
            [*seqbus_cli(), "node", "examples.exchange.engine:MatchingEngine", "-c", str(config)]
            + ["--account", "ME", "--instance", str(i), "--rewind", "--path", str(ROOT)],
        )
        for i in (1, 2)
    ]

    # the engines answer once they are up; help is built into every node
    deadline = time.monotonic() + STARTUP_S
    for _ in range(30):
        listing = _admin(config, "commands", "ME", timeout=2.0)
        if listing.returncode == 0 or time.monotonic() > deadline:
            break
        assert all(e.poll() is None for e in engines), processes.logs()
    assert listing.returncode == 0, f"{listing.stderr}\n{processes.logs()}"
    assert "halt [SYMBOL] [REASON] - stop accepting new orders" in listing.stdout
    assert "resume [SYMBOL]" in listing.stdout

    halted = _admin(config, "command", "ME", "halt", "AAPL", "news pending", "--json")
    assert halted.returncode == 0, f"{halted.stderr}\n{processes.logs()}"
    reply = json.loads(halted.stdout)
    assert reply["status"] == "Ok" and reply["replied_by"] in (1, 2)
    assert reply["text"] == f"halted AAPL at #{reply['command_sequence']}: news pending"
    assert reply["reply_sequence"] > reply["command_sequence"] > 0

    book = _admin(config, "command", "ME", "book", "AAPL")
    assert book.returncode == 0, book.stderr
    assert book.stdout.strip() == "AAPL | buy - | sell - | HALTED"

    unknown = _admin(config, "command", "ME", "nope")
    assert unknown.returncode == 1
    assert "ME answered UnknownCommand: unknown command 'nope'" in unknown.stderr

    failed = _admin(config, "command", "ME", "halt", "XXX")
    assert failed.returncode == 1
    assert "ME answered Failed: unknown symbol 'XXX'" in failed.stderr

    nobody = _admin(config, "command", "NOBODY", "help", timeout=1.5)
    assert nobody.returncode == EXIT_ADMIN_TIMEOUT
    assert "no node of account NOBODY answered within 1.5 s" in nobody.stderr

    bad = _admin(config, "command", "WAY-TOO-LONG", "help")
    assert bad.returncode == 1 and "1 to 8 ASCII characters" in bad.stderr
    assert all(e.poll() is None for e in engines), processes.logs()

    # the instance whose replies the sequencer kept dies: its twin halted at the same point
    first = json.loads(_admin(config, "command", "ME", "book", "AAPL", "--json").stdout)
    survivor = 3 - first["replied_by"]
    processes.kill(engines[first["replied_by"] - 1])
    after = _admin(config, "command", "ME", "book", "AAPL", "--json")
    assert after.returncode == 0, f"{after.stderr}\n{processes.logs()}"
    reply = json.loads(after.stdout)
    assert reply["replied_by"] == survivor
    assert reply["text"] == "AAPL | buy - | sell - | HALTED"

    # both gone; a late joiner rewinds the journal, replays the halt (its replies to the old
    # commands numbered, not sent again) and answers as they would have
    processes.kill(engines[survivor - 1])
    processes.start(
        "engine3",
        [*seqbus_cli(), "node", "examples.exchange.engine:MatchingEngine", "-c", str(config)]
        + ["--account", "ME", "--instance", "3", "--rewind", "--path", str(ROOT)],
    )
    late = _admin(config, "command", "ME", "book", "AAPL", "--json", timeout=STARTUP_S)
    assert late.returncode == 0, f"{late.stderr}\n{processes.logs()}"
    reply = json.loads(late.stdout)
    assert (reply["replied_by"], reply["text"]) == (3, "AAPL | buy - | sell - | HALTED")


def test_admin_command_without_a_sequencer_times_out_clearly(tmp_path: Path) -> None:
    listen = f"127.0.0.1:{free_udp_port()}"
    config = tmp_path / "bus.toml"
    config.write_text(bus_config(tmp_path, False, [listen]))
    proc = _admin(config, "command", "ME", "help", "--listen", listen, timeout=1.0)
    assert proc.returncode == EXIT_ADMIN_TIMEOUT
    assert "no answer from the sequencer within 1 s" in proc.stderr


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["command", "ME", "bad name"], "is not a command name"),
        (["command", "ME", "help", "--timeout", "0"], "timeout must be more than 0 s"),
        (["command", "ME", "help", "--sender", "ME"], "must not be the target's (ME)"),
    ],
)
def test_admin_command_rejects_bad_input(tmp_path: Path, argv: list[str], error: str) -> None:
    config = tmp_path / "bus.toml"
    config.write_text(bus_config(tmp_path, False, [f"127.0.0.1:{free_udp_port()}"]))
    proc = subprocess.run(
        [*seqbus_cli(), "admin", *argv, "-c", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 1
    assert error in proc.stderr
