"""Admin commands a node registers: ``@admin_command`` and what runs them.

An operator's command (``seqbus admin command ACCOUNT NAME ARGS...``) is a ``bus.AdminCommand``
(schemas/bus.idl) that the admin sender sends like any other command: the sequencer numbers,
journals and broadcasts it, so every instance of the target account — primary, hot backup, late
joiner, offline replay — runs it at the same point of the stream, and a command that changes
state keeps them equal. The topic filter in Rust hands a node the admin commands of its own
account whatever its topics, and drops those of other accounts.

A node answers with a ``bus.AdminReply``, posted as a command of its account: hot-hot instances
send the same reply under the same command sequence and the sequencer keeps one; during a rewind
the reply is numbered but not sent again (the stream already holds it).

::

    class MatchingEngine(ExchangeNode):
        @admin_command(help="stop accepting new orders")
        def halt(self, symbol: str = "*", reason: str = "operator halt") -> str:
            ...
            return f"halted {symbol}"

Arguments arrive as text and are converted by the parameters' annotations (``str``, ``int``,
``float``, ``bool``; ``*args: str`` takes the rest). The handler returns the reply text (or
None), raises :class:`AdminError` to refuse with a message, and any other exception becomes a
``Failed`` reply (logged, counted in ``stats.admin_errors``) without stopping the node. Handlers
must be deterministic like any other: the same command at the same point gives the same result
in every instance. ``help`` is built in and lists what a class registered.
"""

from __future__ import annotations

import inspect
import logging
import re
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar, overload

from seqbus import _core, bus
from seqbus.batch import RECORD_MESSAGE, account_key, message_type, records
from seqbus.batch import sender as batch_sender
from seqbus.bus import AdminStatus
from seqbus.errors import DecodeError, SeqbusError

if TYPE_CHECKING:
    from seqbus.batch import Buffer, Dispatch

__all__ = [
    "DEFAULT_SENDER",
    "MAX_REPLY_TEXT",
    "AdminCommandSpec",
    "AdminError",
    "AdminParam",
    "AdminResult",
    "AdminTimeoutError",
    "admin_command",
    "collect_admin_commands",
    "help_text",
    "send_admin_command",
]

log = logging.getLogger("seqbus.admin")


class _Counters(Protocol):
    admin_commands: int
    admin_errors: int


class AdminTarget(Protocol):
    """What running an admin command needs of a node (a :class:`seqbus.Node`): who it is, its
    counters, the sequence it stands at, a way to post the reply and its class's commands."""

    ADMIN_SENDERS: ClassVar[frozenset[str] | None]
    _seqbus_admin_commands_: ClassVar[dict[str, AdminCommandSpec]]
    account: str
    instance: int

    @property
    def stats(self) -> _Counters: ...

    def sequence(self) -> int: ...

    def post(self, message: Any) -> None: ...

F = TypeVar("F", bound=Callable[..., object])

#: The attribute ``@admin_command`` sets on a function.
_MARK = "_seqbus_admin_spec_"
#: Command names: what a shell passes as one word.
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.\-]{0,63}\Z")
#: Longest reply text sent; a longer one is cut (deterministically) and says so.
MAX_REPLY_TEXT = 60_000
#: Longest command name echoed in a reply.
_MAX_ECHOED_NAME = 64
#: The built-in command every node answers.
HELP = "help"

_TRUE = frozenset({"1", "true", "yes", "on", "y"})
_FALSE = frozenset({"0", "false", "no", "off", "n"})


class AdminError(SeqbusError):
    """Raised by an admin command to refuse with a message (a ``Failed`` reply, no traceback)."""


def _to_bool(text: str) -> bool:
    low = text.strip().lower()
    if low in _TRUE:
        return True
    if low in _FALSE:
        return False
    raise ValueError(f"not a boolean: {text!r} (true/false, yes/no, on/off, 1/0)")


_CONVERTERS: dict[object, tuple[str, Callable[[str], object]]] = {
    str: ("text", str),
    int: ("integer", int),
    float: ("number", float),
    bool: ("true/false", _to_bool),
}


@dataclass(frozen=True)
class AdminParam:
    """One parameter of an admin command."""

    name: str
    kind: str
    convert: Callable[[str], object]
    required: bool

    def usage(self) -> str:
        word = self.name.upper()
        return word if self.required else f"[{word}]"


