"""``seqbus tail``: follow a live bus, one line per message.

``seqbus tail -c bus.toml`` joins the bus as a node that only receives (account ``TAIL``; it
sends nothing) and prints every application message of the stream, decoded with the generated
packages it is given (``--messages myapp.messages``, repeatable) or finds (the
``python-package`` table of the seqc build hook in ``./pyproject.toml``), and the bus's own
(``seqbus.bus``: admin commands and replies). A message of a schema it has no package for is
printed by its schema and template ids. It needs no archiver and no pyarrow: the stream comes
from the sequencer (and the replayers, for ``--from``) as to any node.

On a ``udp-unicast`` bus it listens on a node slot of ``downstream.subscribers`` no other
process holds (``--listen`` picks one). Control messages (clock ticks, a new leader's epoch)
are not application messages and are not printed, so the printed sequences have holes where
they are; each printed sequence is a message's own.
"""

from __future__ import annotations

import argparse
import base64
import datetime as dt
import enum
import importlib
import json
import logging
import os
import signal
import sys
import time
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from seqbus.batch import MESSAGE_HEADER, RECORD_MESSAGE, RECORD_REWOUND
from seqbus.batch import records as batch_records
from seqbus.errors import SeqbusError, SessionEndedError, TransportError
from seqbus.logs import LEVELS
from seqbus.runner import Start, importable_from
from seqbus.up import listen_candidates

__all__ = ["Decoder", "add_command", "main", "message_packages"]

log = logging.getLogger("seqbus.tail")

#: How long ``seqbus tail`` waits for the stream before it says what it waits for.
QUIET_WARNING_S = 5.0
POLL_TIMEOUT_S = 0.2


def message_packages(project: Path) -> list[str]:
    """The generated packages the seqc build hook of the project at ``project`` makes (the
    values of ``[tool.hatch.build.hooks.seqc] python-package``, else each schema's IDL package
    name); [] when there is no such table."""
    pyproject = project / "pyproject.toml"
    if not pyproject.is_file():
        return []
    try:
        doc = tomllib.loads(pyproject.read_text())
    except (OSError, tomllib.TOMLDecodeError):
        return []
    hook = doc.get("tool", {}).get("hatch", {}).get("build", {}).get("hooks", {}).get("seqc")
    if not isinstance(hook, dict):
        return []
    named = hook.get("python-package")
    if isinstance(named, dict) and named:
        return [str(v) for v in named.values()]
    found = []
    for schema in hook.get("schemas", []):
        for line in (project / str(schema)).read_text().splitlines():
            words = line.replace(";", " ").split()
            if len(words) >= 2 and words[0] == "package":
                found.append(words[1].replace(".", "_"))
                break
    return found


class Decoder:
    """Message types of generated packages, by ``(schema_id, template_id)``."""

    def __init__(self, modules: list[str]) -> None:
        self.types: dict[tuple[int, int], tuple[str, Any]] = {}
        self.packages: list[str] = []
        for name in ["seqbus.bus", *modules]:
            try:
                module = importlib.import_module(name)
            except ImportError as exc:
                raise SeqbusError(
                    f"cannot import the generated package {name!r}: {exc} (is the application "
                    "installed, e.g. pip install -e ., or its directory given with --path?)"
                ) from exc
            schema_id = getattr(module, "SCHEMA_ID", None)
            messages = getattr(module, "MESSAGES", None)
            package = getattr(module, "PACKAGE", name)
            if not isinstance(schema_id, int) or not isinstance(messages, dict):
                raise SeqbusError(
                    f"{name} is not a package seqc generated (it has no SCHEMA_ID and MESSAGES)"
                )
            self.packages.append(f"{package} ({name}, schema {schema_id})")
            for template_id, cls in messages.items():
                self.types[(schema_id, int(template_id))] = (f"{package}.{cls.__name__}", cls)

    def decode(self, body: bytes) -> tuple[str, dict[str, Any] | None]:
        """The type name and the fields of a message body (None when it does not decode, or
        its type is unknown: the name then gives its ids)."""
        _block, template_id, schema_id, _version = MESSAGE_HEADER.unpack_from(body)
        known = self.types.get((schema_id, template_id))
        if known is None:
            return f"(schema {schema_id} template {template_id}, {len(body)} bytes)", None
        name, cls = known
        try:
            return name, dict(cls.decode(body).to_dict())
        except Exception as exc:  # noqa: BLE001 - a body this package cannot read
            log.warning("tail: %s: does not decode: %s", name, exc)
            return name, None


