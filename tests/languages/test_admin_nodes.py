"""Admin commands across languages (issue 31 item 3): a Python, a Java and a C++ instance of one
account (hot-hot) answer each AdminCommand with the same AdminReply under the same command
sequence, so the sequencer keeps one and their command numbering stays equal.

* The twins (tests/languages/admin_twin.py; AdminTwin.java in runtime/java/node's tests;
  admin_twin.hpp in runtime/cpp/node/tests) register the same commands; each posts a Pong with
  its running total for every Ping of another account.
* Commands go through the Python admin API (seqbus.admin.send_admin_command) while all three
  run; then the Python primary is killed (kill -9), then the Java instance: every reply and every
  Pong must still come, once, with the account's command sequences consecutive. An instance
  that did not answer an admin command would number its next command as the reply's and the
  sequencer would drop it as a copy: its Pong would never show.
* The unit tests of the Java and C++ runtimes read admin_vectors.txt; the first test here checks
  that it is what the Python twin answers today.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from examples.pingpong.messages import Ping, Pong, PongView
from seqbus import _core
from seqbus.admin import help_text, send_admin_command
from seqbus.batch import RECORD_MESSAGE, account_key, message_type, records
from tests.conftest import ROOT, Processes, seqbus_cli
from tests.e2e.busconfig import wait_udp_bound, write_bus_config
from tests.languages.admin_twin import VECTORS, TwinNode, vectors_text
from tests.languages.conftest import BUILD, build_nodes

ACCOUNT = "TWIN"


def test_the_vectors_are_what_the_python_twin_answers() -> None:
    assert VECTORS.read_text() == vectors_text(), (
        "tests/languages/admin_vectors.txt is stale: python -m tests.languages.admin_twin vectors"
    )


class Stream:
    """A client of the bus (account DRIVER) that sends Pings and keeps what the stream shows of
    account TWIN: (sequence, template, command sequence, instance, body)."""

    def __init__(self, config: Path) -> None:
        self.client = _core.NodeClient(str(config), "DRIVER", 1, start="live")
        self.twin: list[tuple[int, int, int, int, bytes]] = []
        self.key = account_key(ACCOUNT)
        deadline = time.monotonic() + 20
        while not self.client.is_ready():
            assert time.monotonic() < deadline, "the driver got no answer from the sequencer"
            self.poll()

    def poll(self) -> None:
        batch = self.client.poll(4096, 0.05)
        for r in records(batch):
            if r.record_type != RECORD_MESSAGE or r.account != self.key:
                continue
            _, template = message_type(batch, r)
            self.twin.append((r.sequence, template, r.command_seq, r.instance,
                              bytes(batch[r.body:r.end])))

    def pong(self, ping_id: int, timeout: float = 20.0) -> tuple[int, PongView, int]:
        """Sends Ping ``ping_id`` and waits for the twin's Pong: (command seq, Pong, instance)."""
        self.client.send(Ping(id=ping_id, sent_at_ns=0).encode())
        deadline = time.monotonic() + timeout
        while True:
            for _, template, command_seq, instance, body in self.twin:
                if template == 2:
                    pong = Pong.decode(body)
                    if pong.id == ping_id:
                        return command_seq, pong, instance
            assert time.monotonic() < deadline, f"no Pong {ping_id}: {self.twin}"
            self.poll()

    def settle(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.poll()


@pytest.mark.slow
@pytest.mark.usefixtures("multicast")
def test_python_java_and_cpp_instances_answer_admin_commands_as_one(
    tmp_path: Path, processes: Processes
) -> None:
    twin_cpp = BUILD / "cpp" / "node" / "seqbus-cpp-admin-twin"
    test_classes = ROOT / "runtime" / "java" / "node" / "target" / "test-classes"
    if not twin_cpp.exists() or not (test_classes / "seqbus" / "node" / "AdminTwin.class").exists():
        build_nodes()
    bus = write_bus_config(tmp_path, session="ADMIN00001")
    env = {"PYTHONPATH": str(ROOT)}
    cli = seqbus_cli()
    sequencer = processes.start("sequencer", [*cli, "sequencer", "-c", str(bus.path)], env=env)
    if not wait_udp_bound(bus.upstream, 30.0) or sequencer.poll() is not None:
        pytest.fail(f"the sequencer did not start\n{processes.logs()}")
    classes = test_classes.parent / "classes"  # before the installed seqbus-node jar
    classpath = f"{test_classes}:{classes}:{(BUILD / 'java.classpath').read_text().strip()}"
    library = ROOT / "rust" / "target" / "release" / "libseqbus_ffi.so"
    twins = {
        "TWIN-1": [*cli, "node", "tests.languages.admin_twin:TwinNode", "-c", str(bus.path),
                   "--account", ACCOUNT, "--instance", "1", "--path", str(ROOT)],
        "TWIN-2": ["java", f"-Dseqbus.node.library={library}", "-cp", classpath,
                   "seqbus.node.AdminTwin", str(bus.path), ACCOUNT, "2"],
        "TWIN-3": [str(twin_cpp), str(bus.path), ACCOUNT, "3"],
    }
    procs = {name: processes.start(name, command, env=env) for name, command in twins.items()}
    deadline = time.monotonic() + 60
    while not all("opened" in processes.log(name) for name in twins):
        for name, proc in procs.items():
            assert proc.poll() is None, f"{name} exited\n{processes.logs()}"
        assert time.monotonic() < deadline, f"the twins did not open\n{processes.logs()}"
        time.sleep(0.1)
    stream = Stream(bus.path)

    def admin(name: str, *args: str) -> Any:
        result = send_admin_command(str(bus.path), ACCOUNT, name, list(args), timeout=20)
        stream.settle(0.3)  # every instance's copy of the reply has reached the sequencer
        return result

    replied: list[int] = []
    # all three up: one reply per command, whichever instance's the sequencer took first
    bumped = admin("bump", "5")
    assert (bumped.status, bumped.text) == ("Ok", "total 5"), bumped
    helped = admin("help")
    assert (helped.status, helped.text) == ("Ok", help_text(TwinNode.admin_commands()))
    refused = admin("refuse")
    assert (refused.status, refused.text) == ("Failed", "refused at total 5"), refused
    replied += [bumped.replied_by, helped.replied_by, refused.replied_by]
    first_pong = stream.pong(1)
    assert first_pong[1].ping_sent_at_ns == 5

    # the Python primary dies: the Java and C++ instances answer alone
    processes.kill(procs["TWIN-1"])
    procs["TWIN-1"].wait(timeout=10)
    bumped = admin("bump", "2", "yes")
    assert (bumped.status, bumped.text) == ("Ok", "total 9"), bumped
    assert bumped.replied_by in (2, 3), bumped
    second_pong = stream.pong(2)
    assert second_pong[1].ping_sent_at_ns == 9 and second_pong[2] in (2, 3)

    # then the Java one: the C++ instance alone
    processes.kill(procs["TWIN-2"])
    procs["TWIN-2"].wait(timeout=10)
    echoed = admin("echo", "a", "b c")
    assert (echoed.status, echoed.text, echoed.replied_by) == ("Ok", "a b c", 3), echoed
    bad = admin("bump", "x")
    assert bad.status == "BadArguments" and bad.replied_by == 3, bad
    assert bad.text == "bump: amount must be integer, not 'x'; usage: bump AMOUNT [DOUBLE]"
    third_pong = stream.pong(3)
    assert third_pong[1].ping_sent_at_ns == 9 and third_pong[2] == 3
    stream.settle(0.5)

    # the account's commands in the stream: each reply and Pong once, numbered 1, 2, 3...
    templates = [template for _, template, _, _, _ in stream.twin]
    command_seqs = [command_seq for _, _, command_seq, _, _ in stream.twin]
    assert command_seqs == list(range(1, len(command_seqs) + 1)), stream.twin
    # 3 replies, Pong 1, a reply, Pong 2, 2 replies, Pong 3
    assert templates == [5, 5, 5, 2, 5, 2, 5, 5, 2], stream.twin
    # the replies before the first kill came from the instances' shared numbering
    assert set(replied) <= {1, 2, 3}
    stream.client.close()
