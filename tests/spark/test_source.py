"""Issue 18: the JVM source reads only the columns a query uses, with the types the Arrow
tables have, takes its options through Spark in any case, and brings the records a PERMISSIVE
read skipped to the driver."""

from __future__ import annotations

import shutil
import struct
from pathlib import Path
from typing import Any

import pytest

from seqbus.archive import Archive
from tests.archive import session as sess


def _scan(df: Any) -> str:
    """The description of the query's seqbus scan (columns read, bounds)."""
    plan = df._jdf.queryExecution().executedPlan().toString()
    return next(line for line in plan.splitlines() if "seqbus" in line)


def test_schemas_equal_the_arrow_tables(spark: Any, session_archive: tuple[Path, list[sess.Msg]]) -> None:
    """One mapping from the IR, whichever reader: the Spark schema of every table equals the
    Arrow schema `seqbus.archive` gives the same table."""
    from pyspark.sql.pandas.types import from_arrow_schema

    from seqbus.archive import tables

    path, _ = session_archive
    a = Archive(path)

    def plain(schema: Any) -> Any:
        return schema.jsonValue()

    read = spark.read.format("seqbus")
    assert plain(read.load(str(path)).schema) == plain(from_arrow_schema(tables.ENVELOPE_SCHEMA))
    assert plain(read.option("table", "raw").load(str(path)).schema) == plain(from_arrow_schema(tables.RAW_SCHEMA))
    for name in sorted(a.type_names().values()):
        got = spark.read.format("seqbus").option("message", name).load(str(path)).schema
        assert plain(got) == plain(from_arrow_schema(a.typed_schema(name))), name


def test_only_the_columns_a_query_uses_are_read(spark: Any, session_archive: tuple[Path, list[sess.Msg]]) -> None:
    from pyspark.sql import functions as F

    path, msgs = session_archive
    env = spark.read.format("seqbus").load(str(path))
    two = env.where(F.col("type") == "exchange.Trade").select("sequence", "type")
    assert "seqbus envelope [sequence, type]" in _scan(two)
    assert [r[0] for r in two.collect()] == [m.sequence for m in msgs if m.type == "exchange.Trade"]
    orders = spark.read.format("seqbus").option("message", "NewOrder").load(str(path))
    assert "seqbus NewOrder [] " in _scan(orders.groupBy().count())  # a count decodes no column
    assert orders.count() == sum(m.type == "exchange.NewOrder" for m in msgs)
    assert "seqbus NewOrder [legs] " in _scan(orders.select("legs"))
    legs = orders.select("legs").collect()
    assert sum(len(r[0]) for r in legs) == sum(i % 4 for i in range(200))


def test_stream_options_take_effect_in_any_case(spark: Any, tmp_path: Path) -> None:
    """startSequence and maxRecordsPerTrigger, spelt in other cases, through readStream."""
    frag = sess.build_fragmented(60)
    path = sess.write_records(tmp_path / "frag.archive", frag.records, 4096)
    q = (spark.readStream.format("seqbus").option("STARTSEQUENCE", "100")
         .option("maxrecordspertrigger", "50").load(str(path))
         .writeStream.format("memory").queryName("capped").start())
    try:
        q.processAllAvailable()
        batches = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
        got = [r[0] for r in spark.sql("select sequence from capped order by sequence").collect()]
    finally:
        q.stop()
    assert got == [m.sequence for m in frag.messages if m.sequence >= 100]
    assert len(batches) >= (len(frag.records) - 99) // 50 and max(batches) <= 50


def test_a_batch_read_refuses_the_stream_options(
    spark: Any, session_archive: tuple[Path, list[sess.Msg]]
) -> None:
    """Options are never ignored: a batch read given startSequence (it read everything)."""
    path, _ = session_archive
    for option in ("startSequence", "maxRecordsPerTrigger"):
        with pytest.raises(Exception, match="are options of a stream"):
            spark.read.format("seqbus").option(option, "100").load(str(path)).count()


def test_permissive_reads_tell_the_driver_what_they_skipped(
    spark: Any, tmp_path: Path, session_archive: tuple[Path, list[sess.Msg]]
) -> None:
    from seqbus.spark import skipped

    src, msgs = session_archive
    path = tmp_path / "corrupt.archive"
    shutil.copytree(src, path)
    seg = Archive(path).segments()[1]
    off = struct.unpack_from("<Q", Path(seg.idx).read_bytes(), 16 + 16 * 5)[0]
    data = bytearray(Path(seg.seg).read_bytes())
    data[off + 30] ^= 0x11
    Path(seg.seg).write_bytes(bytes(data))
    before = len(skipped(spark))
    assert spark.read.format("seqbus").load(str(path)).count() == len(msgs) - 1
    new = skipped(spark)[before:]
    assert new == [f"{path}/{Path(seg.seg).name}:{off}: sequence {seg.first_sequence + 5}: "
                   "checksum (crc32c) mismatch"]
    with pytest.raises(Exception, match=f"FAILFAST.*{Path(seg.seg).name}:{off}"):
        spark.read.format("seqbus").option("mode", "failfast").load(str(path)).count()
