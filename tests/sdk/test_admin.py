"""Admin commands on the deterministic harness: sequenced like any command, so every instance of
the target account runs them at the same point of the stream; routed by account, whatever the
node's topics; answered once per command; failures answered without stopping the node."""

from __future__ import annotations

from dataclasses import dataclass

from seqbus import bus
import pytest
from seqbus.bus import AdminCommand, AdminCommandArgs, AdminCommandView, AdminReplyView, AdminStatus
from seqbus.bus.node import BusNode
from examples.exchange.messages import OrderRejectedView, RejectReason
from examples.pingpong.messages import Ping, PingpongNode, PingView, PongView

from examples.exchange.engine import MatchingEngine
from examples.exchange.gateway import OrderGateway
from seqbus import AdminError, Node, _core, admin_command
from seqbus.admin import help_text
from seqbus.testing import Harness

SECOND = 1_000_000_000
MS = 1_000_000


@dataclass
class Reply:
    sequence: int
    command_sequence: int
    account: str
    instance: int
    status: AdminStatus
    name: str
    text: str


class Operator(BusNode):
    """Sends admin commands and records every AdminCommand and AdminReply of the stream."""

    def __init__(self) -> None:
        super().__init__()
        self.next_request = 1
        self.commands: dict[int, int] = {}  # request id -> stream sequence of the command
        self.replies: dict[int, list[Reply]] = {}  # request id -> replies seen

    def command(self, target: str, name: str, *args: str) -> int:
        request_id = self.next_request
        self.next_request += 1
        self.send(
            AdminCommand(
                target=target,
                request_id=request_id,
                name=name,
                args=[AdminCommandArgs(value=a) for a in args],
            )
        )
        return request_id

    def on_admin_command(self, msg: AdminCommandView, mine: bool) -> None:
        if mine:
            self.commands[msg.request_id] = self.sequence()

    def on_admin_reply(self, msg: AdminReplyView, mine: bool) -> None:
        if msg.requester != self.account:
            return
        self.replies.setdefault(msg.request_id, []).append(
            Reply(self.sequence(), msg.command_sequence, "", 0, msg.status, msg.name, msg.text)
        )

    def answered(self, request_id: int) -> bool:
        return request_id in self.replies


class Flood(PingpongNode):
    """Sends ``count`` Pings, each once the previous one is in the stream."""

    def __init__(self, count: int) -> None:
        super().__init__()
        self.count = count
        self.sent_pings = 0

    def on_opened(self) -> None:
        self.next()

    def on_ping(self, msg: PingView, mine: bool) -> None:
        if mine and msg.id == self.sent_pings - 1:
            self.next()

    def next(self) -> None:
        if self.sent_pings < self.count:
            self.post(Ping(id=self.sent_pings, sent_at_ns=0))
            self.sent_pings += 1


class Counter(PingpongNode):
    """Counts Pings; its admin commands record where in the stream they ran."""

    def __init__(self) -> None:
        super().__init__()
        self.pings = 0
        self.marks: list[tuple[int, int, str]] = []  # (sequence, pings so far, label)
        self.step = 1

    def on_ping(self, msg: PingView, mine: bool) -> None:
        self.pings += self.step

    @admin_command(help="record this point of the stream")
    def mark(self, label: str = "") -> str:
        self.marks.append((self.sequence(), self.pings, label))
        return f"mark {label} at #{self.sequence()} after {self.pings} pings"

    @admin_command("set-step", help="count each Ping as STEP")
    def set_step(self, step: int, double: bool = False) -> str:
        if step < 0:
            raise AdminError("step must be 0 or more")
        self.step = step * 2 if double else step
        return f"step {self.step}"

    @admin_command
    def boom(self) -> None:
        """Raise, as a buggy command would."""
        raise RuntimeError("kaboom")

    @admin_command(help="join the words")
    def echo(self, first: str, *rest: str) -> str:
        return " ".join((first, *rest))


class PongOnly(PingpongNode):
    """Handles Pongs only: its topics exclude Pings (and every admin message type)."""

    def __init__(self) -> None:
        super().__init__()
        self.marks: list[int] = []

    def on_pong(self, msg: PongView, mine: bool) -> None:
        pass

    @admin_command
    def mark(self) -> str:
        self.marks.append(self.sequence())
        return "ok"


