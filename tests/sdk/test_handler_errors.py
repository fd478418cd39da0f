"""Errors in handlers (docs/sdk.md): a ledger whose handler raises on one transfer, over real
sockets (a sequencer with its replayer, nodes on UDP unicast), under each policy:

* fail-stop (the default): the primary, its hot backup and a late joiner all stop at the same
  sequence, and their status names the sequence, the message type and the traceback; so does
  ``seqbus node``'s report when it exits;
* ``on_error = "skip"``: twins and a late joiner skip the same messages, count them and agree
  on the state;
* start past: the stopped account, restarted with ``skip = [SEQ]``, goes on and its instances
  agree, a fixed handler included.

Every wait is on the stream (a node's sequence, a thread's end), bounded in time.
"""

from __future__ import annotations

import gc
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import seqbus
from seqbus import _core
from seqbus.cli import EXIT_HANDLER_FAILED
from seqbus.crossconnect import BusSpec, run_cross
from seqbus.demo import bus_config, free_udp_port
from seqbus.errors import SeqbusError
from seqbus.node import Node
from seqbus.archive import JournalArchiver, replay
from tests.archive.session import ir_json
from tests.conftest import ROOT, Processes, seqbus_cli
from tests.sdk.ledger import POISON, Feeder, FixedLedger, Ledger

#: Transfers of 1..AMOUNTS, once each (amounts identify transfers).
AMOUNTS = list(range(1, 61))
WAIT_S = 90.0


@dataclass
class Running:
    node: Node
    thread: threading.Thread
    stop: threading.Event
    error: list[BaseException] = field(default_factory=list)


class Bus:
    """A sequencer (with its replayer) in this process and nodes on threads, each with its own
    unicast address; every node and the sequencer are stopped at the end."""

    def __init__(self, tmp_path: Path, extra: str = "") -> None:
        self.listen = [f"127.0.0.1:{free_udp_port()}" for _ in range(8)]
        self.config = tmp_path / "bus.toml"
        self.base = bus_config(tmp_path, False, self.listen)
        self.configure(extra)
        self.sequencer = _core.Sequencer(str(self.config))
        self.running: list[Running] = []

    def configure(self, extra: str) -> None:
        """The configuration nodes started from now on read (``extra`` is appended)."""
        self.config.write_text(self.base + "\n" + extra)

    def start(self, node: Node, account: str, instance: int) -> Running:
        stop = threading.Event()
        listen = self.listen[len(self.running)]
        run = Running(node, threading.Thread(target=lambda: None), stop)

        def body() -> None:
            try:
                seqbus.run(node, self.config, account, instance, start="rewind", listen=listen,
                           stop=stop)
            except BaseException as exc:  # the test looks at it
                run.error.append(exc)

        run.thread = threading.Thread(target=body, name=f"{account}-{instance}", daemon=True)
        run.thread.start()
        self.running.append(run)
        return run

    def start_cross(self, node: Node, account: str, instance: int) -> Running:
        """``node`` as the only bus of a cross-connect node (``seqbus.run_cross``)."""
        stop = threading.Event()
        spec = BusSpec(node, str(self.config), account, instance, start="rewind",
                       listen=self.listen[len(self.running)])
        run = Running(node, threading.Thread(target=lambda: None), stop)

        def body() -> None:
            try:
                run_cross([spec], stop=stop)
            except BaseException as exc:  # the test looks at it
                run.error.append(exc)

        run.thread = threading.Thread(target=body, name=f"cross-{account}-{instance}",
                                      daemon=True)
        run.thread.start()
        self.running.append(run)
        return run

    def close(self) -> None:
        for r in self.running:
            r.stop.set()
        for r in self.running:
            r.thread.join(10.0)
        self.sequencer.stop()
        assert self.sequencer.join(10.0)


@pytest.fixture
def bus_factory(tmp_path: Path) -> Iterator[Callable[[str], Bus]]:
    # a SimBus an earlier test left for the collector must not be dropped on a node thread
    # (it is bound to the thread that made it)
    gc.collect()
    made: list[Bus] = []

    def make(extra: str = "") -> Bus:
        made.append(Bus(tmp_path, extra))
        return made[-1]

    yield make
    for b in made:
        b.close()


def wait_for(what: str, cond: Callable[[], bool], runs: list[Running]) -> None:
    """Wait until ``cond()``; fail at once if a node thread died unexpectedly."""
    deadline = time.monotonic() + WAIT_S
    while not cond():
        for r in runs:
            if r.error:
                raise r.error[0]
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.01)


def feed(bus: Bus, amounts: list[int], account: str = "FEED") -> Feeder:
    feeder = Feeder()
    feeder.amounts = amounts
    run = bus.start(feeder, account, 1)
    wait_for("the feeder to see its transfers sequenced",
             lambda: len(feeder.sequences) == len(amounts), [run])
    return feeder


def caught_up(ledgers: list[Ledger], last: int) -> Callable[[], bool]:
    return lambda: all(n.sequence() >= last for n in ledgers)


