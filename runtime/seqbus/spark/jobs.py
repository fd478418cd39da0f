"""Runnable Spark jobs over session archives: the reports and the Parquet export.

    python -m seqbus.spark.jobs counts ARCHIVE
    python -m seqbus.spark.jobs latency ARCHIVE --request exchange.NewOrder --response exchange.OrderAccepted
    python -m seqbus.spark.jobs gaps ARCHIVE
    python -m seqbus.spark.jobs retransmissions ARCHIVE
    python -m seqbus.spark.jobs audit ARCHIVE --order-id 1001
    python -m seqbus.spark.jobs export ARCHIVE --out DIR

``local[*]`` by default (``--master`` or spark-submit's ``--master`` to change it). The jobs
find the seqbus source, seqbus-spark.jar (shipped inside the ``seqbus`` wheel), by themselves
and put it on the driver's and the executors' classpath, run as they are or under
spark-submit. On a cluster the archive must be on storage every executor mounts at the same
path, e.g.

    python -m seqbus.spark.jobs counts /shared/archives/2026-11-22 --master spark://HOST:7077

or, with spark-submit (no ``--jars`` needed for the jobs; code of your own that reads the
``seqbus`` format under spark-submit needs ``--jars "$(python -m seqbus.spark.jar)"``):

    spark-submit --master spark://HOST:7077 \\
        "$(python -c 'import seqbus.spark.jobs as j; print(j.__file__)')" \\
        counts /shared/archives/2026-11-22
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import Any

from seqbus.archive.errors import ArchiveError

REPORTS = ("counts", "latency", "gaps", "retransmissions", "audit", "export")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m seqbus.spark.jobs", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("report", choices=REPORTS)
    p.add_argument("archive", help="archive directory (shared storage on a cluster)")
    p.add_argument("--master", help="Spark master (default: local[*], or spark-submit's)")
    p.add_argument("--out", help="write the result here (Parquet) instead of printing it")
    p.add_argument("--rows", type=int, default=50, help="rows to print (default 50)")
    p.add_argument("--request", default="exchange.NewOrder")
    p.add_argument("--response", default="exchange.OrderAccepted")
    p.add_argument("--key", default="order_id")
    p.add_argument("--order-id", type=int)
    return p


def _report_skipped(spark: Any) -> int:
    """The records the job's reads skipped (PERMISSIVE), on stderr; 1 if there were any, as
    ``seqbus archive export`` exits (Spark's own warnings are silenced above)."""
    from seqbus.spark import skipped

    problems = skipped(spark)
    for line in problems:
        print(f"corrupt archive record skipped: {line}", file=sys.stderr)
    return 1 if problems else 0


def add_jar_to_driver(spark: Any) -> bool:
    """Puts seqbus-spark.jar on a running driver's class loader and ships it to the executors
    (``SparkContext.addJar``), as ``spark-submit --jars`` would have: under spark-submit the
    driver's JVM is started before Python runs, so the ``spark.jars`` that
    :func:`seqbus.spark.session` sets comes too late for the driver itself. Needs the class
    loader spark-submit installs (``MutableURLClassLoader``, whose ``addURL`` is public); False
    when the loader is another."""
    from seqbus.spark import jar

    jvm = spark.sparkContext._jvm
    loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
    if loader is None or loader.getClass().getName() != "org.apache.spark.util.MutableURLClassLoader":
        return False
    path = jar()
    loader.addURL(jvm.java.io.File(path).toURI().toURL())
    spark.sparkContext._jsc.addJar(path)
    return True


def job_session(master: str | None, app: str) -> Any:
    """:func:`seqbus.spark.session`, and where the running driver (spark-submit's) lacks the
    seqbus source, the jar added to it (:func:`add_jar_to_driver`)."""
    from seqbus.spark import register, session

    try:
        return session(master, app=app)
    except ArchiveError as missing:
        from pyspark.sql import SparkSession

        active = SparkSession.getActiveSession()
        if active is None or not add_jar_to_driver(active):
            raise
        try:
            return register(active)
        except ArchiveError:
            raise missing from None


def run(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    from seqbus.spark import reports

    if args.report == "audit" and args.order_id is None:
        print("error: audit needs --order-id", file=sys.stderr)
        return 2
    if args.report == "export" and not args.out:
        print("error: export needs --out DIR", file=sys.stderr)
        return 2
    try:
        spark = job_session(args.master, f"seqbus {args.report}")
        spark.sparkContext.setLogLevel("ERROR")
        if args.report == "export":
            tables = reports.export_parquet(spark, args.archive, args.out)
            print(f"wrote {len(tables)} tables to {args.out}: {', '.join(tables)}")
            return _report_skipped(spark)
        df = {
            "counts": lambda: reports.message_counts(spark, args.archive),
            "latency": lambda: reports.latency(spark, args.archive, args.request, args.response, args.key),
            "gaps": lambda: reports.gaps(spark, args.archive),
            "retransmissions": lambda: reports.retransmissions(spark, args.archive),
            "audit": lambda: reports.order_audit_trail(spark, args.archive, args.order_id),
        }[args.report]()
        if args.out:
            df.write.mode("error").parquet(args.out)
            print(f"wrote {args.report} to {args.out}")
        else:
            df.show(args.rows, truncate=False)
        return _report_skipped(spark)
    except ArchiveError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(run())
