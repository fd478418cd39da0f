"""Runnable Spark jobs over session archives: the reports and the Parquet export.

    python -m seqbus.spark.jobs counts ARCHIVE
    python -m seqbus.spark.jobs latency ARCHIVE --request exchange.NewOrder --response exchange.OrderAccepted
    python -m seqbus.spark.jobs gaps ARCHIVE
    python -m seqbus.spark.jobs retransmissions ARCHIVE
    python -m seqbus.spark.jobs audit ARCHIVE --order-id 1001
    python -m seqbus.spark.jobs export ARCHIVE --out DIR

``local[*]`` by default (``--master`` or spark-submit's ``--master`` to change it); on a
cluster the archive must be on storage every executor mounts at the same path, e.g.

    spark-submit --master spark://HOST:7077 $(python -c 'import seqbus.spark.jobs as j; print(j.__file__)') \\
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


def run(argv: Sequence[str] | None = None) -> int:
    args = parser().parse_args(argv)
    from seqbus.spark import reports, session

    if args.report == "audit" and args.order_id is None:
        print("error: audit needs --order-id", file=sys.stderr)
        return 2
    if args.report == "export" and not args.out:
        print("error: export needs --out DIR", file=sys.stderr)
        return 2
    try:
        spark = session(args.master, app=f"seqbus {args.report}")
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