def stopped_by(run: Running) -> BaseException:
    run.thread.join(WAIT_S)
    assert not run.thread.is_alive(), f"{run.thread.name} did not stop"
    assert len(run.error) == 1, run.error
    return run.error[0]


def test_fail_stop_every_instance_stops_at_the_same_message_and_says_so(
    bus_factory: Callable[[str], Bus],
) -> None:
    bus = bus_factory("")
    primary, backup = Ledger(), Ledger()
    runs = [bus.start(primary, "LEDGER", 1), bus.start(backup, "LEDGER", 2)]
    feeder = feed(bus, AMOUNTS)
    poison_seq = feeder.sequences[POISON]

    for run in runs:
        error = stopped_by(run)
        assert isinstance(error, ValueError) and "breaks the ledger" in str(error)
        assert f"raised at #{poison_seq} (Ping)" in error.__notes__[0]
    # the late joiner replays the journal and stops at the same message
    late = Ledger()
    error = stopped_by(bus.start(late, "LEDGER", 3))
    assert isinstance(error, ValueError)

    before = sum(a for a in AMOUNTS if a < POISON)
    for node in (primary, backup, late):
        status = node.status()
        failure = status["failure"]
        assert failure is not None and node.stats.failure is not None
        assert (failure["sequence"], failure["message_type"], failure["handler"]) == (
            poison_seq, "Ping", "on_ping"
        )
        assert failure["action"] == "stopped"
        assert failure["error"] == f"ValueError: transfer of {POISON} breaks the ledger"
        assert "tests/sdk/ledger.py" in failure["traceback"]
        assert 'raise ValueError(f"transfer of {amount} breaks the ledger")' in failure["traceback"]
        assert status["stopped"] and status["sequence"] == poison_seq
        assert status["skipped"] == 0 and status["on_error"] == "stop"
        assert node.balance == before  # nothing after the poison was booked
    assert primary.state_hash() == backup.state_hash() == late.state_hash()


def test_skip_policy_twins_and_a_late_joiner_skip_the_same_messages(
    bus_factory: Callable[[str], Bus], tmp_path: Path,
) -> None:
    bus = bus_factory('[node.accounts.LEDGER]\non_error = "skip"\n')
    poisons = frozenset({POISON, 40})

    class TwoPoisons(Ledger):
        poison = poisons

    primary, backup = TwoPoisons(), TwoPoisons()
    runs = [bus.start(primary, "LEDGER", 1), bus.start(backup, "LEDGER", 2)]
    feeder = feed(bus, AMOUNTS)
    last = max(feeder.sequences.values())
    wait_for("the twins to handle every transfer", caught_up([primary, backup], last), runs)
    late = TwoPoisons()
    late_run = bus.start(late, "LEDGER", 3)
    wait_for("the late joiner to catch up", caught_up([late], last), [*runs, late_run])

    skipped = sorted(feeder.sequences[a] for a in poisons)
    for node in (primary, backup, late):
        assert node.on_error == "skip"  # from the configuration, not the class
        assert node.stats.skipped == 2 and node.stats.skipped_sequences == skipped
        assert node.stats.failure is None and not node.stopped
        last_error = node.stats.last_error
        assert last_error is not None
        assert (last_error.sequence, last_error.action) == (skipped[-1], "skipped")
        assert node.balance == sum(AMOUNTS) - sum(poisons)
        assert node.booked == len(AMOUNTS) - 2
    assert primary.state_hash() == backup.state_hash() == late.state_hash()

    # the offline replay of the session's archive skips them too (the policy is the node's)
    archive = tmp_path / "session.archive"
    schemas = [(2, "pingpong", ir_json("pingpong"))]
    archiver = JournalArchiver(tmp_path / "journal", archive, schemas)
    assert archiver.catch_up() >= last
    archiver.seal()
    replayed = replay(TwoPoisons(on_error="skip"), str(archive), account="LEDGER")
    assert replayed.stats.skipped_sequences == skipped
    assert replayed.state_hash() == primary.state_hash()


def test_a_cross_connect_node_follows_its_accounts_policy(
    bus_factory: Callable[[str], Bus],
) -> None:
    # the configuration says skip: the cross-connect instance skips what the plain one skips
    bus = bus_factory('[node.accounts.LEDGER]\non_error = "skip"\n')
    plain, cross = Ledger(), Ledger()
    runs = [bus.start(plain, "LEDGER", 1), bus.start_cross(cross, "LEDGER", 2)]
    feeder = feed(bus, AMOUNTS)
    last = max(feeder.sequences.values())
    wait_for("both instances to handle every transfer", caught_up([plain, cross], last), runs)
    for node in (plain, cross):
        assert node.on_error == "skip"
        assert node.stats.skipped_sequences == [feeder.sequences[POISON]]
        assert node.stats.failure is None
    assert cross.state_hash() == plain.state_hash()


