"""The ``seqbus`` command: ``sequencer``, ``replayer``, ``dispatcher``, ``bridge``, ``node``,
``admin`` and ``demo``."""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import sys
import threading
from collections.abc import Callable, Sequence
from typing import Protocol

from seqbus.errors import SeqbusError, TransportError
from seqbus.logs import LEVELS, configured
from seqbus.runner import (
    POLL_TIMEOUT_S,
    Start,
    importable_from,
    load_node_class,
    run,
    stop_on_signals,
    stopped_by,
)
from seqbus.up import listen_candidates

__all__ = ["load_node_class", "main"]

log = logging.getLogger("seqbus.cli")


class _Service(Protocol):
    def stop(self) -> None: ...

    def join(self, timeout: float) -> bool: ...


def _serve(start: Callable[[], _Service], role: str) -> None:
    """Start a Rust service thread and wait for it, stopping it on SIGINT/SIGTERM. The
    handlers are in place before the service starts: a signal that comes while it binds its
    sockets stops it as one that comes later does (the default action would end the process
    without its goodbye)."""
    stop = threading.Event()
    with stop_on_signals(stop):
        service = start()
        while not service.join(POLL_TIMEOUT_S):
            if stop.is_set():
                logging.getLogger(f"seqbus.{role}").info(
                    "%s: %s: stopping", role, stopped_by(stop) or "stop"
                )
                service.stop()
                while not service.join(POLL_TIMEOUT_S):
                    pass
                return


def _cmd_service(args: argparse.Namespace) -> int:
    """``seqbus sequencer|replayer|dispatcher``: that service of the Rust core until a signal."""
    from seqbus import _core

    services: dict[str, Callable[[str, int | None], _Service]] = {
        "sequencer": _core.Sequencer,
        "replayer": _core.Replayer,
        "dispatcher": _core.Dispatcher,
        "bridge": _core.Bridge,
    }
    with configured(args.log_level):
        service = services[args.command]
        _serve(lambda: service(args.config, getattr(args, "id", None)), args.command)
    return 0


def _cmd_journal(args: argparse.Namespace) -> int:
    """``seqbus journal verify|repair``: check a sequencer's journal, or rewrite its damaged
    segments from a peer's copy (docs/ha.md, "Damaged journals")."""
    import json

    from seqbus import _core

    if args.journal == "verify":
        report = _core.verify_journal(args.dir)
        if args.json:
            print(json.dumps(report))
        else:
            print(
                f"{args.dir}: OK, session {report['session']}, {report['messages']:,} messages "
                f"({report['first_sequence']:,} to {int(str(report['next_sequence'])) - 1:,}) "
                f"in {report['segments']} segments"
            )
            torn = report["torn_tail"]
            if isinstance(torn, tuple):
                print(
                    f"  a torn tail (a write cut short) at {torn[0]}:{torn[1]}; the sequencer "
                    "cuts it when it starts"
                )
        return 0
    report = _core.repair_journal(args.dir, args.peer)
    if args.json:
        print(json.dumps(report))
        return 0
    rewritten = report["rewritten"]
    assert isinstance(rewritten, list)
    if not rewritten:
        print(f"{args.dir}: no damaged segment; nothing changed")
        return 0
    for (path, offset), kept in zip(rewritten, report["kept"]):  # type: ignore[call-overload]
        print(f"{path}: damaged from offset {offset:,}: rewritten from {args.peer} (kept: {kept})")
    print(f"{report['messages']:,} messages restored")
    return 0


def _cmd_admin_switchover(args: argparse.Namespace) -> int:
    import json

    from seqbus.status import switchover

    result = switchover(args.config, args.to, timeout=args.timeout)
    if args.json:
        print(json.dumps(result))
    else:
        print(
            f"member {result['to']} leads the bus (was member {result['from']}); pause seen "
            f"from here {result['pause_ms']:.1f} ms"
        )
    return 0


def _cmd_node(args: argparse.Namespace) -> int:
    with configured(args.log_level):
        return _node(args)