@dataclass(frozen=True)
class AdminCommandSpec:
    """An admin command of a node class: its name, help, the method and its parameters."""

    name: str
    help: str
    attr: str
    params: tuple[AdminParam, ...]
    rest: AdminParam | None = None

    def usage(self) -> str:
        words = [self.name, *(p.usage() for p in self.params)]
        if self.rest is not None:
            words.append(f"[{self.rest.name.upper()}...]")
        return " ".join(words)

    def convert(self, args: list[str]) -> list[object]:
        """The method's positional arguments from the command's text arguments."""
        required = sum(1 for p in self.params if p.required)
        if len(args) < required or (self.rest is None and len(args) > len(self.params)):
            if self.rest is not None:
                wanted = f"at least {required}"
            elif required == len(self.params):
                wanted = str(required)
            else:
                wanted = f"{required} to {len(self.params)}"
            raise _BadArguments(
                f"{self.name} takes {wanted} argument(s), got {len(args)}; usage: {self.usage()}"
            )
        values: list[object] = []
        for i, text in enumerate(args):
            param = self.params[i] if i < len(self.params) else self.rest
            assert param is not None
            try:
                values.append(param.convert(text))
            except ValueError:
                raise _BadArguments(
                    f"{self.name}: {param.name} must be {param.kind}, not {text!r}; "
                    f"usage: {self.usage()}"
                ) from None
        return values


class _BadArguments(Exception):
    pass


@overload
def admin_command(name: F, /) -> F: ...


@overload
def admin_command(name: str | None = None, /, *, help: str = "") -> Callable[[F], F]: ...


def admin_command(name: str | None | F = None, /, *, help: str = "") -> F | Callable[[F], F]:
    """Register a method of a node class as an admin command.

    ``@admin_command`` names it after the method; ``@admin_command("halt", help="...")`` names
    it explicitly. ``help`` defaults to the first line of the docstring. The method's
    parameters after ``self`` must be annotated ``str``, ``int``, ``float`` or ``bool`` (a
    default makes one optional; ``*args: str`` takes the rest); it returns the reply text.
    Mistakes are ``TypeError`` when the class is defined.
    """
    if callable(name):
        return _mark(name, None, help)
    if name is not None and not isinstance(name, str):
        raise TypeError(f"admin_command name must be a string, not {type(name).__name__}")

    def decorate(func: F) -> F:
        return _mark(func, name, help)

    return decorate


def _mark(func: F, name: str | None, help: str) -> F:
    if not inspect.isfunction(func):
        raise TypeError(f"@admin_command decorates a method, not {func!r}")
    command = name if name is not None else func.__name__
    if not _NAME.match(command):
        raise TypeError(
            f"admin command name {command!r} must be 1-64 characters of letters, digits, "
            "'_', '.' or '-', starting with a letter or '_'"
        )
    if command == HELP:
        raise TypeError("admin command 'help' is built in")
    if not help:
        doc = inspect.getdoc(func) or ""
        help = doc.strip().splitlines()[0] if doc.strip() else ""
    setattr(func, _MARK, (command, help))
    return func


def _spec_of(owner: type, attr: str, func: Callable[..., object]) -> AdminCommandSpec:
    command, help = getattr(func, _MARK)
    where = f"{owner.__qualname__}.{attr} (admin command {command!r})"
    try:
        hints = typing.get_type_hints(func)
    except Exception as exc:
        raise TypeError(f"{where}: cannot resolve its annotations: {exc}") from exc
    params: list[AdminParam] = []
    rest: AdminParam | None = None
    signature = inspect.signature(func)
    for i, p in enumerate(signature.parameters.values()):
        if i == 0:
            if p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
                raise TypeError(f"{where}: the first parameter must be self")
            continue
        if p.kind in (p.KEYWORD_ONLY, p.VAR_KEYWORD):
            raise TypeError(f"{where}: {p.name}: arguments are positional; no keyword-only")
        annotation = hints.get(p.name, inspect.Parameter.empty)
        if annotation not in _CONVERTERS:
            raise TypeError(
                f"{where}: parameter {p.name!r} must be annotated str, int, float or bool"
            )
        kind, convert = _CONVERTERS[annotation]
        param = AdminParam(p.name, kind, convert, p.default is p.empty)
        if p.kind == p.VAR_POSITIONAL:
            rest = AdminParam(p.name, kind, convert, False)
        else:
            if params and not params[-1].required and param.required:
                raise TypeError(f"{where}: {p.name} is required after an optional parameter")
            params.append(param)
    return AdminCommandSpec(command, help, attr, tuple(params), rest)


