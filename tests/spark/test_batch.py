"""The Spark batch source: envelope and typed tables, pushdown, corruption, reports, export."""

from __future__ import annotations

import hashlib
import shutil
import struct
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from seqbus.archive import Archive
from tests.archive import session as sess


def per_type_hash(rows: list[dict[str, Any]]) -> str:
    return sess.row_hash(rows)


def test_envelope_counts_and_hash_per_type(spark: Any, session_archive: tuple[Path, list[sess.Msg]]) -> None:
    path, msgs = session_archive
    # options through Spark, in any case: partitions of at most 100 records
    df = spark.read.format("seqbus").option("ROWSperPARTITION", "100").load(str(path))
    assert df.rdd.getNumPartitions() == -(-len(msgs) // 100)
    rows = df.select("sequence", "type", "account", "instance", "command_seq", "timestamp_ns").collect()
    got = Counter(r["type"] for r in rows)
    assert got == Counter(m.type for m in msgs)
    for typ in got:
        a = sorted((r["sequence"], r["account"], r["instance"], r["command_seq"], r["timestamp_ns"])
                   for r in rows if r["type"] == typ)
        b = [(m.sequence, m.account, m.instance, m.command_seq, m.timestamp_ns) for m in msgs if m.type == typ]
        assert hashlib.sha256(repr(a).encode()).hexdigest() == hashlib.sha256(repr(b).encode()).hexdigest()


def test_typed_new_order_round_trips_every_field_kind(spark: Any, session_archive: tuple[Path, list[sess.Msg]]) -> None:
    path, msgs = session_archive
    df = spark.read.format("seqbus").option("message", "exchange.NewOrder").load(str(path))
    drop = ["sequence", "timestamp_ns", "envelope_account", "instance", "command_seq", "version"]
    rows = [sess.plain(r.asDict(recursive=True)) for r in df.orderBy("sequence").drop(*drop).collect()]
    want = list(sess.expected_rows(msgs, "exchange.NewOrder"))
    assert len(rows) == 200
    assert rows == want
    assert per_type_hash(rows) == per_type_hash(want)
    types = {f.name: f.dataType.simpleString() for f in df.schema.fields}
    assert types["order_id"] == "decimal(20,0)" and types["expire_at"] == "decimal(20,0)"
    assert types["legs"].startswith("array<struct<symbol:string,ratio:int,side:string,fills:array<struct<")
    assert df.schema["stop_price"].nullable and not df.schema["quantity"].nullable


def test_filters_on_sequence_and_time_are_pushed_down(spark: Any, session_archive: tuple[Path, list[sess.Msg]]) -> None:
    from pyspark.sql import functions as F

    path, msgs = session_archive
    df = spark.read.format("seqbus").option("rowsPerPartition", "50").load(str(path))
    part = df.where((F.col("sequence") >= 5) & (F.col("sequence") < 20))
    assert part.rdd.getNumPartitions() == 1  # only the records in the bounds are planned
    assert [r[0] for r in part.select("sequence").collect()] == list(range(5, 20))
    lo, hi = msgs[99].timestamp_ns, msgs[120].timestamp_ns
    t = df.where((F.col("timestamp_ns") > lo) & (F.col("timestamp_ns") <= hi))
    assert sorted(r[0] for r in t.select("sequence").collect()) == [m.sequence for m in msgs if lo < m.timestamp_ns <= hi]
    typed = spark.read.format("seqbus").option("message", "Trade").load(str(path)).where("sequence > 400")
    assert typed.count() == sum(1 for m in msgs if m.type == "exchange.Trade" and m.sequence > 400)


def test_corrupt_segment_is_reported_and_the_rest_reads(spark: Any, tmp_path: Path, session_archive: tuple[Path, list[sess.Msg]]) -> None:
    src, msgs = session_archive
    path = tmp_path / "corrupt.archive"
    shutil.copytree(src, path)
    seg = Archive(path).segments()[2]
    idx = Path(seg.idx).read_bytes()
    off = struct.unpack_from("<Q", idx, 16)[0]
    data = bytearray(Path(seg.seg).read_bytes())
    data[off + 20] ^= 0x55
    Path(seg.seg).write_bytes(bytes(data))

    df = spark.read.format("seqbus").load(str(path))
    assert df.count() == len(msgs) - 1
    probs = spark.read.format("seqbus").option("table", "problems").load(str(path)).collect()
    assert [(p["file"], p["offset"], p["sequence"]) for p in probs] == [
        (Path(seg.seg).name, off, seg.first_sequence)]
    from seqbus.spark import reports

    [gap] = reports.gaps(spark, str(path)).collect()
    assert (gap["first_missing"], gap["last_missing"]) == (seg.first_sequence, seg.first_sequence)
    with pytest.raises(Exception, match=f"{Path(seg.seg).name}:{off}: sequence {seg.first_sequence}"):
        spark.read.format("seqbus").option("mode", "FAILFAST").load(str(path)).count()


def test_reports_and_parquet_export(spark: Any, tmp_path: Path, session_archive: tuple[Path, list[sess.Msg]]) -> None:
    from seqbus.spark import reports

    path, msgs = session_archive
    counts = {(r["account"], r["instance"], r["type"]): r["messages"]
              for r in reports.message_counts(spark, str(path)).collect()}
    assert counts == Counter((m.account, m.instance, m.type) for m in msgs)
    [lat] = reports.latency(spark, str(path)).collect()
    assert lat["responder"] == "ME" and lat["pairs"] == sum(m.type == "exchange.OrderAccepted" for m in msgs)
    assert 0 < lat["p50_us"] <= lat["p99_us"] <= lat["max_us"] < 10
    trail = reports.order_audit_trail(
        spark, str(path), 1003,
        types=["exchange.NewOrder", "exchange.OrderAccepted", "exchange.Trade"]).collect()
    assert [r["type"] for r in trail] == ["exchange.NewOrder", "exchange.OrderAccepted", "exchange.Trade"]
    out = tmp_path / "pq"
    written = reports.export_parquet(spark, str(path), str(out), tables=["exchange.NewOrder"])
    assert written == ["envelope", "exchange.NewOrder"]
    import pyarrow.parquet as pq

    back = pq.read_table(out / "exchange.NewOrder")
    assert back.num_rows == 200
    assert pq.read_table(out / "envelope").num_rows == len(msgs)


def test_both_exports_write_the_same_tables(spark: Any, tmp_path: Path, session_archive: tuple[Path, list[sess.Msg]]) -> None:
    """`seqbus archive export` and the Spark export job: the same directories, the same Arrow
    and Parquet schemas (µs UTC INT64 timestamps, decimal(20,0), three-level lists), the
    same rows."""
    import subprocess
    import sys

    import pyarrow.parquet as pq

    from seqbus.spark import reports

    path, _ = session_archive
    p = subprocess.run([sys.executable, "-m", "seqbus.cli", "archive", "export", str(path),
                        str(tmp_path / "cli")], capture_output=True, text=True, timeout=120, check=False)
    assert p.returncode == 0, p.stderr
    written = reports.export_parquet(spark, str(path), str(tmp_path / "spark"))
    tables = sorted(d.name for d in (tmp_path / "cli").iterdir())
    assert sorted(written) == tables and "envelope" in tables and len(tables) == 8

    def physical(f: Path) -> list[tuple[str, str, str, int]]:
        return [(c.path, c.physical_type, str(c.logical_type), c.max_definition_level)
                for c in pq.ParquetFile(f).schema]

    for t in tables:
        [a] = (tmp_path / "cli" / t).glob("*.parquet")
        b = sorted((tmp_path / "spark" / t).glob("*.parquet"))[0]
        assert pq.read_schema(a).remove_metadata() == pq.read_schema(b).remove_metadata(), t
        assert physical(a) == physical(b), t
        if t == "envelope":
            [time_col] = [c for c in physical(b) if c[0] == "time"]
            assert time_col[1] == "INT64" and "timeUnit=microseconds" in time_col[2] and "isAdjustedToUTC=true" in time_col[2]
        ta = pq.read_table(tmp_path / "cli" / t)
        tb = pq.read_table(tmp_path / "spark" / t)
        key = "envelope_sequence" if "envelope_sequence" in ta.column_names else "sequence"
        assert ta.sort_by(key).to_pylist() == tb.sort_by(key).to_pylist(), t


def test_unknown_option_is_an_error_naming_the_known_ones(spark: Any, session_archive: tuple[Path, list[sess.Msg]]) -> None:
    path, _ = session_archive
    with pytest.raises(Exception, match="SeqbusException: unknown option 'rowsPartition' for the seqbus source; it knows: path, message, table, mode, rowsPerPartition"):
        spark.read.format("seqbus").option("rowsPartition", "10").load(str(path)).count()


def test_fragmented_messages_across_segments_and_partitions(spark: Any, tmp_path: Path) -> None:
    """Issue 18: a message whose fragments lie in two or three 4 KiB segments, read through
    partitions of 37 records that cut through fragments and segments alike, is one row of the
    envelope table and of its typed table, once."""
    frag = sess.build_fragmented(120)
    path = sess.write_records(tmp_path / "frag.archive", frag.records, 4096)
    assert sess.crossing(path, frag.records) > 10
    env = spark.read.format("seqbus").option("rowsPerPartition", "37").load(str(path))
    assert env.rdd.getNumPartitions() == -(-len(frag.records) // 37)
    rows = env.select("sequence", "type", "fragments").orderBy("sequence").collect()
    assert [(r[0], r[1], r[2]) for r in rows] == [
        (m.sequence, m.type, frag.fragments[m.sequence]) for m in frag.messages]
    books = (spark.read.format("seqbus").option("message", "BookUpdate")
             .option("rowsPerPartition", "37").load(str(path)).orderBy("sequence").collect())
    assert [sess.plain(r.asDict(recursive=True))["levels"] for r in books] == [
        r["levels"] for r in sess.expected_rows(frag.messages, "exchange.BookUpdate")]
    raw = spark.read.format("seqbus").option("table", "raw").load(str(path))
    assert raw.count() == len(frag.records)
    assert spark.read.format("seqbus").option("table", "problems").load(str(path)).count() == 0
