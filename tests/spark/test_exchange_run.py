"""A session archive from a real run of the exchange example (``seqbus demo``: gateway,
matching engine primary and hot backup, market data, late joiner, separate processes over UDP
multicast) reads back through every reader — ``archive export``, ``archive cat``, offline
replay, Spark's typed and envelope tables — to exactly the messages the nodes saw, fragmented
ones included, however the archive is cut into segments (issue 18).

What the nodes saw is the market data node's report: per message type, the count and a digest
of (sequence, sequencer time, key field) in stream order. The archive is sealed twice from the
run's journal: with ``--segment-mb 1`` and with segments so small that fragmented messages
lie across two of them.

``SEQBUS_DEMO_ORDERS`` sets the run's size: by default 300,000 orders, the size issue 18 names
(~870,000 messages, ~90 segments of 1 MiB; about 1.5 minutes on two busy cores).
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from scripts.generate import idl
from tests.archive import session as sess
from tests.conftest import run_demo

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("multicast")]

SEEN = struct.Struct("<QQQ")  # examples/exchange/demo_nodes.py: DemoMarketData
ORDERS = int(os.environ.get("SEQBUS_DEMO_ORDERS", "300000"))


def _key(row: Any, name: str) -> int:
    if name == "exchange.Trade":
        return int(row["trade_id"])
    if name == "exchange.BookUpdate":
        return int(sum(int(level["quantity"]) for level in row["levels"]))
    return int(row["order_id"])


def digests(rows: Iterable[Any], name: str, last: int) -> tuple[int, str]:
    """(count, digest) of a type's rows up to sequence ``last``, as DemoMarketData makes them."""
    d = hashlib.blake2b(digest_size=16)
    n = 0
    for r in rows:
        seq = r["sequence"] if "envelope_sequence" not in r else r["envelope_sequence"]
        if seq > last:
            continue
        ts = r["timestamp_ns"] if "envelope_timestamp_ns" not in r else r["envelope_timestamp_ns"]
        d.update(SEEN.pack(seq, ts, _key(r, name)))
        n += 1
    return n, d.hexdigest()


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("exchange-run")
    workdir = tmp / "run"
    proc = run_demo(["--json", "--orders", str(ORDERS), "--workdir", str(workdir)], tmp,
                    timeout=360 + ORDERS / 500)  # the demo's own is 120 s + ORDERS / 500
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads(proc.stdout)
    assert summary["lost_orders"] == 0 and summary["hashes_equal"]
    seen = json.loads((workdir / "reports" / "MD-1.json").read_text())
    # every exchange type the run produced, the rarer ones included
    assert {"exchange.NewOrder", "exchange.OrderAccepted", "exchange.Trade",
            "exchange.CancelOrder", "exchange.OrderCancelled", "exchange.BookUpdate"} <= set(seen["seen"])

    # sealed as a user would, with only the application's schema (control messages are still
    # named: the bus's schema is always known)
    mb1 = tmp / "mb1.archive"
    subprocess.run([sys.executable, "-m", "seqbus.cli", "archive", "seal", str(workdir / "journal"),
                    str(mb1), "--schema", str(idl("exchange")),
                    "--segment-mb", "1"], check=True, capture_output=True, timeout=600)
    from seqbus.archive import JournalArchiver

    # Where segments end is fixed by the journal and the segment size: the writer starts a new
    # segment when a record (16 bytes and the message) would take the current one past
    # segment_bytes (its header is 32 bytes). A size that ends the first segment right after
    # a fragment that has more after it (flags & FLAG_MORE: a first fragment is FIRST|MORE = 5,
    # a middle one MORE = 1) cuts that message in two; the candidates are the first such
    # fragments past `base` (the segments are about that size), computed from the records'
    # sizes, so the archive the tests read always has one.
    from seqbus.archive import Archive

    base = (64 << 10) if ORDERS >= 50_000 else 4096
    raw = Archive(mb1).raw_table().select(["flags", "body"])
    candidates, offset = [], 32
    for flags, body in zip(raw.column("flags").to_pylist(), raw.column("body").to_pylist(),
                           strict=True):
        offset += 16 + 32 + len(body)
        if flags & sess.MORE and offset >= base:
            candidates.append(offset)
            if len(candidates) == 4:
                break
    del raw
    assert candidates, "the run has no fragmented message past the first segment"
    for attempt, size in enumerate(candidates):
        small = tmp / f"small-{attempt}.archive"
        a = JournalArchiver(workdir / "journal", small, sess.schemas(), segment_bytes=size)
        a.catch_up()
        a.seal()
        if sess.crossing(small) > 0:
            break
    return {"tmp": tmp, "workdir": workdir, "summary": summary, "seen": seen,
            "archives": {"mb1": mb1, "small": small}}


