"""``seqbus archive ls|cat|verify|export|seal|follow|tail`` (``seqbus tail`` follows a live bus
itself: seqbus.tail).

:func:`add_commands` adds them to the ``seqbus`` CLI (runtime/seqbus/cli.py calls it).
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from seqbus.archive.errors import ArchiveError


def _progress(total: int, desc: str, unit: str) -> Any:
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit, file=sys.stderr, disable=None, leave=False,
                unit_scale=True)


def _bounds(args: argparse.Namespace) -> dict[str, Any]:
    from seqbus.archive.text import parse_time

    b: dict[str, Any] = {}
    if args.from_seq is not None:
        b["seq_lo"] = args.from_seq
    if args.to_seq is not None:
        b["seq_hi"] = args.to_seq
    try:
        if args.since is not None:
            b["ts_lo"] = parse_time(args.since)
        if args.until is not None:
            b["ts_hi"] = parse_time(args.until)
    except ValueError as exc:
        raise ArchiveError(f"bad time: {exc}") from None
    return b


def _archives(path: Path) -> Iterator[Path]:
    if (path / "archive.json").exists():
        yield path
        return
    if not path.is_dir():
        raise ArchiveError(f"{path}: no such archive or directory")
    for p in sorted(path.iterdir()):
        if (p / "archive.json").exists():
            yield p


def cmd_ls(args: argparse.Namespace) -> int:
    from seqbus.archive import Archive
    from seqbus.archive.text import iso_ns

    found = damaged = False
    for p in _archives(Path(args.path)):
        found = True
        a = Archive(p)
        segs = a.segments()
        n = sum(s.count for s in segs)
        files = [Path(f) for s in segs for f in (s.seg, s.idx)]
        missing = [f.name for f in files if not f.exists()]
        size = sum(f.stat().st_size for f in files if f.exists())
        first = next((s for s in segs if s.count), None)
        span = "empty"
        if first is not None:
            last = [s for s in segs if s.count][-1]
            span = (f"sequences {first.first_sequence}-{last.last_sequence}  "
                    f"{iso_ns(first.first_timestamp_ns)} .. {iso_ns(last.last_timestamp_ns)}")
        schemas = ",".join(s["package"] for s in a.manifest["schemas"])
        print(f"{p}  session {a.session}  {'sealed' if a.sealed else 'LIVE'}  {len(segs)} segments  "
              f"{n} messages  {size / 1e6:.1f} MB  schemas {schemas}  {span}"
              + (f"  MISSING {', '.join(missing)}" if missing else ""))
        damaged = damaged or bool(missing)
    if not found:
        print(f"no archives under {args.path}", file=sys.stderr)
        return 1
    return 1 if damaged else 0


def _print(rows: Iterator[dict[str, Any]], as_json: bool, limit: int | None) -> int:
    from seqbus.archive.text import json_line, text_line

    n = 0
    fmt = json_line if as_json else text_line
    try:
        for r in rows:
            if limit is not None and n >= limit:
                break
            sys.stdout.write(fmt(r) + "\n")
            n += 1
        sys.stdout.flush()
    except BrokenPipeError:  # `| head`
        return n
    return n


def _report_problems(a: Any) -> int:
    for p in a.problems:
        print(f"seqbus: corrupt record skipped: {p}", file=sys.stderr)
    return 1 if a.problems else 0


def cmd_cat(args: argparse.Namespace) -> int:
    from seqbus.archive import Archive
    from seqbus.archive.text import messages

    a = Archive(args.archive, on_problem="collect")  # listed at the end, not logged
    _print(messages(a, types=args.type, nodes=args.node, **_bounds(args)), args.json, args.limit)
    return _report_problems(a)


def cmd_tail(args: argparse.Namespace) -> int:
    """Follows a live archive: prints what is there (from --from or the last --lines), then
    every new message as the archiver appends it, until the archive is sealed or Ctrl-C."""
    from seqbus.archive import Archive
    from seqbus.archive.text import messages

    a = Archive(args.archive, on_problem="collect")
    last = a.last_sequence or 0
    nxt = args.from_seq if args.from_seq is not None else max(1, last - args.lines + 1)
    deadline = None if args.timeout is None else time.monotonic() + args.timeout
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        while not stop.is_set():
            a.refresh()
            last = a.last_sequence or 0
            if last >= nxt:
                for r in messages(a, types=args.type, nodes=args.node, seq_lo=nxt, seq_hi=last):
                    _print(iter([r]), args.json, None)
                nxt = last + 1
            if a.sealed and (a.last_sequence or 0) < nxt:
                break
            if deadline is not None and time.monotonic() > deadline:
                break
            stop.wait(args.interval)
    except KeyboardInterrupt:
        pass
    return _report_problems(a)


def cmd_verify(args: argparse.Namespace) -> int:
    from seqbus.archive import Archive

    a = Archive(args.archive)
    segs = a.segments()
    bar = _progress(sum(s.count for s in segs), "verify", "msg")
    rep = a.verify(progress=lambda s: bar.update(s.count))
    bar.close()
    for p in rep.problems:
        print(f"{args.archive}/{p}")
    for p in rep.warnings:
        print(f"warning: {args.archive}/{p}")
    span = f"sequences {rep.first_sequence}-{rep.last_sequence}" if rep.records else "no records"
    status = "OK" if rep.ok else f"{len(rep.problems)} PROBLEMS"
    abandoned = (f", {rep.abandoned_messages} fragmented messages abandoned by their sender"
                 if rep.abandoned_messages else "")
    print(f"{status}: {rep.segments} segments, {rep.records} records ({rep.good} good), {span}"
          f"{abandoned}")
    return 0 if rep.ok else 1


#: The file each table's directory gets from ``seqbus archive export`` (Spark's export job
#: writes its own part files into the same directories).
PART = "part-00000.parquet"


def cmd_export(args: argparse.Namespace) -> int:
    """Parquet without Spark: ``OUT/envelope/`` and ``OUT/<package.Message>/`` per type, the
    layout and schemas of the Spark export job (docs/archive.md)."""
    import pyarrow.parquet as pq

    from seqbus.archive import Archive
    from seqbus.archive import tables as T

    a = Archive(args.archive)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    bounds = _bounds(args)
    slices = a.slices(**bounds)
    total = sum(s.records for s in slices)
    present = set()
    rows = 0
    bar = _progress(total, "envelope", "msg")
    (out / "envelope").mkdir(exist_ok=True)
    with pq.ParquetWriter(out / "envelope" / PART, T.ENVELOPE_SCHEMA, **T.PARQUET) as w:
        for sl, b in zip(slices, a.envelope_batches(slices), strict=True):
            w.write_batch(b)
            present.update(b.column("type").unique().to_pylist())
            rows += b.num_rows
            bar.update(sl.records)
    bar.close()
    envelope_rows = rows
    wanted = sorted(present & set(a.type_names().values()))
    if args.type:
        wanted = [t for t in wanted if t in {f"{a.ir[s]['package']}.{n}" for s, n in map(a.resolve, args.type)}]
    for typ in wanted:
        bar = _progress(total, typ, "msg")
        rows = 0
        (out / typ).mkdir(exist_ok=True)
        with pq.ParquetWriter(out / typ / PART, a.typed_schema(typ), **T.PARQUET) as w:
            for sl, b in zip(slices, a.typed_batches(typ, slices), strict=True):
                w.write_batch(b)
                rows += b.num_rows
                bar.update(sl.records)
        bar.close()
        print(f"{out / typ}: {rows} rows")
    print(f"{out / 'envelope'}: {envelope_rows} rows")
    return _report_problems(a)


def _schemas(paths: list[str] | None) -> list[tuple[int, str, str]]:
    from seqbus.archive import load_ir

    if not paths:
        raise ArchiveError("give the schema of every package the session carries: --schema "
                           "with its generated Python package (e.g. exchange.messages: the IR "
                           "it ships), its IR file (`seqc ir --json SCHEMA.idl`) or its .idl "
                           "(needs seqc)")
    return load_ir(paths)


def cmd_seal(args: argparse.Namespace) -> int:
    import shutil

    from seqbus.archive.archiver import JournalArchiver

    schemas = _schemas(args.schema)
    out = Path(args.out)
    existed = out.exists()
    try:
        a = JournalArchiver(args.journal, out, schemas, segment_bytes=args.segment_mb << 20)
        n = a.catch_up()
        torn = a.torn_tail
        m = a.seal()
    except ArchiveError:
        if not existed:  # a refused seal leaves no half-written archive behind
            shutil.rmtree(out, ignore_errors=True)
        raise
    # records: one per sequence number; a fragmented message spans several
    # (`seqbus archive verify` counts the messages they make)
    print(f"{args.out}: sealed, {n} records in {len(m['segments'])} segments")
    if torn is not None:
        print(f"{args.out}: the journal ends in a torn tail at {torn[0]}:{torn[1]} (a record a "
              "crash cut short: never published), not archived", file=sys.stderr)
    return 0


def cmd_follow(args: argparse.Namespace) -> int:
    from seqbus.archive.archiver import JournalArchiver

    a = JournalArchiver(args.journal, args.out, _schemas(args.schema),
                        segment_bytes=args.segment_mb << 20)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    a.follow(stop, interval=args.interval, idle_exit=args.idle_exit)
    m = a.seal()
    print(f"{args.out}: sealed at sequence {a_last(m)}, {len(m['segments'])} segments")
    return 0


def a_last(m: dict[str, Any]) -> int:
    segs = [s for s in m["segments"] if s["count"]]
    return segs[-1]["first_sequence"] + segs[-1]["count"] - 1 if segs else 0


def cmd_replay(args: argparse.Namespace) -> int:
    """Runs a node class over the archive offline and prints its statistics."""
    from seqbus.archive import Archive, replay
    from seqbus.runner import load_node_class

    for d in reversed(args.path or []):
        sys.path.insert(0, d)
    cls = load_node_class(args.target)
    t0 = time.perf_counter()
    node = replay(cls, Archive(args.archive), account=args.account, instance=args.instance,
                  **_bounds(args))
    s = node.stats
    print(f"replayed {args.target} over {args.archive} in {time.perf_counter() - t0:.2f} s: "
          f"{s.messages} messages handled, {s.timers_fired} timers fired, "
          f"{len(getattr(node._client, 'sent', ()))} commands sent")
    return 0


def _filters(p: argparse.ArgumentParser) -> None:
    p.add_argument("--type", action="append", metavar="TYPE",
                   help="only this message type (exchange.NewOrder or NewOrder); repeatable")
    p.add_argument("--node", action="append", metavar="ACCOUNT[:INSTANCE]",
                   help="only messages sent by this node; repeatable")
    p.add_argument("--json", action="store_true", help="JSON lines instead of readable lines")


def _ranges(p: argparse.ArgumentParser, with_from: bool = True) -> None:
    if with_from:
        p.add_argument("--from", dest="from_seq", type=int, metavar="SEQ", help="first sequence")
    p.add_argument("--to", dest="to_seq", type=int, metavar="SEQ", help="last sequence")
    p.add_argument("--since", metavar="TIME", help="first sequencer time (ISO 8601 UTC, or ns)")
    p.add_argument("--until", metavar="TIME", help="last sequencer time (ISO 8601 UTC, or ns)")


def add_commands(sub: Any) -> None:
    """Adds ``archive`` to the ``seqbus`` CLI's subparsers."""
    p = sub.add_parser("archive", help="session archives: ls, cat, verify, export, seal, follow")
    asub = p.add_subparsers(dest="archive_command", required=True)

    q = asub.add_parser("ls", help="list archives (an archive or a directory of them)")
    q.add_argument("path")
    q.set_defaults(func=cmd_ls)

    q = asub.add_parser("cat", help="print decoded messages")
    q.add_argument("archive")
    _filters(q)
    _ranges(q)
    q.add_argument("--limit", type=int, help="stop after this many messages")
    q.set_defaults(func=cmd_cat)

    q = asub.add_parser("verify", help="check checksums, indexes and sequence contiguity")
    q.add_argument("archive")
    q.set_defaults(func=cmd_verify)

    q = asub.add_parser("export", help="write Parquet files (envelope + one per message type)")
    q.add_argument("archive")
    q.add_argument("out", help="output directory")
    q.add_argument("--type", action="append", metavar="TYPE", help="only these typed tables")
    _ranges(q)
    q.set_defaults(func=cmd_export)

    for name, helptext, fn in (
        ("seal", "archive a finished journal and seal it", cmd_seal),
        ("follow", "archive a live journal as the sequencer writes it; seal on exit", cmd_follow),
    ):
        q = asub.add_parser(name, help=helptext)
        q.add_argument("journal", help="the sequencer's journal directory")
        q.add_argument("out", help="the archive directory to create")
        q.add_argument("--schema", action="append", metavar="PACKAGE_IR_OR_IDL",
                       help="a package the session carries: its generated Python package "
                       "(exchange.messages), its IR JSON (seqc ir --json), or its .idl (needs "
                       "seqc); repeatable")
        q.add_argument("--segment-mb", type=int, default=64, help="archive segment size (MiB)")
        if name == "follow":
            q.add_argument("--interval", type=float, default=0.05, help="poll interval (s)")
            q.add_argument("--idle-exit", type=float, help="seal after this many s without news")
        q.set_defaults(func=fn)

    q = asub.add_parser("replay", help="run a node class over the archive (offline replay)")
    q.add_argument("archive")
    q.add_argument("target", help="the node class, MODULE:CLASS")
    q.add_argument("--account", default="REPLAY", help="the node's live account (for `mine`)")
    q.add_argument("--instance", type=int, default=1)
    q.add_argument("--path", action="append", help="prepend a directory to sys.path")
    _ranges(q)
    q.set_defaults(func=cmd_replay)

    p = asub.add_parser("tail", help="follow a live archive, printing messages as they arrive")
    p.add_argument("archive")
    _filters(p)
    p.add_argument("--from", dest="from_seq", type=int, metavar="SEQ", help="start at SEQ")
    p.add_argument("--lines", type=int, default=10, help="start with the last N (default 10)")
    p.add_argument("--interval", type=float, default=0.2, help="poll interval (s)")
    p.add_argument("--timeout", type=float, help="stop after this many s")
    p.set_defaults(func=cmd_tail)
