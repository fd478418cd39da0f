"""A real bus (sequencer + three node processes over UDP multicast) archived live from its
journal: the archive decodes to exactly the stream the nodes saw, and a streaming query over the
live archive, stopped and restarted from its checkpoint mid-run, ends with exactly the counts
of a batch read of the finished archive."""

from __future__ import annotations

import hashlib
import json
import struct
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from tests.archive import session as sess
from tests.conftest import ROOT, Processes, seqbus_cli
from tests.e2e.busconfig import wait_udp_bound, write_bus_config

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("multicast")]

TOTAL = 8000  # Pings from two senders


def _next(progress: Any) -> int:
    """The ``next`` of a progress report's end offset (a dict, or its JSON text)."""
    if progress is None:
        return 0
    end = progress["sources"][0]["endOffset"]
    if isinstance(end, str):
        try:
            end = json.loads(end)
        except ValueError:
            import ast

            end = ast.literal_eval(end)
    return int(end["next"]) if end else 0


def _wait(cond: Any, timeout: float, what: str, logs: Any = lambda: "") -> None:
    deadline = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}\n{logs()}")
        time.sleep(0.1)


def test_live_bus_archive_and_restarted_stream(spark: Any, tmp_path: Path, processes: Processes) -> None:
    from seqbus.archive import Archive, JournalArchiver

    bus = write_bus_config(tmp_path)
    cli = seqbus_cli()
    seq = processes.start("sequencer", [*cli, "sequencer", "-c", str(bus.path)])
    if not wait_udp_bound(bus.upstream, 30.0) or seq.poll() is not None:
        pytest.fail(f"the sequencer did not start\n{processes.logs()}")
    journal = tmp_path / "journal"
    _wait(lambda: any(journal.glob("*.seg")), 30, "the journal", processes.logs)

    schemas = [(json.loads(t)["schema_id"], n, t) for n, t in
               ((n, sess.ir_json(n)) for n in ("bus", "pingpong"))]
    archive = tmp_path / "live.archive"
    archiver = JournalArchiver(journal, archive, schemas, segment_bytes=256 << 10)
    stop = threading.Event()
    # Paced so that the archive grows over a few seconds whatever the bus's speed.
    def follow() -> None:
        while not stop.is_set():
            archiver.poll(500)
            stop.wait(0.1)
    follower = threading.Thread(target=follow, daemon=True)
    follower.start()

    share = TOTAL // 2
    procs = {}
    # every node rewinds, so each sees the whole stream whenever it joins (a node started at
    # live misses what was sequenced before it joined, and would wait for it forever)
    for account, target, index in (("LISTEN", "Listener", -1), ("SEND0", "Sender", 0), ("SEND1", "Sender", 1)):
        env = {"SEQBUS_E2E_TOTAL": str(TOTAL), "SEQBUS_E2E_SHARE": str(share),
               "SEQBUS_E2E_OUT": str(tmp_path / f"{account}.json"), "SEQBUS_E2E_INDEX": str(index)}
        procs[account] = processes.start(account, [
            *cli, "node", f"tests.e2e.stream_nodes:{target}", "-c", str(bus.path),
            "--account", account, "--path", str(ROOT), "--rewind"], env=env)

    # A streaming query over the live archive: stopped after its first batch, then restarted
    # from its checkpoint.
    out, ckpt = tmp_path / "stream.out", tmp_path / "stream.ckpt"
    _wait(lambda: (archive / "archive.json").exists() and Archive(archive).last_sequence, 20,
          "the first archived messages", processes.logs)

    def start(max_records: int | None = None) -> Any:
        r = spark.readStream.format("seqbus")
        if max_records is not None:
            r = r.option("maxRecordsPerTrigger", str(max_records))
        df = r.load(str(archive))
        return (df.select("sequence", "type", "account").writeStream.format("parquet")
                .option("path", str(out)).option("checkpointLocation", str(ckpt))
                .trigger(processingTime="200 milliseconds").start())

    q = start(max_records=1000)
    _wait(lambda: q.lastProgress is not None and q.lastProgress["numInputRows"] > 0, 90,
          "the first streaming batch")
    q.stop()
    first_end = _next(q.lastProgress)
    live_at_stop = Archive(archive)
    assert not live_at_stop.sealed  # stopped mid-run
    q = start()

    for account, proc in procs.items():
        try:
            assert proc.wait(timeout=120) == 0, f"{account} failed\n{processes.logs()}"
        except Exception:
            pytest.fail(f"{account} did not finish\n{processes.logs()}")
    stop.set()
    follower.join(30)
    archiver.catch_up()
    archiver.seal()
    last = Archive(archive).last_sequence
    assert last is not None and last > first_end

    def caught_up() -> bool:
        return _next(q.lastProgress) == last + 1
    q.processAllAvailable()
    _wait(caught_up, 120, "the restarted query to reach the end of the archive")
    q.stop()

    # Read through Spark: the file sink's log (_spark_metadata) names the files of committed
    # batches only. The q.stop() above may interrupt a batch after it wrote files of its own;
    # the restarted query runs that batch again from the checkpoint's offsets, so a plain read
    # of the directory (pyarrow) counted those rows twice (seen once in CI: 5,000 Pings of
    # SEND0 for the archive's 4,000, after "Aborting job ... InterruptedException").
    streamed = [r.asDict() for r in spark.read.parquet(str(out)).collect()]
    batch = spark.read.format("seqbus").load(str(archive))
    want = {(r["type"], r["account"]): r["count"] for r in batch.groupBy("type", "account").count().collect()}
    got: dict[tuple[str, str], int] = {}
    for r in streamed:
        got[(r["type"], r["account"])] = got.get((r["type"], r["account"]), 0) + 1
    assert got == want
    seqs = sorted(r["sequence"] for r in streamed)
    assert seqs == list(range(1, last + 1))  # nothing skipped, nothing counted twice

    # The archive holds exactly the stream the nodes saw: the listener's hash of every Ping.
    report = json.loads((tmp_path / "LISTEN.json").read_text())
    pings = (spark.read.format("seqbus").option("message", "pingpong.Ping").load(str(archive))
             .orderBy("sequence").select("sequence", "timestamp_ns", "id", "sent_at_ns").collect())
    h = hashlib.blake2b(digest_size=16)
    for p in pings:
        h.update(struct.pack("<QQQQ", p["sequence"], p["timestamp_ns"], int(p["id"]), int(p["sent_at_ns"])))
    assert len(pings) == TOTAL == report["seen"]
    assert h.hexdigest() == report["hash"]
    assert Archive(archive).verify().ok

    # Offline replay of the listener's class over the archive reaches the live node's state.
    import os

    from seqbus.archive import replay
    from tests.e2e.stream_nodes import Listener

    os.environ.update(SEQBUS_E2E_TOTAL=str(TOTAL), SEQBUS_E2E_OUT=str(tmp_path / "replay.json"))
    node = replay(Listener, Archive(archive), account="LISTEN")
    replayed = json.loads((tmp_path / "replay.json").read_text())
    assert node.seen == TOTAL and replayed["hash"] == report["hash"]
    assert replayed["last_seq"] == report["last_seq"]