def _node(args: argparse.Namespace) -> int:
    from seqbus.node_args import constructor_arguments

    importable_from(args.path)
    cls = load_node_class(args.target)
    start: Start = "rewind" if args.rewind else args.from_seq if args.from_seq else "live"
    kwargs = constructor_arguments(cls, args.arg or [])
    try:
        node = cls(**kwargs)
    except (TypeError, ValueError) as exc:
        given = ", ".join(f"{k}={v!r}" for k, v in kwargs.items())
        raise SeqbusError(
            f"{args.target}({given}) refused its arguments: {type(exc).__name__}: {exc}"
        ) from exc
    # a fail-stop is printed below, once: the node's own log record of it is left out
    logging.getLogger("seqbus.node").addFilter(
        lambda record: not hasattr(record, "seqbus_failure")
    )
    # on a udp-unicast bus without --listen, the first free node slot (seqbus up's layout)
    slots = [args.listen] if args.listen else listen_candidates(args.config)
    try:
        for i, listen in enumerate(slots):
            if listen is not None and not args.listen:
                log.info("%s/%d: listens on node slot %s", args.account, args.instance, listen)
            try:
                run(
                    node, args.config, args.account, args.instance, start=start, listen=listen,
                    on_error=args.on_error, skip=args.skip or (),
                )
            except TransportError as exc:  # the slot was taken since it was read: the next one
                if args.listen or listen is None or "in use" not in str(exc).lower():
                    raise
                if i + 1 == len(slots):
                    raise SeqbusError(f"no free node slot: {', '.join(map(str, slots))}") from exc
                log.warning("%s/%d: node slot %s was taken meanwhile (%s): the next one",
                            args.account, args.instance, listen, exc)
                continue
            break
    except Exception:
        failure = node.stats.failure
        if failure is None:
            raise
        # fail-stop: the message, the handler and the traceback, then the status as JSON
        print(f"seqbus node: {args.account}/{args.instance}: {failure.describe()}", file=sys.stderr)
        print(failure.traceback, end="", file=sys.stderr)
        print(f"seqbus node: status: {json.dumps(node.status())}", file=sys.stderr)
        return EXIT_HANDLER_FAILED
    return 0


#: Exit status of ``seqbus admin command`` when no answer came in time.
EXIT_ADMIN_TIMEOUT = 3
#: Exit status of ``seqbus node`` when a handler raised under the fail-stop policy.
EXIT_HANDLER_FAILED = 4


def _cmd_admin_command(args: argparse.Namespace) -> int:
    import json

    from seqbus.admin import HELP, AdminTimeoutError, send_admin_command

    name = HELP if args.admin == "commands" else args.name
    argv: list[str] = [] if args.admin == "commands" else args.args
    try:
        result = send_admin_command(
            args.config,
            args.target,
            name,
            argv,
            sender=args.sender,
            sender_instance=args.sender_instance,
            timeout=args.timeout,
            listen=args.listen,
        )
    except AdminTimeoutError as exc:
        print(f"seqbus admin {args.admin}: timeout: {exc}", file=sys.stderr)
        return EXIT_ADMIN_TIMEOUT
    if args.json:
        print(json.dumps(dataclasses.asdict(result)))
    elif result.ok:
        if result.text:
            print(result.text)
    else:
        print(
            f"seqbus admin {args.admin}: {result.target} answered {result.status}: {result.text}",
            file=sys.stderr,
        )
    return 0 if result.ok else 1


def _cmd_admin_status(args: argparse.Namespace) -> int:
    from seqbus.status import main as status_main

    return status_main(args.config, args.json, args.metrics)