def collect_admin_commands(cls: type) -> dict[str, AdminCommandSpec]:
    """The admin commands of a class and its bases (a subclass's registration of a name
    wins); ``TypeError`` for two methods of one class registering one name."""
    found: dict[str, AdminCommandSpec] = {}
    for base in reversed(cls.__mro__):
        own: dict[str, str] = {}
        for attr, value in base.__dict__.items():
            func = value.__func__ if isinstance(value, (staticmethod, classmethod)) else value
            if not hasattr(func, _MARK):
                continue
            if isinstance(value, (staticmethod, classmethod)):
                raise TypeError(f"{base.__qualname__}.{attr}: admin commands are plain methods")
            spec = _spec_of(base, attr, func)
            if spec.name in own:
                raise TypeError(
                    f"{base.__qualname__}: admin command {spec.name!r} registered twice "
                    f"({own[spec.name]} and {attr})"
                )
            own[spec.name] = attr
            found[spec.name] = spec
    return found


def help_text(commands: Mapping[str, AdminCommandSpec]) -> str:
    """What the built-in ``help`` answers: one line per command, ``help`` first."""
    lines = [f"{HELP} - list the admin commands of this node"]
    for name in sorted(commands):
        spec = commands[name]
        lines.append(f"{spec.usage()} - {spec.help}" if spec.help else spec.usage())
    return "\n".join(lines)


# -- running commands (called from the dispatch of schema ``bus``) ------------------------------


def bus_dispatch(inner: Dispatch | None) -> Dispatch:
    """The dispatch of schema ``bus`` for every node: runs an AdminCommand targeting the node,
    then hands the message to the class's own ``bus`` dispatch, if it has one (a ``BusNode``)."""
    admin_template = _core.ADMIN_COMMAND_TEMPLATE_ID

    def dispatch(
        node: Any, template_id: int, buf: Buffer, offset: int, length: int, mine: bool
    ) -> bool:
        if template_id == admin_template:
            node._run_admin_command(buf, offset, length)
            if inner is not None:
                inner(node, template_id, buf, offset, length, mine)
            return True
        return inner(node, template_id, buf, offset, length, mine) if inner is not None else False

    return dispatch


def run_admin_command(node: AdminTarget, buf: Buffer, offset: int, length: int) -> None:
    """Decode, check and run one AdminCommand for ``node`` and post its AdminReply."""

    try:
        view = bus.AdminCommand.decode(buf, offset, length)
        target = view.target
        request_id = view.request_id
        name = view.name
        args = [a.value for a in view.args]
    except DecodeError as exc:
        node.stats.admin_errors += 1
        log.error(
            "%s/%d: corrupt AdminCommand at #%d: %s",
            node.account,
            node.instance,
            node.sequence(),
            exc,
        )
        return
    if target != node.account:
        return  # the class listed the admin topic: every account's commands come here
    sender = batch_sender(buf, offset)
    node.stats.admin_commands += 1
    status, text = _execute(node, sender, name, args)
    if len(text) > MAX_REPLY_TEXT:
        text = text[:MAX_REPLY_TEXT] + f"... ({len(text) - MAX_REPLY_TEXT} characters cut)"
    node.post(
        bus.AdminReply(
            command_sequence=node.sequence(),
            request_id=request_id,
            requester=sender,
            status=status,
            name=name[:_MAX_ECHOED_NAME],
            text=text,
        )
    )


def _execute(node: AdminTarget, sender: str, name: str, args: list[str]) -> tuple[Any, str]:

    allowed = type(node).ADMIN_SENDERS
    if allowed is not None and sender not in allowed:
        return AdminStatus.Denied, f"account {sender!r} may not send admin commands to this node"
    commands = type(node)._seqbus_admin_commands_
    if name == HELP:
        if args:
            return AdminStatus.BadArguments, "help takes no arguments"
        return AdminStatus.Ok, help_text(commands)
    spec = commands.get(name)
    if spec is None:
        known = ", ".join([HELP, *sorted(commands)])
        return AdminStatus.UnknownCommand, f"unknown command {name[:64]!r}; known: {known}"
    try:
        values = spec.convert(args)
    except _BadArguments as exc:
        return AdminStatus.BadArguments, str(exc)
    try:
        result = getattr(node, spec.attr)(*values)
    except AdminError as exc:
        return AdminStatus.Failed, str(exc)
    except Exception as exc:
        node.stats.admin_errors += 1
        log.exception(
            "%s/%d: admin command %r failed at #%d",
            node.account,
            node.instance,
            name,
            node.sequence(),
        )
        return AdminStatus.Failed, f"{type(exc).__name__}: {exc}"
    return AdminStatus.Ok, "" if result is None else str(result)


# -- the operator's side: send a command, wait for its reply (seqbus admin command) -----------

#: The account ``seqbus admin`` sends under unless told otherwise.
DEFAULT_SENDER = "ADMIN"


class AdminTimeoutError(SeqbusError):
    """No answer in time: the sequencer, the command in the stream, or the target's reply."""