def _wait(bus_: Harness, op: Operator, request_id: int) -> Reply:
    bus_.run(until=lambda: op.answered(request_id), for_ns=5 * SECOND)
    bus_.run(for_ns=20 * MS)  # a second copy, if the sequencer let one through, would show now
    replies = op.replies[request_id]
    assert len(replies) == 1, replies  # hot-hot copies: the sequencer keeps one
    return replies[0]


def test_the_core_and_the_schema_agree_on_the_admin_ids() -> None:
    assert _core.BUS_SCHEMA_ID == bus.SCHEMA_ID
    assert _core.ADMIN_COMMAND_TEMPLATE_ID == AdminCommand.TEMPLATE_ID
    assert _core.ADMIN_REPLY_TEMPLATE_ID == bus.AdminReply.TEMPLATE_ID


def test_an_admin_command_runs_at_the_same_stream_point_on_primary_backup_and_late_joiner() -> None:
    h = Harness(seed=5)
    primary = h.add(Counter, "CTR", 1, start="rewind")
    backup = h.add(Counter, "CTR", 2, start="rewind")
    flood = h.add(Flood(1000), "FLOOD", 1, start="rewind")
    op = h.add(Operator, "ADMIN", 1)
    h.run(until=lambda: primary.pings >= 100, for_ns=5 * SECOND)
    first = op.command("CTR", "mark", "one")
    step = op.command("CTR", "set-step", "3")
    reply = _wait(h, op, first)
    assert reply.status == AdminStatus.Ok
    assert reply.command_sequence == op.commands[first]
    assert _wait(h, op, step).text == "step 3"
    h.run(until=lambda: primary.pings >= 1200, for_ns=5 * SECOND)
    second = op.command("CTR", "mark", "two")
    _wait(h, op, second)
    h.run(
        until=lambda: flood.sent_pings == 1000 and primary.pings == backup.pings > 2000,
        for_ns=5 * SECOND,
    )
    h.run(for_ns=50 * MS)

    assert len(primary.marks) == 2
    assert primary.marks == backup.marks  # same sequence, same state at that point
    assert [m[0] for m in primary.marks] == [op.commands[first], op.commands[second]]
    assert 0 < primary.marks[0][1] < primary.marks[1][1] < primary.pings
    assert primary.pings == backup.pings > 2000  # the step change applied at the same Ping
    assert primary.stats.admin_commands == backup.stats.admin_commands == 3

    late = h.add(Counter, "CTR", 3, start="rewind")
    h.run(until=lambda: not late.is_rewinding and late.pings == primary.pings, for_ns=5 * SECOND)
    h.run(for_ns=50 * MS)
    assert late.marks == primary.marks
    assert late.step == primary.step == 3
    for replies in op.replies.values():  # the late joiner's replies were numbered, not re-sent
        assert len(replies) == 1


def test_unknown_commands_bad_arguments_and_failing_handlers_get_error_replies() -> None:
    h = Harness(seed=6)
    primary = h.add(Counter, "CTR", 1, start="rewind")
    backup = h.add(Counter, "CTR", 2, start="rewind")
    op = h.add(Operator, "ADMIN", 1)
    h.run(for_ns=20 * MS)

    cases = [
        (("nope",), AdminStatus.UnknownCommand, "unknown command 'nope'; known: help, boom"),
        (("set-step",), AdminStatus.BadArguments, "takes 1 to 2 argument(s), got 0"),
        (("set-step", "x"), AdminStatus.BadArguments, "step must be integer, not 'x'"),
        (("set-step", "2", "maybe"), AdminStatus.BadArguments, "double must be true/false"),
        (("mark", "a", "b"), AdminStatus.BadArguments, "usage: mark [LABEL]"),
        (("set-step", "-1"), AdminStatus.Failed, "step must be 0 or more"),
        (("boom",), AdminStatus.Failed, "RuntimeError: kaboom"),
        (("help", "x"), AdminStatus.BadArguments, "help takes no arguments"),
        (("set-step", "2", "yes"), AdminStatus.Ok, "step 4"),
        (("echo", "a", "b", "c"), AdminStatus.Ok, "a b c"),
    ]
    for argv, status, text in cases:
        reply = _wait(h, op, op.command("CTR", *argv))
        assert (reply.status, argv) == (status, argv)
        assert text in reply.text
    assert primary.stats.admin_errors == backup.stats.admin_errors == 1  # only the raise
    assert primary.step == backup.step == 4  # the node ran on after every failure
    assert primary.stats.admin_commands == len(cases)