@pytest.mark.parametrize("cut", ["mb1", "small"])
def test_verify_export_cat_and_replay_see_what_the_nodes_saw(run: dict[str, Any], cut: str, tmp_path: Path) -> None:
    import pyarrow.parquet as pq

    from seqbus.archive import Archive

    path = run["archives"][cut]
    seen, last = run["seen"]["seen"], int(run["seen"]["last_sequence"])
    a = Archive(path)
    rep = a.verify()
    assert rep.ok, rep.problems[:5]
    fragmented = rep.fragmented_messages
    assert fragmented > 0
    if cut == "small":
        assert sess.crossing(path) > 0  # messages whose fragments lie in two segments

    # export (Parquet without Spark)
    out = tmp_path / "export"
    p = subprocess.run([sys.executable, "-m", "seqbus.cli", "archive", "export", str(path), str(out)],
                       capture_output=True, text=True, timeout=900, check=False)
    assert p.returncode == 0, p.stderr[-3000:]
    for name, want in seen.items():
        key = {"exchange.Trade": "trade_id", "exchange.BookUpdate": "levels"}.get(name, "order_id")
        t = pq.read_table(out / name, columns=["sequence", "timestamp_ns", key])
        if name == "exchange.BookUpdate":
            keys = [sum(int(x["quantity"]) for x in levels) for levels in t.column(key).to_pylist()]
        else:
            keys = [int(k) for k in t.column(key).to_pylist()]
        rows = ({"sequence": s, "timestamp_ns": ts, "trade_id": k, "order_id": k,
                 "levels": [{"quantity": k}]}
                for s, ts, k in zip(t.column("sequence").to_pylist(), t.column("timestamp_ns").to_pylist(),
                                    keys, strict=True))
        assert digests(rows, name, last) == (want["count"], want["digest"]), (cut, "export", name)
    env = pq.read_table(out / "envelope", columns=["type", "fragments"])
    assert env.num_rows == rep.records - sum(n - 1 for n in env.column("fragments").to_pylist())
    assert "(fragment)" not in set(env.column("type").to_pylist())
    assert {t for t in env.column("type").to_pylist() if t.startswith("bus.")} >= {"bus.SessionStart"}

    # cat: the fragmented type, decoded line by line
    p = subprocess.run([sys.executable, "-m", "seqbus.cli", "archive", "cat", str(path), "--json",
                        "--type", "exchange.BookUpdate", "--type", "exchange.CancelOrder"],
                       capture_output=True, text=True, timeout=900, check=False)
    assert p.returncode == 0, p.stderr[-3000:]
    lines = [json.loads(x) for x in p.stdout.splitlines()]
    for name in ("exchange.BookUpdate", "exchange.CancelOrder"):
        rows = [{"sequence": x["sequence"], "timestamp_ns": x["timestamp_ns"], **x["fields"]}
                for x in lines if x["type"] == name]
        assert digests(rows, name, last) == (seen[name]["count"], seen[name]["digest"]), (cut, "cat", name)

    # offline replay of the market data node's own class reaches its live report
    from seqbus.archive import replay

    os.environ["EXCHANGE_REPORT_DIR"] = str(tmp_path)
    sys.path.insert(0, str(sess.ROOT))
    try:
        from examples.exchange.demo_nodes import DemoMarketData
    finally:
        sys.path.remove(str(sess.ROOT))
    replay(DemoMarketData, a, account="MD", instance=1)
    replayed = json.loads((tmp_path / "MD-1.json").read_text())
    assert replayed["seen"] == seen and replayed["last_sequence"] == last


def _spark_key(df: Any, name: str) -> Any:
    """The key DemoMarketData digests, computed by Spark (only three columns come back)."""
    from pyspark.sql import functions as F

    if name == "exchange.Trade":
        key = F.col("trade_id")
    elif name == "exchange.BookUpdate":
        key = F.aggregate("levels", F.lit(0).cast("decimal(38,0)"), lambda acc, x: acc + x["quantity"])
    else:
        key = F.col("order_id")
    seq = "envelope_sequence" if "envelope_sequence" in df.columns else "sequence"
    ts = "envelope_timestamp_ns" if "envelope_timestamp_ns" in df.columns else "timestamp_ns"
    return df.select(F.col(seq).alias("sequence"), F.col(ts).alias("timestamp_ns"),
                     key.cast("decimal(38,0)").alias("key"))