@dataclass(frozen=True)
class AdminResult:
    """The answer to one admin command, as the stream shows it."""

    target: str
    name: str
    request_id: int
    #: Stream sequence of the AdminCommand, and of the AdminReply.
    command_sequence: int
    reply_sequence: int
    #: The bus.AdminStatus name: "Ok", "UnknownCommand", "BadArguments", "Failed", "Denied".
    status: str
    text: str
    #: The instance whose copy of the reply the sequencer kept.
    replied_by: int

    @property
    def ok(self) -> bool:
        return self.status == "Ok"


def send_admin_command(
    config: str,
    target: str,
    name: str,
    args: list[str] | tuple[str, ...] = (),
    *,
    sender: str = DEFAULT_SENDER,
    sender_instance: int = 1,
    timeout: float = 10.0,
    listen: str | None = None,
) -> AdminResult:
    """Send ``name args`` to every node of account ``target`` through the sequencer, and wait
    until the command is in the stream and one of them has answered.

    Connects to the bus of ``config`` as ``sender``/``sender_instance`` (start live). Raises
    :class:`AdminTimeoutError` when the sequencer, the command or the reply does not show
    within ``timeout`` seconds, :class:`SeqbusError` for bad input or when another sender
    used the same account at the same moment (its command took this one's place).
    """
    import secrets
    import time

    target_key = account_key(target)
    sender_key = account_key(sender)
    if sender_key == target_key:
        raise SeqbusError(
            f"the sender account must not be the target's ({target}): its commands would take "
            "command sequence numbers of that account's nodes"
        )
    if not _NAME.match(name) and name != HELP:
        raise SeqbusError(f"admin command name {name!r} is not a command name")
    if not 0 < sender_instance < 65536:
        raise SeqbusError(f"sender instance must be 1 to 65535, not {sender_instance}")
    if not timeout > 0:
        raise SeqbusError(f"timeout must be more than 0 s, not {timeout}")
    admin_topics = [
        (_core.BUS_SCHEMA_ID, _core.ADMIN_COMMAND_TEMPLATE_ID),
        (_core.BUS_SCHEMA_ID, _core.ADMIN_REPLY_TEMPLATE_ID),
    ]
    deadline = time.monotonic() + timeout
    client = _core.NodeClient(
        config, sender, sender_instance, start="live", topics=admin_topics, listen=listen
    )
    try:
        while not client.is_ready():
            if time.monotonic() > deadline:
                raise AdminTimeoutError(
                    f"no answer from the sequencer within {timeout:g} s "
                    f"(is it running? see [sequencer] upstream in {config})"
                )
            client.poll(4096, 0.05)
        request_id = secrets.randbits(63) or 1
        command = bus.AdminCommand(
            target=target,
            request_id=request_id,
            name=name,
            args=[bus.AdminCommandArgs(value=a) for a in args],
        )
        command_seq = client.send(command.encode())
        sequence = 0  # of the command, once seen
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                if not sequence:
                    raise AdminTimeoutError(
                        f"the command did not appear in the stream within {timeout:g} s "
                        "(it is not sent again; a datagram still on its way may yet deliver it)"
                    )
                raise AdminTimeoutError(
                    f"{name} was sequenced as #{sequence} but no node of account {target} "
                    f"answered within {timeout:g} s (is one running? the command stays in the "
                    "stream: a node of that account rewinding it later will run it)"
                )
            batch = client.poll(4096, min(0.05, left))
            for r in records(batch):
                if r.record_type != RECORD_MESSAGE:
                    continue
                schema_id, template_id = message_type(batch, r)
                if schema_id != _core.BUS_SCHEMA_ID:
                    continue
                seq, account, body, size = r.sequence, r.account, r.body, r.end - r.body
                if (
                    not sequence
                    and template_id == _core.ADMIN_COMMAND_TEMPLATE_ID
                    and account == sender_key
                    and r.command_seq == command_seq
                ):
                    seen = bus.AdminCommand.decode(batch, body, size)
                    if seen.request_id != request_id:
                        raise SeqbusError(
                            f"another sender used account {sender} at the same time and its "
                            f"command took this one's place; retry, or use another --sender"
                        )
                    sequence = seq
                elif (
                    sequence
                    and template_id == _core.ADMIN_REPLY_TEMPLATE_ID
                    and account == target_key
                ):
                    reply = bus.AdminReply.decode(batch, body, size)
                    if reply.command_sequence != sequence or reply.request_id != request_id:
                        continue
                    return AdminResult(
                        target=target,
                        name=name,
                        request_id=request_id,
                        command_sequence=sequence,
                        reply_sequence=seq,
                        status=reply.status.name,
                        text=reply.text,
                        replied_by=r.instance,
                    )
    finally:
        client.close()