def _iso_ns(ns: int) -> str:
    t = dt.datetime.fromtimestamp(ns // 1_000_000_000, tz=dt.timezone.utc)
    return t.strftime("%Y-%m-%dT%H:%M:%S") + f".{ns % 1_000_000_000:09d}Z"


def _plain(v: Any) -> Any:
    """A field's value as JSON has it: enum members by name, flags as ints, bytes base64."""
    if isinstance(v, enum.IntFlag):
        return int(v)
    if isinstance(v, enum.Enum):
        return v.name
    if isinstance(v, (bytes, bytearray, memoryview)):
        return {"base64": base64.b64encode(bytes(v)).decode()}
    if isinstance(v, dict):
        return {k: _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    return v


def _text(v: Any) -> str:
    if isinstance(v, enum.IntFlag):
        return "|".join(m.name or "" for m in type(v) if m in v) or "0"
    if isinstance(v, enum.Enum):
        return v.name
    if isinstance(v, (bytes, bytearray, memoryview)):
        return "0x" + bytes(v).hex() if v else "b''"
    if isinstance(v, str):
        return v if v and " " not in v and "=" not in v else json.dumps(v, ensure_ascii=False)
    if isinstance(v, dict):
        return "{" + " ".join(f"{k}={_text(x)}" for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_text(x) for x in v) + "]"
    if v is None:
        return "-"
    return str(v)


def format_line(record: dict[str, Any], as_json: bool) -> str:
    """One message as the archive's ``cat`` prints it: sequence, sequencer time (UTC), sender
    ``account:instance``, ``#command_seq``, type and ``field=value``; or one JSON object."""
    if as_json:
        out = dict(record, time=_iso_ns(record["timestamp_ns"]), fields=_plain(record["fields"]))
        return json.dumps(out, ensure_ascii=False, separators=(",", ":"))
    head = (
        f"{record['sequence']:>10} {_iso_ns(record['timestamp_ns'])} "
        f"{record['account'] or '?'}:{record['instance']} #{record['command_seq']} "
        f"{record['type']}"
    )
    fields = record["fields"]
    if fields is None:
        return head
    return head + "".join(f" {k}={_text(v)}" for k, v in fields.items())


def records(batch: bytes, decoder: Decoder) -> list[dict[str, Any] | int]:
    """The message records of one batch, decoded; a caught-up record is its sequence (int)."""
    out: list[dict[str, Any] | int] = []
    for r in batch_records(batch):
        if r.record_type == RECORD_MESSAGE:
            name, fields = decoder.decode(batch[r.body : r.end])
            out.append({
                "sequence": r.sequence,
                "timestamp_ns": r.timestamp_ns,
                "account": r.sender,
                "instance": r.instance,
                "command_seq": r.command_seq,
                "type": name,
                "size": r.body_length,
                "fields": fields,
            })
        elif r.record_type == RECORD_REWOUND:
            out.append(r.sequence)
    return out


def _connect(args: argparse.Namespace, start: Start) -> tuple[Any, str | None]:
    from seqbus import _core

    addresses = [args.listen] if args.listen else listen_candidates(args.config, last_first=True)
    errors = []
    for address in addresses:
        try:
            client = _core.NodeClient(
                args.config, args.account, args.instance, start=start, topics=None,
                listen=address,
            )
        except TransportError as exc:
            if args.listen or "in use" not in str(exc).lower():
                raise
            errors.append(f"{address}: {exc}")  # taken since it was read: the next one
            continue
        return client, address
    raise SeqbusError("no free node slot: " + "; ".join(errors))


def main(args: argparse.Namespace) -> int:
    from seqbus.logs import configured

    with configured(args.log_level):
        return _tail(args)


def _tail(args: argparse.Namespace) -> int:
    importable_from(args.path)
    modules = args.messages or message_packages(Path.cwd())
    decoder = Decoder(modules)
    start: Start = args.from_seq if args.from_seq is not None else "live"
    client, address = _connect(args, start)
    log.info(
        "tail: following %s from %s as %s/%d%s; decoding %s", args.config,
        f"sequence {args.from_seq}" if args.from_seq is not None else "live", args.account,
        args.instance, f" on {address}" if address else "", ", ".join(decoder.packages),
    )
    stop: list[int] = []

    def on_signal(signum: int, _frame: object) -> None:
        stop.append(signum)

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    printed = 0
    last_seen = time.monotonic()
    warned = False
    write: Callable[[str], object] = sys.stdout.write
    try:
        while not stop and (args.count is None or printed < args.count):
            try:
                batch = client.poll(4096, POLL_TIMEOUT_S)
            except SessionEndedError:
                log.info("tail: the session ended (the sequencer ended it)")
                break
            if not batch:
                if time.monotonic() - last_seen > QUIET_WARNING_S and not warned:
                    warned = True
                    log.warning(
                        "tail: nothing from the bus in %g s (%s): is it running (seqbus up -c %s)? "
                        "messages show here as they are sequenced", QUIET_WARNING_S,
                        f"listening on {address}" if address else "no message yet",
                        args.config,
                    )
                continue
            last_seen, warned = time.monotonic(), False
            for item in records(batch, decoder):
                if isinstance(item, int):
                    log.info("tail: caught up at sequence %d: live from here", item)
                    continue
                write(format_line(item, args.json) + "\n")
                printed += 1
                if args.count is not None and printed >= args.count:
                    break
            sys.stdout.flush()
    except BrokenPipeError:  # `| head`
        pass
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
        client.close()
    log.info("tail: stopped after %d messages%s", printed,
             f" ({signal.Signals(stop[0]).name})" if stop else "")
    return 0


def add_command(sub: Any) -> None:
    """``seqbus tail`` in the CLI's subparsers."""
    p = sub.add_parser(
        "tail",
        help="follow a live bus, one line per message, decoded with the application's "
        "generated package (no archiver needed)",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
    )
    p.add_argument("-c", "--config", required=True, help="bus configuration (TOML)")
    p.add_argument(
        "--messages", action="append", metavar="PACKAGE",
        help="a generated package to decode with, e.g. myapp.messages (repeatable; default: "
        "those of ./pyproject.toml's seqc build hook)",
    )
    p.add_argument("--from", dest="from_seq", type=int, metavar="SEQ",
                   help="start at sequence SEQ (1: the whole session); default: live")
    p.add_argument("--count", type=int, metavar="N", help="stop after N messages")
    p.add_argument("--json", action="store_true", help="one JSON object per line")
    p.add_argument("--listen", metavar="HOST:PORT",
                   help="udp-unicast receive address (default: a free node slot)")
    p.add_argument("--account", default="TAIL", help="the account it joins as (default TAIL)")
    p.add_argument("--instance", type=int, default=os.getpid() % 60000 + 1,
                   help="its instance (default: from its process id)")
    p.add_argument("--path", action="append",
                   help="prepend a directory to sys.path (the working directory is on it)")
    p.add_argument("--log-level", choices=LEVELS, default="INFO", type=str.upper,
                   help="the least level of the log lines written to stderr (default INFO)")
    p.set_defaults(func=main)
