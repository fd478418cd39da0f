"""How the generated dispatch finds a node's handler. Node classes hold their handlers as
``seqbus._codec_support.Handler`` descriptors, so the dispatch calls the class's function without
a method lookup per message; what it calls must still be what ``node.on_ping`` is at that
message: a handler set on an instance (a state machine switching handlers, a test's
``mock.patch.object``), a handler replaced on the class, a class with its own attribute lookup."""

from __future__ import annotations

import gc
import inspect
from typing import Any
from unittest import mock

import pytest

from examples.pingpong.messages import PingpongNode, PingView
from seqbus._codec_support import Handler
from tests.sdk.test_lent_views import attached, pings


class Switching(PingpongNode):
    """Takes pings as "open" until id 3, then switches its handler on itself."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[str, int]] = []

    def on_ping(self, msg: PingView, mine: bool) -> None:
        self.seen.append(("open", msg.id))
        if msg.id == 3:
            self.on_ping = self._closed  # type: ignore[method-assign]

    def _closed(self, msg: PingView, mine: bool) -> None:
        self.seen.append(("closed", msg.id))
        if msg.id == 6:
            del self.on_ping  # back to the class's handler


def test_the_class_holds_handlers_as_descriptors_that_behave_as_the_functions() -> None:
    handler = Switching.__dict__["on_ping"]
    assert type(handler) is Handler
    func = handler.func
    assert Switching.on_ping is func  # the class gives the function, as for a plain method
    node = Switching()
    bound: Any = node.on_ping
    assert bound.__func__ is func and bound.__self__ is node
    assert list(inspect.signature(node.on_ping).parameters) == ["msg", "mine"]
    assert Switching.topics() == [(2, 1)]  # on_ping overridden, on_pong not
    assert type(PingpongNode.__dict__["on_pong"]) is Handler  # the generated defaults too
    assert Switching.__dict__.get("_closed") is not None
    assert type(Switching.__dict__["_closed"]) is not Handler  # not a handler's name


def test_a_handler_set_on_the_node_takes_the_next_message_in_the_same_batch() -> None:
    node, other = attached(Switching()), attached(Switching())
    node.handle_batch(pings(range(1, 9)))
    assert node.seen == [("open", 1), ("open", 2), ("open", 3), ("closed", 4),
                         ("closed", 5), ("closed", 6), ("open", 7), ("open", 8)]
    assert Switching.__dict__["on_ping"].overridden == 0  # deleted again
    other.handle_batch(pings(range(1, 3)))  # another node of the class kept its own handler
    assert other.seen == [("open", 1), ("open", 2)]


def test_a_node_patched_by_mock_gets_the_mock_and_then_its_handler_again() -> None:
    node = attached(Switching())
    node.handle_batch(pings(range(1, 3)))
    with mock.patch.object(node, "on_ping") as patched:
        node.handle_batch(pings(range(3, 6)))
        assert [c.args[0] for c in patched.call_args_list] != []
        assert patched.call_count == 3
        assert [c.args[1] for c in patched.call_args_list] == [False] * 3
    node.handle_batch(pings(range(10, 12)))
    assert node.seen == [("open", 1), ("open", 2), ("open", 10), ("open", 11)]
    with pytest.raises(AttributeError, match="on_ping"):
        del node.on_ping  # nothing of its own to delete


def test_a_collected_node_leaves_no_handler_of_its_own_behind() -> None:
    handler = Switching.__dict__["on_ping"]
    node = Switching()
    node.on_ping = lambda msg, mine: None  # type: ignore[method-assign]
    assert handler.overridden == 1
    del node
    gc.collect()
    assert handler.overridden == 0


def test_a_handler_replaced_on_the_class_is_called_from_the_next_message() -> None:
    class Replaced(PingpongNode):
        def __init__(self) -> None:
            super().__init__()
            self.seen: list[tuple[str, int]] = []

        def on_ping(self, msg: PingView, mine: bool) -> None:
            self.seen.append(("first", msg.id))
            if msg.id == 2:
                type(self).on_ping = second  # type: ignore[method-assign]

    def second(self: Any, msg: PingView, mine: bool) -> None:
        self.seen.append(("second", msg.id))

    node = attached(Replaced())
    node.handle_batch(pings(range(1, 5)))
    assert node.seen == [("first", 1), ("first", 2), ("second", 3), ("second", 4)]
    node.on_ping = lambda msg, mine: node.seen.append(("own", msg.id))
    node.handle_batch(pings(range(5, 6)))  # a plain function on the class: an instance's wins
    assert node.seen[-1] == ("own", 5)


def test_super_calls_other_signatures_and_classes_with_their_own_lookup() -> None:
    seen: list[Any] = []

    class Base(PingpongNode):
        def on_ping(self, msg: PingView, mine: bool) -> None:
            seen.append(("base", msg.id))

    class Derived(Base):
        def on_ping(self, msg: PingView, mine: bool) -> None:
            seen.append(("derived", msg.id))
            super().on_ping(msg, mine)

    class Static(PingpongNode):
        on_ping = staticmethod(lambda msg, mine: seen.append(("static", msg.id)))

    class Redirecting(Base):
        def __getattribute__(self, name: str) -> Any:
            if name == "on_ping":
                return lambda msg, mine: seen.append(("redirected", msg.id))
            return super().__getattribute__(name)

    for cls, expected in ((Derived, [("derived", 1), ("base", 1)]), (Static, [("static", 1)]),
                          (Redirecting, [("redirected", 1)])):
        seen.clear()
        attached(cls()).handle_batch(pings(range(1, 2)))
        assert seen == expected, cls.__name__