def test_a_failing_handler_is_logged_and_a_corrupt_command_does_not_stop_the_node(
    caplog: pytest.LogCaptureFixture,
) -> None:
    h = Harness(seed=11)
    node = h.add(Counter, "CTR", 1)
    op = h.add(Operator, "ADMIN", 1)
    h.run(for_ns=20 * MS)
    with caplog.at_level("ERROR", logger="seqbus.admin"):
        assert _wait(h, op, op.command("CTR", "boom")).status == AdminStatus.Failed
    assert "CTR/1: admin command 'boom' failed at #" in caplog.text
    assert "RuntimeError: kaboom" in caplog.text  # with its traceback

    corrupt = bytearray(AdminCommand(target="CTR", request_id=99, name="mark").encode())
    assert corrupt[-4:] == b"mark"
    corrupt[-4] = 0xFF  # the name is no longer UTF-8
    op.send(bytes(corrupt))
    after = op.command("CTR", "mark", "after")
    assert _wait(h, op, after).status == AdminStatus.Ok  # still running, in order
    assert 99 not in op.replies  # nothing to answer: the command cannot be read
    assert node.stats.admin_errors == 2 and [m[2] for m in node.marks] == ["after"]


def test_help_lists_what_the_class_registered() -> None:
    h = Harness(seed=7)
    h.add(Counter, "CTR", 1)
    op = h.add(Operator, "ADMIN", 1)
    h.run(for_ns=20 * MS)
    reply = _wait(h, op, op.command("CTR", "help"))
    assert reply.status == AdminStatus.Ok
    assert reply.text == help_text(Counter.admin_commands())
    lines = reply.text.splitlines()
    assert lines[0].startswith("help - ")
    assert "set-step STEP [DOUBLE] - count each Ping as STEP" in lines
    assert "boom - Raise, as a buggy command would." in lines
    assert "echo FIRST [REST...] - join the words" in lines
    assert sorted(Counter.admin_commands()) == ["boom", "echo", "mark", "set-step"]


def test_a_node_whose_topics_exclude_them_still_gets_its_admin_commands() -> None:
    h = Harness(seed=8)
    node = h.add(PongOnly, "PO", 1, start="rewind")
    h.add(Flood(50), "FLOOD", 1)
    op = h.add(Operator, "ADMIN", 1)
    assert (bus.SCHEMA_ID, AdminCommand.TEMPLATE_ID) not in PongOnly.topics()
    h.run(until=lambda: h.client(node).stats()["filtered"] >= 20, for_ns=5 * SECOND)
    request_id = op.command("PO", "mark")
    assert _wait(h, op, request_id).status == AdminStatus.Ok
    assert node.marks == [op.commands[request_id]]
    assert node.stats.unknown == 0


def test_another_accounts_commands_never_cross_into_python() -> None:
    h = Harness(seed=9)
    mine = h.add(PongOnly, "PO", 1, start="rewind")
    other = h.add(Counter, "CTR", 1, start="rewind")
    op = h.add(Operator, "ADMIN", 1)
    h.run(for_ns=20 * MS)
    for _ in range(3):
        assert _wait(h, op, op.command("CTR", "mark")).status == AdminStatus.Ok
    before = h.client(mine).stats()["filtered"]
    assert mine.stats.messages == 0  # nothing of CTR's (nor its replies) reached PO's Python
    assert mine.stats.admin_commands == 0 and mine.marks == []
    assert before >= 6  # three commands and three replies dropped in Rust
    _wait(h, op, op.command("PO", "mark"))
    assert mine.stats.messages == 1 and len(mine.marks) == 1
    assert len(other.marks) == 3 and other.stats.admin_commands == 3


def test_a_node_that_raises_on_unknown_messages_takes_admin_commands() -> None:
    class Strict(Counter):
        ON_UNKNOWN = "raise"

    h = Harness(seed=13)
    node = h.add(Strict, "S", 1)
    op = h.add(Operator, "ADMIN", 1)
    h.run(for_ns=20 * MS)
    assert _wait(h, op, op.command("S", "mark")).status == AdminStatus.Ok
    assert _wait(h, op, op.command("S", "nope")).status == AdminStatus.UnknownCommand
    assert len(node.marks) == 1 and node.stats.unknown == 0


def test_a_node_may_restrict_who_commands_it() -> None:
    class Guarded(Counter):
        ADMIN_SENDERS = frozenset({"OPS"})

    h = Harness(seed=10)
    node = h.add(Guarded, "G", 1)
    op = h.add(Operator, "ADMIN", 1)
    ops = h.add(Operator, "OPS", 1)
    h.run(for_ns=20 * MS)
    denied = _wait(h, op, op.command("G", "mark"))
    assert denied.status == AdminStatus.Denied and "'ADMIN' may not" in denied.text
    assert _wait(h, ops, ops.command("G", "mark")).status == AdminStatus.Ok
    assert len(node.marks) == 1


