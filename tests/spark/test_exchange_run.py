"""A session archive from a real run of the exchange example (``seqbus demo``: gateway,
matching engine primary and hot backup, market data, late joiner, separate processes over UDP
multicast) decodes in Spark to exactly the messages the nodes saw: per message type, the count
and a digest of (sequence, sequencer time, key field) the market data node recorded live."""

from __future__ import annotations

import hashlib
import json
import struct
from pathlib import Path
from typing import Any

import pytest

from tests.archive import session as sess
from tests.conftest import run_demo

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("multicast")]

SEEN = struct.Struct("<QQQ")  # examples/exchange/demo_nodes.py: DemoMarketData


def _key(row: Any, name: str) -> int:
    if name == "exchange.Trade":
        return int(row["trade_id"])
    if name == "exchange.BookUpdate":
        return int(sum(level["quantity"] for level in row["levels"]))
    return int(row["order_id"])


def test_archive_of_an_exchange_run_decodes_to_what_the_nodes_saw(
    spark: Any, tmp_path: Path
) -> None:
    from seqbus.archive import Archive, JournalArchiver

    run = tmp_path / "run"
    proc = run_demo(["--json", "--orders", "2000", "--workdir", str(run)], tmp_path, timeout=200)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)
    assert summary["lost_orders"] == 0 and summary["hashes_equal"]

    archive = tmp_path / "exchange.archive"
    archiver = JournalArchiver(run / "journal", archive, sess.schemas())
    archiver.catch_up()
    archiver.seal()
    assert Archive(archive).verify().ok

    seen = json.loads((run / "reports" / "MD-1.json").read_text())
    last = int(seen["last_sequence"])
    recorded = seen["seen"]
    # every exchange type the run produced, the rarer ones included
    assert {"exchange.NewOrder", "exchange.OrderAccepted", "exchange.Trade",
            "exchange.CancelOrder", "exchange.OrderCancelled", "exchange.BookUpdate"} <= set(recorded)

    envelope = spark.read.format("seqbus").load(str(archive)).where(f"sequence <= {last}")
    counts = {r["type"]: r["count"] for r in envelope.groupBy("type").count().collect()}
    for name, want in recorded.items():
        # the typed table of each type, decoded from the archive by Spark
        rows = (
            spark.read.format("seqbus").option("message", name).load(str(archive))
            .where(f"sequence <= {last}").orderBy("sequence").collect()
        )
        digest = hashlib.blake2b(digest_size=16)
        for r in rows:
            digest.update(SEEN.pack(r["sequence"], r["timestamp_ns"], _key(r, name)))
        assert (len(rows), digest.hexdigest()) == (want["count"], want["digest"]), name
        assert counts[name] == want["count"], name
    # and nothing of an exchange type the node did not see
    assert {t for t in counts if t.startswith("exchange.")} == set(recorded)