@pytest.mark.parametrize("cut", ["mb1", "small"])
def test_spark_typed_and_envelope_tables_see_what_the_nodes_saw(spark: Any, run: dict[str, Any], cut: str) -> None:
    path = str(run["archives"][cut])
    seen, last = run["seen"]["seen"], int(run["seen"]["last_sequence"])
    envelope = spark.read.format("seqbus").load(path)
    counts = {r["type"]: r["count"] for r in
              envelope.where(f"sequence <= {last}").groupBy("type").count().collect()}
    for name, want in seen.items():
        df = spark.read.format("seqbus").option("message", name).load(path)
        t = _spark_key(df, name).where(f"sequence <= {last}").orderBy("sequence").toArrow()
        d = hashlib.blake2b(digest_size=16)
        for seq, ts, key in zip(t.column("sequence").to_pylist(), t.column("timestamp_ns").to_pylist(),
                                t.column("key").to_pylist(), strict=True):
            d.update(SEEN.pack(seq, ts, int(key)))
        assert (t.num_rows, d.hexdigest()) == (want["count"], want["digest"]), (cut, name)
        assert counts[name] == want["count"], (cut, name)
    # nothing of an exchange type the node did not see; control messages named
    assert {t for t in counts if t.startswith("exchange.")} == set(seen)
    assert not [t for t in counts if not t.startswith(("exchange.", "bus."))]


def test_the_demo_summary_and_the_archive_agree_on_every_count(spark: Any, run: dict[str, Any]) -> None:
    """What the demo prints (the gateway's counts, the market data node's updates) equals what
    the archive holds."""
    from pyspark.sql import functions as F

    path = str(run["archives"]["mb1"])
    s = run["summary"]

    def count(name: str, where: Any = None) -> int:
        df = spark.read.format("seqbus").option("message", name).load(path)
        return int((df if where is None else df.where(where)).count())

    got = {
        "orders": count("exchange.NewOrder"),
        "answered": count("exchange.OrderAccepted")
        + count("exchange.OrderRejected", F.col("reason") != "UnknownOrder"),
        "accepted": count("exchange.OrderAccepted"),
        "rejected": count("exchange.OrderRejected", F.col("reason") != "UnknownOrder"),
        "cancelled": count("exchange.OrderCancelled"),
        "trades": count("exchange.Trade"),
        "market_data_updates": count("exchange.BookUpdate"),
    }
    want = {k: s[k] for k in got}
    assert got == want, {k: (got[k], want[k]) for k in got if got[k] != want[k]}


def test_the_gaps_and_retransmissions_reports_count_records_not_messages(
    spark: Any, run: dict[str, Any]
) -> None:
    """A clean run's archive (with fragmented market data) has no holes and no skipped or
    duplicated commands: the earlier fragments of a message are records with sequences and
    command sequences of their own (the reports counted messages and showed each fragment as
    a hole and a skipped command)."""
    from seqbus.spark import reports

    path = str(run["archives"]["small"])
    assert spark.read.format("seqbus").load(path).where("fragments > 1").count() > 0
    assert reports.gaps(spark, path).collect() == []
    per_account = reports.retransmissions(spark, path).collect()
    assert per_account and all(r["skipped"] == 0 and r["duplicates"] == 0
                               for r in per_account), per_account


def test_a_job_reports_what_it_skipped_and_fails(run: dict[str, Any], tmp_path: Path) -> None:
    """`python -m seqbus.spark.jobs` on an archive with a corrupt record: the report runs on
    the rest, the skipped record is named on stderr and the job exits 1 (it said nothing and
    exited 0: Spark's warnings are silenced there)."""
    import shutil

    from seqbus.archive import Archive

    path = tmp_path / "corrupt.archive"
    shutil.copytree(run["archives"]["mb1"], path)
    seg = Archive(path).segments()[0]
    off = struct.unpack_from("<Q", Path(seg.idx).read_bytes(), 16 + 8 * 10)[0]
    data = bytearray(Path(seg.seg).read_bytes())
    data[off + 20] ^= 0x55
    Path(seg.seg).write_bytes(bytes(data))
    proc = subprocess.run(
        [sys.executable, "-m", "seqbus.spark.jobs", "counts", str(path), "--rows", "5"],
        capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 1, proc.stderr[-3000:]
    assert f"corrupt archive record skipped: {path}/{Path(seg.seg).name}:{off}: sequence" \
        in proc.stderr, proc.stderr[-3000:]
    assert "messages" in proc.stdout  # the report itself
