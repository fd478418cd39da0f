"""``seqbus up`` and ``seqbus tail`` (issue 29, item 3), from the seqbus wheel in a fresh
virtual environment outside the checkout, with the project ``seqbus new`` wrote installed: no
root and no multicast (the buses send by UDP unicast to node slots on loopback).

* Three sequencers (``seqbus up --cluster``), the project's Ledger and Teller as ``seqbus node``
  processes and ``seqbus tail`` (the project's generated package, no pyarrow), every one of them
  without any privilege (``setpriv``: no capability, none to gain), exchange 1,000
  transfers; the leading sequencer is killed (kill -9) midway. Checked on the stream the tail
  printed: every transfer once, each answered once with what a ledger replaying the transfers
  computes, each sender's command sequences 1..N without a hole, sequences rising; a tail
  rewinding from sequence 1 afterwards prints the same messages. SIGTERM stops ``seqbus up``,
  which stops every process it started by PID and says so.
* ``seqbus up`` with no configuration writes one and runs it; a second one on the same
  configuration is refused naming the addresses in use; tails take different free slots;
  SIGINT stops it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
import tomllib
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Processes
from tests.packaging.conftest import Wheels, outside_checkout
from tests.packaging.scaffold import NAME, Project, free_port_base, ledger_project

pytestmark = [pytest.mark.slow, pytest.mark.packaging]

#: What runs a process without privileges: no capability in any set, none to be gained (what
#: root has beyond a user's rights: no network namespaces, no interface set-up, no raw sockets).
SETPRIV = shutil.which("setpriv") or "/usr/bin/setpriv"
NO_PRIVILEGES = [SETPRIV, "--bounding-set=-all", "--inh-caps=-all", "--no-new-privs"]
TRANSFERS = 1000  # the Teller's default: 100 a second of stream time
ACCOUNTS = ("ALICE", "BOB", "CAROL", "DAVE")


@pytest.fixture(scope="module")
def project(wheels: Wheels, tmp_path_factory: pytest.TempPathFactory) -> Project:
    return ledger_project(wheels, tmp_path_factory)


def wait_until(what: str, check: Any, timeout: float, processes: Processes) -> Any:
    """``check()``'s first truthy value, polled; fails naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.1)
    pytest.fail(f"no {what} within {timeout} s\n{processes.logs()}")


def tail_records(text: str) -> list[dict[str, Any]]:
    """The JSON lines of a tail's output (its log lines on stderr are mixed in)."""
    return [json.loads(line) for line in text.splitlines() if line.startswith("{")]


def started_pids(log: str) -> dict[str, int]:
    """``seqbus up``'s "up: started NAME: pid N" lines."""
    return {m.group(1): int(m.group(2))
            for m in re.finditer(r"up: started (.+?): pid (\d+)", log)}


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return Path(f"/proc/{pid}/stat").read_text().split(") ", 1)[1].startswith("Z")


def leader(config: Path, venv_python: str, env: dict[str, str]) -> int | None:
    """The member leading the bus, from the status endpoints (None during an election)."""
    out = subprocess.run(
        [venv_python, "-c", "import json, sys; from seqbus.status import member_statuses; "
         "print(json.dumps([[e.member, s] for e, s in member_statuses(sys.argv[1], 0.5)]))",
         str(config)], env=env, capture_output=True, text=True, timeout=30, check=True)
    for member, status in json.loads(out.stdout):
        if isinstance(status, dict) and status.get("cluster", {}).get("role") == "leader":
            return int(member)
    return None


def check_the_stream(records: list[dict[str, Any]]) -> None:
    """Every transfer once and answered once, as a ledger replaying them answers; each
    sender's command sequences without a hole; stream sequences rising."""
    seqs = [r["sequence"] for r in records]
    assert seqs == sorted(set(seqs)), "sequences not rising, or repeated"
    kinds = Counter(r["type"] for r in records)
    assert kinds[f"{NAME}.Transfer"] == TRANSFERS, kinds
    assert kinds[f"{NAME}.Booked"] + kinds[f"{NAME}.Refused"] == TRANSFERS, kinds
    for account in ("TELLER", "LEDGER"):
        commands = [r["command_seq"] for r in records if r["account"] == account]
        assert commands == list(range(1, TRANSFERS + 1)), f"{account}: holes or repeats"
    balances = dict.fromkeys(ACCOUNTS, 1000)
    asked: dict[int, dict[str, Any]] = {}
    answered: set[int] = set()
    expect: dict[int, tuple[str, dict[str, Any]]] = {}
    for r in records:
        f = r["fields"]
        if r["type"] == f"{NAME}.Transfer":
            assert f["transfer_id"] not in asked
            asked[f["transfer_id"]] = f
            src, dst, amount = f["from_account"], f["to_account"], f["amount"]
            if balances[src] >= amount:
                balances[src] -= amount
                balances[dst] += amount
                expect[f["transfer_id"]] = ("Booked", {"from_balance": balances[src],
                                                       "to_balance": balances[dst]})
            else:
                expect[f["transfer_id"]] = ("Refused", {})
        else:
            tid = f["transfer_id"]
            assert tid in asked and tid not in answered, f"answer to {tid} out of place"
            answered.add(tid)
            kind, values = expect[tid]
            assert r["type"] == f"{NAME}.{kind}", (r, kind)
            assert {k: f[k] for k in values} == values, (r, values)
    assert sorted(asked) == list(range(TRANSFERS)) and answered == set(asked)


