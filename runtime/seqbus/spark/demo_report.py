"""The demo's final step: archive the demo's journal and run one Spark report over it.

``seqbus demo`` calls :func:`archive_and_report` with its journal before removing its working
directory; it returns the lines to print (or why the report could not run).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from seqbus.archive.errors import ArchiveError

#: What a report needs: the packages the session carries, and (request type, response type,
#: key field) whose sequencing latency it shows.
ReportSpec = tuple[tuple[str, ...], tuple[str, str, str]]


def _ir(package: str) -> tuple[int, str, str]:
    """(schema id, package, IR JSON) of ``package``, the bus's or an example's, from the IR seqc
    wrote beside its generated code: the bus's in ``seqbus/bus/``, an example's in its
    ``messages/`` package (``examples/<package>/`` in the checkout, ``seqbus/examples/<package>/``
    in an installed wheel). Nothing here needs seqc."""
    from seqbus.archive.writer import IR_FILE, parse_ir

    seqbus = Path(__file__).resolve().parents[1]
    candidates = [seqbus / package / IR_FILE,
                  seqbus.parents[1] / "examples" / package / "messages" / IR_FILE,
                  seqbus / "examples" / package / "messages" / IR_FILE]
    found = next((c for c in candidates if c.is_file()), None)
    if found is None:
        raise OSError(f"no IR of {package} at {', '.join(map(str, candidates))}")
    return parse_ir(found.read_text(), str(found))


def archive_and_report(journal_dir: Path, archive_dir: Path, spec: ReportSpec) -> list[str]:
    import importlib.util

    from seqbus.spark import java_missing_reason

    missing = [m for m in ("pyspark", "pyarrow") if importlib.util.find_spec(m) is None]
    if missing:
        return [f"Spark report skipped: {' and '.join(missing)} not installed (the report "
                "needs the spark extra: pip install 'seqbus[spark]', and Java 17)"]
    reason = java_missing_reason()
    if reason is not None:
        return [f"Spark report skipped: {reason}"]
    try:
        schemas = [_ir(p) for p in spec[0]]
    except (OSError, ArchiveError) as exc:
        return [f"Spark report skipped: cannot read the schema IR ({exc})"]

    from seqbus.archive import Archive, JournalArchiver
    from seqbus.spark import reports, session

    t0 = time.perf_counter()
    a = JournalArchiver(journal_dir, archive_dir, schemas)
    n = a.catch_up()
    a.seal()
    rep = Archive(archive_dir).verify()
    quiet = Path(__file__).with_name("log4j2-quiet.properties")
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # the demo runs on loopback only
    spark = session(app="seqbus demo report", spark_ui_enabled="false",
                    spark_driver_extraJavaOptions=f"-Dlog4j2.configurationFile={quiet}",
                    spark_ui_showConsoleProgress="false", spark_sql_shuffle_partitions="2")
    spark.sparkContext.setLogLevel("ERROR")
    try:
        counts = reports.message_counts(spark, str(archive_dir)).collect()
        request, response, key = spec[1]
        lat = reports.latency(spark, str(archive_dir), request, response, key).collect()
    finally:
        spark.stop()
    out = [f"session archive {n} records, verify {'OK' if rep.ok else f'{len(rep.problems)} problems'}"
           f" (Spark report over it in {time.perf_counter() - t0:.1f} s):"]
    out.append(f"  {'account':10} {'inst':>4} {'type':24} {'messages':>9} {'bytes':>10}")
    for r in counts:
        out.append(f"  {r['account']:10} {r['instance']:>4} {r['type']:24} {r['messages']:>9} {r['bytes']:>10}")
    names = " → ".join(t.split(".")[-1] for t in (request, response))
    for r in lat:
        out.append(f"  {names} in sequencer time ({r['pairs']} pairs, responder {r['responder']}): "
                   f"p50 {r['p50_us']:.1f} µs  p99 {r['p99_us']:.1f} µs  max {r['max_us']:.1f} µs")
    return out
