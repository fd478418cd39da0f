"""Ready-made reports over a session archive (docs/spark.md). Each takes a SparkSession with the
seqbus source registered (:func:`seqbus.spark.session`) and an archive path, and returns a
DataFrame; ``python -m seqbus.spark.jobs`` runs them from the command line or spark-submit."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from seqbus.archive import Archive

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: Fields that name an order in the exchange schema (and any schema that follows its naming).
ORDER_FIELDS = ("order_id", "buy_order_id", "sell_order_id")


def envelope(spark: SparkSession, path: str) -> DataFrame:
    return spark.read.format("seqbus").load(path)


def raw(spark: SparkSession, path: str) -> DataFrame:
    """One row per record as stored: every fragment of a fragmented message its own row."""
    return spark.read.format("seqbus").option("table", "raw").load(path)


def typed(spark: SparkSession, path: str, message: str) -> DataFrame:
    return spark.read.format("seqbus").option("message", message).load(path)


def message_counts(spark: SparkSession, path: str) -> DataFrame:
    """Messages and bytes per sender (account, instance) and type, with first and last time."""
    from pyspark.sql import functions as F

    return (
        envelope(spark, path)
        .groupBy("account", "instance", "type")
        .agg(
            F.count("*").alias("messages"),
            F.sum("size").alias("bytes"),
            F.min("time").alias("first_time"),
            F.max("time").alias("last_time"),
        )
        .orderBy("account", "instance", "type")
    )


def latency(
    spark: SparkSession,
    path: str,
    request: str = "exchange.NewOrder",
    response: str = "exchange.OrderAccepted",
    key: str = "order_id",
) -> DataFrame:
    """Sequencing latency from a command to the response it causes, both in sequencer time:
    for every ``request`` the first later ``response`` with the same ``key``; percentiles in
    microseconds (exact, over all pairs), per responding account."""
    from pyspark.sql import functions as F

    req = typed(spark, path, request)
    rsp = typed(spark, path, response)
    rs, rt = _seq_ts(req)
    ps, pt = _seq_ts(rsp)
    acct = "envelope_account" if "envelope_account" in rsp.columns else "account"
    a = req.select(F.col(key).alias("k"), F.col(rs).alias("req_seq"), F.col(rt).alias("req_ns"))
    b = rsp.select(F.col(key).alias("k"), F.col(ps).alias("rsp_seq"), F.col(pt).alias("rsp_ns"),
                   F.col(acct).alias("responder"))
    pairs = (
        a.join(b, "k")
        .where(F.col("rsp_seq") > F.col("req_seq"))
        .groupBy("k", "req_seq", "req_ns")
        .agg(F.min_by(F.struct("rsp_ns", "responder"), "rsp_seq").alias("r"))
        .select(((F.col("r.rsp_ns") - F.col("req_ns")) / 1000.0).alias("us"),
                F.col("r.responder").alias("responder"))
    )
    qs = [0.5, 0.9, 0.99, 0.999]
    return pairs.groupBy("responder").agg(
        F.count("*").alias("pairs"),
        *[F.percentile("us", q).alias(f"p{str(q * 100).rstrip('0').rstrip('.')}_us") for q in qs],
        F.max("us").alias("max_us"),
    ).orderBy("responder")


def _seq_ts(df: DataFrame) -> tuple[str, str]:
    s = "sequence" if "envelope_sequence" not in df.columns else "envelope_sequence"
    t = "timestamp_ns" if "envelope_timestamp_ns" not in df.columns else "envelope_timestamp_ns"
    return s, t


def gaps(spark: SparkSession, path: str) -> DataFrame:
    """Holes in the sequence (missing or unreadable records): first and last missing sequence.
    Records, not messages: the earlier fragments of a message hold sequences of their own."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    w = Window.orderBy("sequence")
    return (
        raw(spark, path)
        .select("sequence")
        .withColumn("previous", F.lag("sequence").over(w))
        .where(F.col("sequence") - F.col("previous") > 1)
        .select((F.col("previous") + 1).alias("first_missing"),
                (F.col("sequence") - 1).alias("last_missing"),
                (F.col("sequence") - F.col("previous") - 1).alias("missing"))
        .orderBy("first_missing")
    )


