"""Issue 18: a streaming query follows a live bus from another host: it logs in over
SoupBinTCP (the sequencer's TCP server) from a sequence, with no archive and no journal on its
host. Killed mid-run (SIGKILL of its whole process) and restarted from its checkpoint, it
ends with exactly the Pings the bus's listener node saw: every one once, same sequence,
time and fields."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.archive import session as sess
from tests.conftest import ROOT, Processes, seqbus_cli
from tests.transports.harness import tcp_listening, udp_bound, wait_for, write_config

pytestmark = [pytest.mark.slow]

TOTAL = 20_000  # Pings, from two senders


def test_remote_stream_restarts_from_its_checkpoint_with_exact_counts(
    spark: Any, tmp_path: Path, processes: Processes
) -> None:
    bus = write_config(tmp_path, "tcp")
    cli = seqbus_cli()
    seq = processes.start("sequencer", [*cli, "sequencer", "-c", str(bus.path)])
    assert wait_for(lambda: tcp_listening(bus.tcp) and udp_bound(bus.upstream), 30), processes.logs()
    assert seq.poll() is None, processes.logs()
    share = TOTAL // 2
    nodes = {}
    for account, target, index in (("LISTEN", "Listener", -1), ("SEND0", "Sender", 0),
                                   ("SEND1", "Sender", 1)):
        env = {"SEQBUS_E2E_TOTAL": str(TOTAL), "SEQBUS_E2E_SHARE": str(share),
               "SEQBUS_E2E_OUT": str(tmp_path / f"{account}.json"), "SEQBUS_E2E_INDEX": str(index)}
        nodes[account] = processes.start(account, [
            *cli, "node", f"tests.e2e.stream_nodes:{target}", "-c", str(bus.node_paths[account]),
            "--account", account, "--path", str(ROOT), "--rewind"], env=env)

    schemas = sess.ir_files(tmp_path)
    out, ckpt = tmp_path / "pings", tmp_path / "ckpt"
    config = tmp_path / "job.json"
    config.write_text(json.dumps({
        "server": f"127.0.0.1:{bus.tcp}", "username": "other", "password": "x",
        "schemas": schemas, "max_records": 3000, "out": str(out), "checkpoint": str(ckpt),
        "total": TOTAL, "timeout": 240}))
    job = [sys.executable, str(Path(__file__).with_name("remote_stream_job.py")), str(config)]
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1")

    first = processes.start("stream-1", job, env=env)
    commits = ckpt / "commits"
    # mid-run: some batches committed, far from all of them
    assert wait_for(lambda: first.poll() is not None or (
        commits.exists() and len(list(commits.glob("[0-9]*"))) >= 2), 180), processes.logs()
    assert first.poll() is None, f"the query ended before it was killed\n{processes.logs()}"
    processes.kill(first)  # SIGKILL to the job's process group: the driver JVM dies with it
    first.wait(timeout=30)
    done_before = len(list(commits.glob("[0-9]*")))
    second = processes.start("stream-2", job, env=env)
    try:
        assert second.wait(timeout=300) == 0, processes.logs()
    except subprocess.TimeoutExpired:
        pytest.fail(f"the restarted query did not finish\n{processes.logs()}")
    assert "batch" in processes.log("stream-2")
    assert len(list(commits.glob("[0-9]*"))) > done_before  # it went on from the checkpoint

    for account, proc in nodes.items():
        assert proc.wait(timeout=120) == 0, f"{account}\n{processes.logs()}"
    report = json.loads((tmp_path / "LISTEN.json").read_text())
    rows = spark.read.parquet(str(out)).orderBy("sequence").collect()
    assert len(rows) == TOTAL == report["seen"]
    assert len({r["sequence"] for r in rows}) == TOTAL  # nothing twice
    h = hashlib.blake2b(digest_size=16)
    for r in rows:
        h.update(struct.pack("<QQQQ", r["sequence"], r["timestamp_ns"], int(r["id"]), int(r["sent_at_ns"])))
    assert h.hexdigest() == report["hash"]
    processes.kill(seq, signal.SIGTERM)