def test_a_cross_connect_node_stops_at_a_poison_and_says_so(
    bus_factory: Callable[[str], Bus],
) -> None:
    bus = bus_factory("")
    cross = Ledger()
    run = bus.start_cross(cross, "LEDGER", 1)
    feeder = feed(bus, AMOUNTS)
    error = stopped_by(run)
    assert isinstance(error, ValueError) and "breaks the ledger" in str(error)
    failure = cross.status()["failure"]
    assert failure is not None
    assert (failure["sequence"], failure["handler"]) == (feeder.sequences[POISON], "on_ping")
    assert cross.balance == sum(a for a in AMOUNTS if a < POISON)


def test_a_stopped_account_restarted_past_the_poison_goes_on_and_agrees(
    bus_factory: Callable[[str], Bus],
) -> None:
    bus = bus_factory("")
    first = Ledger()
    first_run = bus.start(first, "LEDGER", 1)
    feeder = feed(bus, AMOUNTS[:40])
    stopped_by(first_run)
    assert first.stats.failure is not None
    poison_seq = first.stats.failure.sequence
    assert poison_seq == feeder.sequences[POISON]

    # the operator starts the account past it: every instance reads the same skip list
    bus.configure(f"[node.accounts.LEDGER]\nskip = [{poison_seq}]\n")
    restarted, fixed = Ledger(), FixedLedger()
    runs = [bus.start(restarted, "LEDGER", 1), bus.start(fixed, "LEDGER", 2)]
    more = feed(bus, AMOUNTS[40:], account="FEED2")
    last = max(more.sequences.values())
    wait_for("the restarted instances to go past the poison", caught_up([restarted, fixed], last),
             runs)
    for node in (restarted, fixed):
        assert node.skip_sequences == (poison_seq,)
        assert node.stats.skipped_sequences == [poison_seq] and node.stats.skipped == 1
        assert node.stats.failure is None and node.stats.last_error is None
        assert node.balance == sum(AMOUNTS) - POISON
    assert restarted.state_hash() == fixed.state_hash()
    # without the skip the fixed handler books the transfer: the instances would part
    assert not any(r.error for r in runs)


def test_node_command_reports_the_failure_and_exits(tmp_path: Path, processes: Processes) -> None:
    listen = [f"127.0.0.1:{free_udp_port()}" for _ in range(2)]
    config = tmp_path / "bus.toml"
    config.write_text(bus_config(tmp_path, False, listen))
    sequencer = _core.Sequencer(str(config))
    try:
        proc = processes.start(
            "ledger",
            [*seqbus_cli(), "node", "tests.sdk.ledger:Ledger", "-c", str(config), "--account",
             "LEDGER", "--rewind", "--listen", listen[0], "--path", str(ROOT)],
        )
        feeder = Feeder()
        feeder.amounts = AMOUNTS[:30]
        stop = threading.Event()
        thread = threading.Thread(
            target=seqbus.run, args=(feeder, config, "FEED"),
            kwargs={"listen": listen[1], "stop": stop}, daemon=True,
        )
        thread.start()
        try:
            code = processes.wait(proc, WAIT_S)
        finally:
            stop.set()
            thread.join(10.0)
    finally:
        sequencer.stop()
        assert sequencer.join(10.0)
    log = processes.log("ledger")
    assert code == EXIT_HANDLER_FAILED, log
    seq = feeder.sequences[POISON]
    assert f"seqbus node: LEDGER/1: on_ping raised at #{seq} (Ping): ValueError: transfer of " \
        f"{POISON} breaks the ledger; stopped" in log
    assert "Traceback (most recent call last)" in log and "tests/sdk/ledger.py" in log
    # printed once (the status line holds it too, as JSON)
    assert [line for line in log.splitlines() if line.startswith("Traceback")] == [
        "Traceback (most recent call last):"
    ], log
    status = json.loads(log.split("seqbus node: status: ", 1)[1].splitlines()[0])
    assert status["failure"]["sequence"] == seq and status["sequence"] == seq
    assert status["account"] == "LEDGER" and status["stopped"]


def test_bad_policies_are_refused_naming_the_key(tmp_path: Path) -> None:
    with pytest.raises(SeqbusError, match="on_error must be 'stop' or 'skip', not 'ignore'"):
        Ledger(on_error="ignore")  # type: ignore[arg-type]
    with pytest.raises(SeqbusError, match="skip: sequences are integers from 1, not 0"):
        Ledger(skip=[0])
    config = tmp_path / "bus.toml"
    base = bus_config(tmp_path, False, [f"127.0.0.1:{free_udp_port()}"])
    config.write_text(base + '\n[node.accounts.LEDGER]\non_error = "retry"\n')
    with pytest.raises(seqbus.ConfigError, match=r"node\.accounts\.LEDGER\.on_error"):
        _core.error_policy(str(config), "LEDGER")
    config.write_text(base.replace("[node]", '[node]\non_error = "later"'))
    with pytest.raises(seqbus.ConfigError, match=r"node\.on_error: unknown variant `later`"):
        _core.error_policy(str(config), "LEDGER")
    config.write_text(base + "\n[node.accounts.LEDGER]\nskip = [12, 7]\n")
    assert _core.error_policy(str(config), "LEDGER") == (None, [12, 7])
    assert _core.error_policy(str(config), "OTHER") == (None, [])