def _add_admin_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    admin = sub.add_parser(
        "admin",
        help="operate running nodes: send an admin command to an account's nodes",
        description="Admin commands are sequenced: every instance of the target account "
        "(primary, hot backup, late joiners, replays) runs them at the same point of the stream.",
    )
    admin_sub = admin.add_subparsers(dest="admin", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("target", metavar="ACCOUNT", help="the account whose nodes run it")
        p.add_argument("-c", "--config", required=True, help="bus configuration (TOML)")
        p.add_argument(
            "--sender",
            default="ADMIN",
            help="the account to send under (default ADMIN); concurrent operators should "
            "use different ones",
        )
        p.add_argument("--sender-instance", type=int, default=1, help="instance to send as")
        p.add_argument(
            "--timeout", type=float, default=10.0, help="give up after this many s (default 10)"
        )
        p.add_argument("--listen", metavar="HOST:PORT", help="udp-unicast receive address")
        p.add_argument("--json", action="store_true", help="print the reply as one JSON object")
        p.set_defaults(func=_cmd_admin_command)

    p = admin_sub.add_parser(
        "command",
        help="send NAME ARGS... to every node of ACCOUNT and print the reply",
        epilog="Exit status: 0 the node answered Ok, 1 it answered with an error (or bad "
        f"input), {EXIT_ADMIN_TIMEOUT} no answer in time. Put -- before arguments that start "
        "with '-'.",
    )
    common(p)
    p.add_argument("name", metavar="NAME", help="the command (help lists them)")
    p.add_argument("args", metavar="ARGS", nargs="*", help="its arguments, as text")

    p = admin_sub.add_parser(
        "commands", help="list the admin commands the nodes of ACCOUNT registered (help)"
    )
    common(p)

    p = admin_sub.add_parser(
        "status",
        help="the sequencer's counters, from its status endpoint ([sequencer] status)",
        description="Every sequencer's status (each member of a [cluster]). Exit status 0: "
        "all answered; 5: some did not (each is named with why); 1: none did.",
    )
    p.add_argument("-c", "--config", required=True, help="bus configuration (TOML)")
    group = p.add_mutually_exclusive_group()
    group.add_argument("--json", action="store_true", help="print the /status JSON as it is")
    group.add_argument(
        "--metrics", action="store_true", help="print each sequencer's Prometheus /metrics"
    )
    p.set_defaults(func=_cmd_admin_status)

    p = admin_sub.add_parser(
        "switchover",
        help="hand the leadership of a [cluster] of sequencers to another member (planned, "
        "nothing lost; docs/ha.md)",
    )
    p.add_argument("-c", "--config", required=True, help="bus configuration (TOML)")
    p.add_argument(
        "--to",
        type=int,
        metavar="ID",
        help="the member to hand over to (default: the most up-to-date standby)",
    )
    p.add_argument("--timeout", type=float, default=5.0, help="give up after this many s")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    p.set_defaults(func=_cmd_admin_switchover)


def _cmd_demo(args: argparse.Namespace) -> int:
    from seqbus.demo import main as demo_main

    return demo_main(args)


def _add_log_level(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--log-level", choices=LEVELS, default="INFO", type=str.upper,
        help="the least level of the log lines written to stderr (default INFO: every event; "
        "DEBUG adds more, WARNING only what needs a look)",
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="seqbus", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("sequencer", help="run the sequencer of a bus")
    p.add_argument("-c", "--config", required=True, help="bus configuration (TOML)")
    p.add_argument(
        "--id", type=int, metavar="N", help="which member of [cluster] this sequencer is"
    )
    _add_log_level(p)
    p.set_defaults(func=_cmd_service)

    p = sub.add_parser("replayer", help="run a replayer serving gap fills and rewinds")
    p.add_argument("-c", "--config", required=True, help="bus configuration (TOML)")
    _add_log_level(p)
    p.set_defaults(func=_cmd_service)

    p = sub.add_parser(
        "journal",
        help="check a sequencer's journal, or repair its damaged segments from a peer's copy",
    )
    journal_sub = p.add_subparsers(dest="journal", required=True)
    q = journal_sub.add_parser(
        "verify", help="read every record; name the file and offset of any damage"
    )
    q.add_argument("dir", help="the journal directory")
    q.add_argument("--json", action="store_true", help="print the report as one JSON object")
    q.set_defaults(func=_cmd_journal)
    q = journal_sub.add_parser(
        "repair",
        help="rewrite the damaged segments of DIR from PEER, another sequencer's (or a "
        "replayer's) journal of the same session; damaged files are kept as *.damaged",
    )
    q.add_argument("dir", help="the damaged journal directory")
    q.add_argument("--from", dest="peer", required=True, metavar="PEER", help="a peer's journal")
    q.add_argument("--json", action="store_true", help="print the report as one JSON object")
    q.set_defaults(func=_cmd_journal)

    p = sub.add_parser(
        "dispatcher",
        help="run this host's dispatcher: the one downstream reader, feeding the shared-memory "
        "ring local nodes read (docs/transports.md)",
    )
    p.add_argument("-c", "--config", required=True, help="bus configuration (TOML)")
    _add_log_level(p)
    p.set_defaults(func=_cmd_service)

    p = sub.add_parser(
        "bridge",
        help="join this site to a bus at another site: log in to its replayers over SoupBinTCP, "
        "republish the stream on this site's multicast, serve this site's gap fills and carry "
        "its commands back ([bridge], docs/sites.md)",
    )
    p.add_argument("-c", "--config", required=True, help="this site's configuration (TOML)")
    _add_log_level(p)
    p.set_defaults(func=_cmd_service)

    p = sub.add_parser(
        "node",
        help="run one application node, MODULE:CLASS",
        epilog="It says what it does through logging, one line per event on stderr: what it "
        "waits for, connected, no heartbeat (and the likely cause), a new leader, rewinding "
        "progress, caught up, stopped.",
    )
    p.add_argument("target", help="the node class, e.g. seqbus.examples.exchange.engine:MatchingEngine")
    p.add_argument(
        "--arg", action="append", metavar="NAME=VALUE",
        help="a keyword argument of the class's constructor, converted to its annotation "
        "(int, float, bool, str, Path, Decimal, an Enum's member, a Literal's value); repeat "
        "it for each argument, and a list parameter's name once per item",
    )
    p.add_argument("-c", "--config", required=True, help="bus configuration (TOML)")
    p.add_argument("--account", required=True, help="the node's account (1-8 ASCII characters)")
    p.add_argument("--instance", type=int, default=1, help="instance id (hot-hot copies)")
    p.add_argument(
        "--path",
        action="append",
        help="prepend a directory to sys.path (the working directory is on it already)",
    )
    p.add_argument(
        "--listen",
        metavar="HOST:PORT",
        help="udp-unicast receive address (default: node.listen, else the first free node slot "
        "of downstream.subscribers)",
    )
    start = p.add_mutually_exclusive_group()
    start.add_argument("--rewind", action="store_true", help="replay the stream from the start")
    start.add_argument("--from", dest="from_seq", type=int, metavar="SEQ", help="replay from SEQ")
    p.add_argument(
        "--on-error", choices=("stop", "skip"),
        help="when a handler raises: stop (fail-stop) or skip the message; overrides the "
        "configuration's node.on_error (every instance of the account must agree)",
    )
    p.add_argument(
        "--skip", type=int, action="append", metavar="SEQ",
        help="do not hand message SEQ to the handlers (repeatable; every instance of the "
        "account must be given the same: [node.accounts.NAME] skip is the place for them)",
    )
    _add_log_level(p)
    p.set_defaults(func=_cmd_node)

    _add_admin_commands(sub)

    p = sub.add_parser(
        "demo",
        help="the exchange on the bus (gateway, matching engine primary and hot backup, market "
        "data, late joiner; the primary is killed mid-run), or with --pingpong two nodes "
        "ping-ponging; prints rates, latencies and state hashes",
    )
    p.add_argument(
        "--exchange",
        dest="exchange",
        action="store_true",
        default=True,
        help="the exchange (the default)",
    )
    p.add_argument(
        "--pingpong",
        dest="exchange",
        action="store_false",
        help="a sequencer and two nodes ping-ponging: the round-trip latency demo",
    )
    p.add_argument("--orders", type=int, default=20000, help="orders the exchange gateway sends")
    p.add_argument(
        "--no-sequencer-kill",
        dest="sequencer_kill",
        action="store_false",
        help="keep the leading sequencer alive (the exchange kills it at three quarters)",
    )
    p.add_argument("--count", type=int, default=20000, help="ping-pong round trips to measure")
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    p.add_argument("--unicast", action="store_true", help="use UDP unicast, not multicast")
    p.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="give up after this many s (default 120, and 2 s more per 1,000 orders or round trips)",
    )
    p.add_argument(
        "--idle",
        choices=("hybrid", "block", "spin-yield", "busy-spin"),
        default="hybrid",
        help="idle strategy of the sequencer and the nodes (busy-spin costs a core each)",
    )
    p.add_argument(
        "--workdir",
        metavar="DIR",
        help="keep the run's files (configuration, journal, reports, and the archive the report "
        "is made from: none with --no-report) in DIR",
    )
    p.add_argument(
        "--no-report",
        dest="report",
        action="store_false",
        help="skip the final Spark report over the session archive",
    )
    p.set_defaults(func=_cmd_demo)

    from seqbus.archive.cli import add_commands as add_archive_commands
    from seqbus.scaffold import add_command as add_new_command
    from seqbus.sdk import add_command as add_sdk_command
    from seqbus.tail import add_command as add_tail_command
    from seqbus.up import add_command as add_up_command

    add_archive_commands(sub)  # archive ls|cat|verify|export|seal|follow|tail
    add_new_command(sub)  # new: a project to grow
    add_sdk_command(sub)  # sdk: where the Java and C++ node SDK lies
    add_up_command(sub)  # up: a development bus
    add_tail_command(sub)  # tail: follow a live bus
    return parser


def missing_extra(exc: ModuleNotFoundError) -> str | None:
    """``pip install 'seqbus[EXTRA]'`` when seqbus's own code failed to import a module one
    of its extras installs (pyarrow for ``seqbus archive``, ...); None for any other import
    (a user's module is the user's)."""
    import importlib.metadata
    import re

    wanted = (exc.name or "").partition(".")[0].lower()
    tb, where = exc.__traceback__, ""
    while tb is not None:  # the innermost frame that is not the import machinery
        if not tb.tb_frame.f_code.co_filename.startswith("<frozen"):
            where = tb.tb_frame.f_code.co_filename
        tb = tb.tb_next
    if not wanted or not where.startswith(os.path.dirname(os.path.abspath(__file__)) + os.sep):
        return None
    try:
        requires = importlib.metadata.requires("seqbus") or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for line in requires:  # e.g. 'pyarrow>=22; extra == "archive"', the extras in order
        m = re.match(r"\s*([A-Za-z0-9_.-]+).*;.*extra\s*==\s*[\"']([^\"']+)", line)
        if m and m.group(1).lower().replace("-", "_") == wanted:
            return f"pip install 'seqbus[{m.group(2)}]'"
    return None


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        code: int = args.func(args)
    except SeqbusError as exc:
        print(f"seqbus {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except ModuleNotFoundError as exc:
        fix = missing_extra(exc)
        if fix is None:
            raise
        print(f"seqbus {args.command}: error: this needs {exc.name}, which is not installed: "
              f"{fix}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