def retransmissions(spark: SparkSession, path: str) -> DataFrame:
    """Per sender account: commands sequenced, command sequences skipped (sent but never
    sequenced, e.g. given up) and sequenced more than once (a retransmission or a hot-hot copy
    that got through de-duplication: should be 0), and how many instances sent. Counted over
    records: each fragment of a message is a command of its own."""
    from pyspark.sql import functions as F

    cmds = raw(spark, path).where((F.col("kind") == "application") & (F.col("command_seq") > 0))
    per_cmd = cmds.groupBy("account", "command_seq").agg(
        F.count("*").alias("copies"), F.countDistinct("instance").alias("instances"))
    return (
        per_cmd.groupBy("account")
        .agg(
            F.count("*").alias("commands"),
            F.min("command_seq").alias("first_command_seq"),
            F.max("command_seq").alias("last_command_seq"),
            F.sum(F.when(F.col("copies") > 1, F.col("copies") - 1).otherwise(0)).alias("duplicates"),
        )
        .withColumn("skipped", F.col("last_command_seq") - F.col("first_command_seq") + 1 - F.col("commands"))
        .join(cmds.groupBy("account").agg(F.countDistinct("instance").alias("instances")), "account")
        .orderBy("account")
    )


def order_audit_trail(
    spark: SparkSession, path: str, order_id: int, types: Sequence[str] | None = None
) -> DataFrame:
    """Every message that names ``order_id`` (in any field of ORDER_FIELDS), in sequence order:
    sequence, time, sender, type and the message's fields as JSON. ``types`` limits the message
    types searched (default: every type with such a field)."""
    from pyspark.sql import functions as F

    a = Archive(path)
    parts = []
    for (sid, _tid), name in sorted(a.type_names().items()):
        if types is not None and name not in types:
            continue
        ir = a.ir[sid]
        msg = next(m for m in ir["messages"] if f"{ir['package']}.{m['name']}" == name)
        fields = [f["name"] for f in msg["body"]["fields"] if f["name"] in ORDER_FIELDS]
        if not fields:
            continue
        df = typed(spark, path, name)
        s, t = _seq_ts(df)
        acct = "envelope_account" if "envelope_account" in df.columns else "account"
        inst = "envelope_instance" if "envelope_instance" in df.columns else "instance"
        body = [c for c in df.columns if c not in (s, t, acct, inst, "command_seq", "version",
                                                   "envelope_command_seq", "envelope_version")]
        cond = None
        for f in fields:
            c = F.col(f) == F.lit(order_id).cast("decimal(20,0)")
            cond = c if cond is None else cond | c
        assert cond is not None
        parts.append(df.where(cond).select(
            F.col(s).alias("sequence"),
            F.timestamp_micros((F.col(t) / 1000).cast("long")).alias("time"),
            F.col(acct).alias("account"), F.col(inst).alias("instance"),
            F.lit(name).alias("type"),
            F.to_json(F.struct(*body)).alias("fields"),
        ))
    if not parts:
        return spark.createDataFrame([], "sequence long, time timestamp, account string, instance int, type string, fields string")
    out = parts[0]
    for p in parts[1:]:
        out = out.unionByName(p)
    return out.orderBy("sequence")


def export_parquet(
    spark: SparkSession,
    path: str,
    out: str,
    mode: str = "error",
    tables: Sequence[str] | None = None,
) -> list[str]:
    """Writes the envelope table and every typed table with rows (or those of ``tables``) to
    ``out/<table>/`` as Parquet, the layout and schemas of ``seqbus archive export``
    (timestamps as µs UTC, INT64; snappy); returns the tables written."""
    spark.conf.set("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
    spark.conf.set("spark.sql.parquet.compression.codec", "snappy")
    env = envelope(spark, path)
    env.write.mode(mode).parquet(f"{out}/envelope")
    written = ["envelope"]
    present = {r["type"] for r in env.select("type").distinct().collect()}
    for name in sorted(Archive(path).type_names().values()):
        if name in present and (tables is None or name in tables):
            typed(spark, path, name).write.mode(mode).parquet(f"{out}/{name}")
            written.append(name)
    return written