def capabilities(pid: int) -> dict[str, int]:
    """The effective, permitted and bounding capability sets of process ``pid``."""
    status = Path(f"/proc/{pid}/status").read_text()
    return {k: int(v, 16) for k, v in re.findall(r"^(Cap(?:Eff|Prm|Bnd)):\s*([0-9a-f]+)$", status,
                                               re.MULTILINE)}


def test_a_cluster_two_nodes_and_a_tail_lose_nothing_when_the_leader_is_killed(
    project: Project, processes: Processes
) -> None:
    venv, cwd = project.venv, project.path
    seqbus = venv.bin("seqbus")
    config = cwd / "cluster.toml"
    doc = tomllib.loads(config.read_text())
    # nothing here needs multicast, or a namespace, or root
    assert doc["downstream"]["transport"] == "udp-unicast" and "discovery" not in doc
    assert "239." not in config.read_text()

    up = processes.start("up", [*NO_PRIVILEGES, seqbus, "up", "--cluster"], venv.env, cwd=cwd,
                         inherit_env=False)
    wait_until("ready bus", lambda: "up: ready: sequencer" in processes.log("up"), 60,
               processes)
    pids = started_pids(processes.log("up"))
    assert set(pids) == {"sequencer 1", "sequencer 2", "sequencer 3", "replayer"}, pids
    for pid in (up.pid, *pids.values()):  # the bus holds no capability at all
        assert capabilities(pid) == {"CapEff": 0, "CapPrm": 0, "CapBnd": 0}, pid
    # what nodes need: the configuration and the slots (a node takes a free one itself),
    # printed after the ready line
    wait_until("the join text", lambda: "More slots:" in processes.log("up"), 30, processes)
    assert f"\n  {project.slot(0)}\n" in processes.log("up")
    assert "each takes a free slot itself" in processes.log("up")

    tail = processes.start("tail", [*NO_PRIVILEGES, seqbus, "tail", "-c", "cluster.toml",
                                    "--json"], venv.env, cwd=cwd, inherit_env=False)
    wait_until("tail following", lambda: "tail: following" in processes.log("tail"),
               60, processes)
    assert f"decoding bus (seqbus.bus, schema 1), {NAME} ({NAME}.messages" in processes.log(
        "tail")
    ledger = processes.start("ledger", [*NO_PRIVILEGES, seqbus, "node", f"{NAME}.nodes:Ledger",
                                        "-c", "cluster.toml", "--account", "LEDGER", "--listen",
                                        project.slot(0), "--rewind"],
                             venv.env, cwd=cwd, inherit_env=False)
    wait_until("the ledger connected", lambda: "connected to the sequencers" in
               processes.log("ledger"), 60, processes)
    # no --listen: the first slot no socket holds (the ledger has the first, the tail the last)
    teller = processes.start("teller", [*NO_PRIVILEGES, seqbus, "node", f"{NAME}.nodes:Teller",
                                        "-c", "cluster.toml", "--account", "TELLER"], venv.env,
                             cwd=cwd, inherit_env=False)
    wait_until("the teller on a slot", lambda: "TELLER/1: listens on node slot" in
               processes.log("teller"), 60, processes)
    assert f"TELLER/1: listens on node slot {project.slot(1)}" in processes.log("teller")
    for proc in (tail, ledger, teller):
        assert capabilities(proc.pid) == {"CapEff": 0, "CapPrm": 0, "CapBnd": 0}, proc.args

    def seen(kind: str) -> int:
        return sum(1 for r in tail_records(processes.log("tail"))
                   if r["type"] == f"{NAME}.{kind}")

    wait_until("200 answered transfers", lambda: seen("Booked") + seen("Refused") >= 200, 120,
               processes)
    killed = wait_until("a leader", lambda: leader(config, venv.python, venv.env), 30,
                        processes)
    os.kill(pids[f"sequencer {killed}"], signal.SIGKILL)
    before = seen("Transfer")
    assert before < TRANSFERS - 100, f"the run was nearly over ({before}) before the kill"
    assert teller.wait(timeout=180) == 0, processes.logs()  # every transfer answered once
    wait_until(f"{2 * TRANSFERS} messages at the tail",
               lambda: len(tail_records(processes.log("tail"))) >= 2 * TRANSFERS, 60, processes)

    up_log = processes.log("up")
    assert (f"sequencer {killed} (pid {pids[f'sequencer {killed}']}) exited: killed by "
            "SIGKILL; 2 of 3 sequencers running: the bus goes on") in up_log, up_log
    now = leader(config, venv.python, venv.env)
    assert now is not None and now != killed
    assert re.search(rf"up: sequencer {now} \(pid \d+\) leads the bus, term \d+",
                     up_log.split("killed by SIGKILL", 1)[1]), up_log

    tail.send_signal(signal.SIGTERM)
    assert tail.wait(timeout=30) == 0, processes.log("tail")
    assert f"tail: stopped after {2 * TRANSFERS} messages (SIGTERM)" in processes.log(
        "tail")
    live = tail_records(processes.log("tail"))
    assert len(live) == 2 * TRANSFERS, f"{len(live)} messages at the tail"
    check_the_stream(live)

    # a tail rewinding the session from the replayers prints the very same messages
    again = subprocess.run([seqbus, "tail", "-c", "cluster.toml", "--json", "--from", "1",
                            "--count", str(2 * TRANSFERS)], cwd=cwd, env=venv.env,
                           capture_output=True, text=True, timeout=120, check=False)
    assert again.returncode == 0, again.stderr
    assert tail_records(again.stdout) == live

    # SIGTERM: seqbus up stops what it started, by PID, and says so
    up.send_signal(signal.SIGTERM)
    assert up.wait(timeout=60) == 0, processes.log("up")
    up_log = processes.log("up")
    for name, pid in pids.items():
        if name != f"sequencer {killed}":
            assert f"up: stopped {name} (pid {pid}): exit status 0" in up_log, up_log
        assert gone(pid), f"{name} (pid {pid}) still running"


