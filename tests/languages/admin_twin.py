"""The admin twin: one node class written in Python, Java and C++ alike (issue 31), whose admin
commands the cross-language admin tests run.

* ``TwinNode`` (Python) is the reference: the Java twin (runtime/java/node/src/test/java/seqbus/
  node/AdminTwin.java) and the C++ twin (runtime/cpp/node/tests/admin_twin.cpp) register the same
  commands with the same help, and must post the same AdminReply bytes for the same command.
* On each Ping of another account it posts a Pong with the Ping's id and its running total, so a
  test can see that every instance's state and command numbering agree after admin commands.
* ``python -m tests.languages.admin_twin vectors`` writes admin_vectors.txt: the AdminCommands
  of the admin unit tests of the Java and C++ nodes and the reply this class posts for each
  (tests/languages/test_admin_nodes.py checks that the file is what this class answers today).
  A reply cut at MAX_REPLY_TEXT is not among them (120 kB a line): those tests check the cut of
  ``long 60001`` against the text Python's rule makes.

Run as a node: ``seqbus node tests.languages.admin_twin:TwinNode -c BUS --account TWIN``.
"""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

from examples.pingpong.messages import PingpongNode, PingView, Pong
from seqbus import AdminError, admin_command, bus
from seqbus.batch import RECORD_MESSAGE, pack_record

#: Where the vectors lie (the Java and C++ unit tests read this file).
VECTORS = Path(__file__).with_name("admin_vectors.txt")
#: The account of every vector's node.
ACCOUNT = "TWIN"

log = logging.getLogger("admin_twin")


class TwinNode(PingpongNode):
    """A running total changed by admin commands; a Pong with it for each Ping of another."""

    def __init__(self) -> None:
        super().__init__()
        self.total = 0

    def on_opened(self) -> None:
        log.info("twin %s/%d: opened", self.account, self.instance)

    def on_ping(self, msg: PingView, mine: bool) -> None:
        if not mine:
            self.post(Pong(id=msg.id, ping_sent_at_ns=self.total))

    @admin_command(help="add AMOUNT to the total (twice with DOUBLE)")
    def bump(self, amount: int, double: bool = False) -> str:
        self.total += amount * 2 if double else amount
        return f"total {self.total}"

    @admin_command
    def scale(self, factor: float) -> str:
        return "scale up" if factor > 1 else "scale down"

    @admin_command(help="join the words")
    def echo(self, first: str, *rest: str) -> str:
        return " ".join((first, *rest))

    @admin_command(help="refuse, as a command whose preconditions fail does")
    def refuse(self) -> None:
        raise AdminError(f"refused at total {self.total}")

    @admin_command(help="a reply of COUNT characters")
    def long(self, count: int) -> str:
        return "\u00e9" * count


class GuardedTwin(TwinNode):
    """The twin that takes admin commands from account OPS only."""

    ADMIN_SENDERS = frozenset({"OPS"})


#: (sender, allow-list, name, args) of each vector, in the order one node runs them.
CASES: list[tuple[str, str, str, list[str]]] = [
    ("ADMIN", "", "help", []),
    ("ADMIN", "", "help", ["x"]),
    ("ADMIN", "", "bump", ["5"]),
    ("ADMIN", "", "bump", ["2", "yes"]),
    ("ADMIN", "", "bump", [" +1_0 ", "OFF"]),
    ("ADMIN", "", "bump", []),
    ("ADMIN", "", "bump", ["1", "2", "3"]),
    ("ADMIN", "", "bump", ["x"]),
    ("ADMIN", "", "bump", ["1_", "no"]),
    ("ADMIN", "", "bump", ["1", "maybe"]),
    ("ADMIN", "", "bump", ["it's \"q\" \\ \t\x01\x7f\u00e9\u200b\U0001f600"]),
    ("ADMIN", "", "bump", ["it's"]),
    ("ADMIN", "", "scale", ["1e3"]),
    ("ADMIN", "", "scale", ["-inf"]),
    ("ADMIN", "", "scale", [" .5 "]),
    ("ADMIN", "", "scale", ["NaN"]),
    ("ADMIN", "", "scale", ["1_000.000_1e-0_1"]),
    ("ADMIN", "", "scale", ["0x10"]),
    ("ADMIN", "", "scale", ["1.5d"]),
    ("ADMIN", "", "scale", ["1__0"]),
    ("ADMIN", "", "scale", ["Infinityx"]),
    ("ADMIN", "", "scale", [""]),
    ("ADMIN", "", "echo", []),
    ("ADMIN", "", "echo", ["a"]),
    ("ADMIN", "", "echo", ["a", "b c", "\u00fc\U0001f600"]),
    ("ADMIN", "", "nosuch", []),
    ("ADMIN", "", "it's \"x\"\n\u00e9", ["1"]),
    ("ADMIN", "", "n" * 70 + "\u00e9", []),
    ("ADMIN", "", "refuse", []),
    ("ADMIN", "", "long", ["12"]),
    ("ADMIN", "", "long", ["-1"]),
    ("ADMIN", "OPS", "bump", ["1"]),
    ("OPS", "OPS", "bump", ["1"]),
    ("O'S", "OPS", "help", []),
]


def _reply_for(node: TwinNode, sequence: int, sender: str, command: bytes) -> bytes:
    posted: list[Any] = []
    node.sequence = lambda: sequence  # type: ignore[method-assign]
    node.post = posted.append  # type: ignore[method-assign,assignment]
    record = pack_record(
        RECORD_MESSAGE, sequence, account=sender.encode(), instance=1, body=command
    )
    body = len(record) - len(command)
    node._run_admin_command(record, body, len(command))
    assert len(posted) == 1, posted
    reply: bytes = posted[0].encode()
    return reply


def vectors() -> list[str]:
    """One line per case: sender, allow-list, sequence, AdminCommand hex, AdminReply hex."""
    open_node, guarded = TwinNode(), GuardedTwin()
    for node in (open_node, guarded):
        node.account, node.instance = ACCOUNT, 1
    lines = []
    for i, (sender, allowed, name, args) in enumerate(CASES):
        sequence = 1000 + i
        command = bus.AdminCommand(
            target=ACCOUNT,
            request_id=0x0102030405060708 + i,
            name=name,
            args=[bus.AdminCommandArgs(value=a) for a in args],
        ).encode()
        node = guarded if allowed else open_node
        reply = _reply_for(node, sequence, sender, command)
        lines.append(f"{sender}\t{allowed or '-'}\t{sequence}\t{command.hex()}\t{reply.hex()}")
    return lines


def vectors_text() -> str:
    return (
        "# generated by python -m tests.languages.admin_twin vectors; do not edit\n"
        "# sender, allowed senders (-: any), sequence, AdminCommand hex, AdminReply hex\n"
        + "".join(line + "\n" for line in vectors())
    )


if __name__ == "__main__":
    if sys.argv[1:] != ["vectors"]:
        sys.exit("usage: python -m tests.languages.admin_twin vectors")
    VECTORS.write_text(vectors_text())
    print(f"wrote {VECTORS} ({len(CASES)} vectors)")