def test_halting_the_exchange_rejects_orders_the_same_way_on_every_instance() -> None:
    class Watcher(OrderGateway):
        def __init__(self) -> None:
            super().__init__(orders=500, seed=11)
            self.closed = 0

        def on_order_rejected(self, msg: OrderRejectedView, mine: bool) -> None:
            if msg.reason == RejectReason.MarketClosed:
                assert msg.text == "news pending"
                self.closed += 1
            super().on_order_rejected(msg, mine)

    h = Harness(seed=12)
    primary = h.add(MatchingEngine, "ME", 1, start="rewind")
    backup = h.add(MatchingEngine, "ME", 2, start="rewind")
    gateway = h.add(Watcher(), "GW", 1, start="rewind")
    op = h.add(Operator, "ADMIN", 1)
    h.run(until=lambda: len(gateway.answers) >= 100, for_ns=30 * SECOND)
    halt = _wait(h, op, op.command("ME", "halt", "*", "news pending"))
    assert halt.status == AdminStatus.Ok and halt.text.startswith("halted every symbol at #")
    h.settle(primary, backup)
    assert primary.halted == backup.halted == {"*": "news pending"}
    assert primary.state_hash() == backup.state_hash()
    h.run(until=lambda: gateway.closed >= 50, for_ns=30 * SECOND)
    book = _wait(h, op, op.command("ME", "book", "aapl"))
    assert book.text.startswith("AAPL | buy ") and book.text.endswith("| HALTED")
    bad = _wait(h, op, op.command("ME", "halt", "XXX"))
    assert bad.status == AdminStatus.Failed and "unknown symbol 'XXX'" in bad.text
    assert _wait(h, op, op.command("ME", "resume")).text.startswith("resumed * at #")
    h.run(until=lambda: gateway.done, for_ns=30 * SECOND)
    assert gateway.lost() == []
    assert primary.halted == backup.halted == {}
    assert gateway.accepted > 0 and gateway.closed >= 50
    h.settle(primary, backup)
    assert primary.state_hash() == backup.state_hash()

    late = h.add(MatchingEngine, "ME", 3, start="rewind")
    h.run(
        until=lambda: late.handled == primary.handled and not late.is_rewinding, for_ns=10 * SECOND
    )
    h.settle(late, primary)
    assert late.state_hash() == primary.state_hash()
    assert late.stats.admin_commands == primary.stats.admin_commands == 4


def test_the_halt_is_part_of_the_state_hash() -> None:
    engine = MatchingEngine()
    plain = engine.state_hash()
    engine.halted["AAPL"] = "news"
    assert engine.state_hash() != plain


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (
            "def f(self, x: list[int]) -> str: return ''",
            "must be annotated str, int, float or bool",
        ),
        ("def f(self, x) -> str: return ''", "must be annotated"),
        ("def f(self, *, x: str) -> str: return ''", "no keyword-only"),
        ("def f(self, x: str = '', *, y: int = 1) -> str: return ''", "no keyword-only"),
    ],
)
def test_a_bad_signature_is_a_type_error_when_the_class_is_defined(body: str, error: str) -> None:
    namespace: dict[str, object] = {}
    exec(body, namespace)
    func = admin_command(namespace["f"])  # type: ignore[call-overload]
    with pytest.raises(TypeError, match=error):
        type("Bad", (Node,), {"f": func})


def test_registration_mistakes_are_clear() -> None:
    with pytest.raises(TypeError, match="'help' is built in"):
        admin_command("help")(lambda self: "")
    with pytest.raises(TypeError, match="must be 1-64 characters"):
        admin_command("two words")(lambda self: "")

    def first(self: Node) -> str:
        return ""

    def second(self: Node) -> str:
        return ""

    with pytest.raises(TypeError, match="'same' registered twice"):
        type(
            "Twice",
            (Node,),
            {"a": admin_command("same")(first), "b": admin_command("same")(second)},
        )

    class Base(Node):
        @admin_command
        def status(self) -> str:
            return "base"

    class Derived(Base):
        def status(self) -> str:  # an override keeps the registration, runs the override
            return "derived"

    assert Derived.admin_commands()["status"].attr == "status"
    assert Node.admin_commands() == {}