def test_up_writes_a_bus_refuses_a_second_and_tails_take_free_slots(
    project: Project, processes: Processes, tmp_path: Path
) -> None:
    venv, seqbus = project.venv, project.venv.bin("seqbus")
    here = outside_checkout(tmp_path / "dev")
    here.mkdir()
    base = free_port_base()
    up = processes.start("up", [seqbus, "up", "--port-base", str(base), "--nodes", "3"],
                         venv.env, cwd=here, inherit_env=False)
    wait_until("ready bus", lambda: "up: ready: the sequencer answers" in
               processes.log("up"), 60, processes)
    pids = started_pids(processes.log("up"))
    assert set(pids) == {"sequencer", "replayer"}, pids
    written = tomllib.loads((here / "bus.toml").read_text())
    slots = [f"127.0.0.1:{base + 40 + i}" for i in range(3)]
    assert written["downstream"]["subscribers"] == slots
    assert "up: wrote bus.toml: one sequencer, 3 node slots" in processes.log("up")

    second = subprocess.run([seqbus, "up"], cwd=here, env=venv.env, capture_output=True,
                            text=True, timeout=60, check=False)
    assert second.returncode == 1
    assert (f"in use already: 127.0.0.1:{base} (sequencer.upstream), 127.0.0.1:{base + 1} "
            f"(sequencer.status), 127.0.0.1:{base + 2} (replayer.listen)") in second.stderr, (
        second.stderr)

    for n in (1, 2):
        processes.start(f"tail{n}", [seqbus, "tail", "-c", "bus.toml", "--messages",
                                     f"{NAME}.messages"], venv.env, cwd=here,
                        inherit_env=False)
        wait_until(f"tail {n} following",
                   lambda n=n: "tail: following" in processes.log(f"tail{n}"), 60,
                   processes)
    on = {m.group(1) for n in (1, 2)
          for m in re.finditer(r" on (127\.0\.0\.1:\d+);", processes.log(f"tail{n}"))}
    assert on == set(slots[1:]), on  # the last slots first: nodes take the first ones

    # a node with no --listen takes the one slot left; the next one is refused, naming them
    processes.start("ledger", [seqbus, "node", f"{NAME}.nodes:Ledger", "-c", "bus.toml",
                               "--account", "LEDGER"], venv.env, cwd=here, inherit_env=False)
    wait_until("the ledger connected", lambda: "connected to the sequencer" in
               processes.log("ledger"), 60, processes)
    assert f"LEDGER/1: listens on node slot {slots[0]}" in processes.log("ledger")
    refused = subprocess.run([seqbus, "node", f"{NAME}.nodes:Teller", "-c", "bus.toml",
                              "--account", "TELLER"], cwd=here, env=venv.env,
                             capture_output=True, text=True, timeout=60, check=False)
    assert refused.returncode != 0
    assert (f"every node slot of downstream.subscribers is in use ({', '.join(slots)})"
            in refused.stderr), refused.stderr

    up.send_signal(signal.SIGINT)
    assert up.wait(timeout=60) == 0, processes.log("up")
    log = processes.log("up")
    assert (f"up: SIGINT: stopping replayer (pid {pids['replayer']}), sequencer (pid "
            f"{pids['sequencer']})") in log, log
    for name, pid in pids.items():
        assert f"up: stopped {name} (pid {pid}): exit status 0" in log, log
        assert gone(pid)
