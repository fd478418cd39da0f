"""The seqbus Spark source beside Spark's own Parquet reader, in one Spark session, over the
same archive (docs/benchmarks.md, "Spark"). Not a test: it prints what it measures.

    python -m benchmarks.spark [--orders N] [--runs R] [--quick] [--json]

An exchange demo run of N orders (``seqbus demo``: separate processes over UDP multicast, so
run it inside scripts/in-netns.sh, as ``make bench`` does) is archived from its journal and
exported to Parquet with ``seqbus archive export`` (snappy, one directory per table). Then, in
one local[2] session, each query runs R times over each source, alternating, and the medians
are compared (ratio = Parquet's median time / seqbus's: above 1, seqbus is faster), in wall
time and in the CPU time of the Spark JVM (which, in local mode, runs the executors too: it
moves less with the load of a shared machine; the Python source's workers are other
processes, so for that row only wall time counts):

* envelope aggregation: sum(sequence), sum(size), count(type) over every message;
* typed-table aggregation: count, sum(quantity), sum(price.mantissa) of NewOrder;
* selective filter: the Trades of one order (buy_order_id = …) from the Trade table;
* sequence range: 10,000 messages from the middle of the envelope table (seqbus plans only
  their records; Parquet skips row groups by their statistics);
* pruning: hash of two NewOrder columns vs hash of all of them, on each source;
* the Python data source API alone: a Python source whose ``read`` only maps the exported
  envelope Parquet file (pyarrow) and yields its Arrow batches, no decoding, vs Spark's own
  Parquet reader of the same file (the ceiling of any Python source; why the seqbus source is
  a JVM one).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def _demo(workdir: Path, orders: int) -> None:
    p = subprocess.run([sys.executable, "-m", "seqbus.cli", "demo", "--json", "--orders", str(orders),
                        "--workdir", str(workdir)], capture_output=True, text=True, cwd=ROOT,
                       timeout=600 + orders / 200, check=False)
    if p.returncode != 0:
        raise SystemExit(f"the demo failed:\n{p.stderr[-3000:]}")


def _archive(workdir: Path, out: Path) -> None:
    from scripts.generate import idl
    from seqbus.archive import JournalArchiver, load_ir

    a = JournalArchiver(workdir / "journal", out, load_ir([idl("bus"), idl("exchange")]))
    a.catch_up()
    a.seal()


def _jvm_cpu(pid: int) -> float:
    """CPU seconds the Spark JVM (driver and, in local mode, executors) has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks  # utime, stime


def _time(fn: Callable[[], Any], pid: int) -> tuple[float, float]:
    """(wall seconds, JVM CPU seconds) of one run."""
    c0, t0 = _jvm_cpu(pid), time.perf_counter()
    fn()
    return time.perf_counter() - t0, _jvm_cpu(pid) - c0


def _summary(ts: list[tuple[float, float]]) -> dict[str, float]:
    wall = [w for w, _ in ts]
    cpu = [c for _, c in ts]
    q = statistics.quantiles(wall, n=10)
    qc = statistics.quantiles(cpu, n=10)
    return {"median_s": statistics.median(wall), "p10_s": q[0], "p90_s": q[-1],
            "cpu_median_s": statistics.median(cpu), "cpu_p10_s": qc[0], "cpu_p90_s": qc[-1],
            "runs": len(ts)}


def run(orders: int, runs: int) -> dict[str, Any]:
    sys.path.insert(0, str(ROOT))
    import pyarrow.parquet as pq
    from pyspark.sql import functions as F
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition

    from seqbus.archive import Archive
    from seqbus.spark import session

    tmp = Path(tempfile.mkdtemp(prefix="seqbus-bench-spark-"))
    try:
        t0 = time.perf_counter()
        _demo(tmp / "run", orders)
        archive = tmp / "run.archive"
        _archive(tmp / "run", archive)
        pqdir = tmp / "parquet"
        subprocess.run([sys.executable, "-m", "seqbus.cli", "archive", "export", str(archive), str(pqdir)],
                       check=True, capture_output=True, cwd=ROOT, timeout=1800)
        a = Archive(archive)
        records = sum(s.count for s in a.segments())
        setup_s = time.perf_counter() - t0

        spark = session("local[2]", app="seqbus spark benchmark", spark_ui_enabled="false",
                        spark_sql_shuffle_partitions="2", spark_driver_memory="2g",
                        spark_ui_showConsoleProgress="false")
        spark.sparkContext.setLogLevel("ERROR")
        jvm = spark.sparkContext._jvm
        assert jvm is not None
        pid = int(jvm.java.lang.ProcessHandle.current().pid())
        path = str(archive)

        def seqbus(message: str | None = None) -> Any:
            r = spark.read.format("seqbus")
            return (r.option("message", message) if message else r).load(path)

        def parquet(table: str) -> Any:
            return spark.read.parquet(str(pqdir / table))

        env_rows = pq.ParquetFile(next((pqdir / "envelope").glob("*.parquet"))).metadata.num_rows
        trade = parquet("exchange.Trade").select("buy_order_id").limit(1).collect()[0][0]
        mid = records // 2
        all_cols = [c for c in parquet("exchange.NewOrder").columns]

        queries: dict[str, tuple[Callable[[], Any], Callable[[], Any]]] = {
            "envelope aggregation": (
                lambda: seqbus().agg(F.sum("sequence"), F.sum("size"), F.count("type")).collect(),
                lambda: parquet("envelope").agg(F.sum("sequence"), F.sum("size"), F.count("type")).collect(),
            ),
            "typed aggregation (NewOrder)": (
                lambda: seqbus("exchange.NewOrder").agg(
                    F.count("*"), F.sum("quantity"), F.sum("price.mantissa")).collect(),
                lambda: parquet("exchange.NewOrder").agg(
                    F.count("*"), F.sum("quantity"), F.sum("price.mantissa")).collect(),
            ),
            "selective filter (Trades of one order)": (
                lambda: seqbus("exchange.Trade").where(F.col("buy_order_id") == trade).count(),
                lambda: parquet("exchange.Trade").where(F.col("buy_order_id") == trade).count(),
            ),
            "sequence range (10,000 messages)": (
                lambda: seqbus().where(F.col("sequence").between(mid, mid + 9_999)).agg(F.sum("size")).collect(),
                lambda: parquet("envelope").where(F.col("sequence").between(mid, mid + 9_999)).agg(
                    F.sum("size")).collect(),
            ),
            "pruning: NewOrder, hash of 2 columns": (
                lambda: seqbus("exchange.NewOrder").agg(F.sum(F.hash("quantity", "client_id"))).collect(),
                lambda: parquet("exchange.NewOrder").agg(F.sum(F.hash("quantity", "client_id"))).collect(),
            ),
            "pruning: NewOrder, hash of every column": (
                lambda: seqbus("exchange.NewOrder").agg(F.sum(F.hash(*all_cols))).collect(),
                lambda: parquet("exchange.NewOrder").agg(F.sum(F.hash(*all_cols))).collect(),
            ),
        }
        # both sources must answer alike before they are timed
        for name, (s, p) in queries.items():
            if s() != p():
                raise SystemExit(f"{name}: seqbus and Parquet disagree: {s()} vs {p()}")

        # the Python data source API alone: Arrow batches handed over, nothing decoded
        [env_file] = (pqdir / "envelope").glob("*.parquet")
        schema = spark.read.parquet(str(env_file)).schema

        class ArrowOnly(DataSource):
            @classmethod
            def name(cls) -> str:
                return "bench_arrow_only"

            def schema(self) -> Any:
                return schema

            def reader(self, schema: Any) -> DataSourceReader:
                return ArrowOnlyReader()

        class ArrowOnlyReader(DataSourceReader):
            def partitions(self) -> list[InputPartition]:
                return [InputPartition(i) for i in range(2)]

            def read(self, partition: InputPartition) -> Any:
                import pyarrow.parquet as ppq

                f = ppq.ParquetFile(str(env_file), memory_map=True)
                groups = range(partition.value, f.num_row_groups, 2)
                yield from f.iter_batches(batch_size=1 << 16, row_groups=list(groups))

        spark.dataSource.register(ArrowOnly)
        queries["Python data source API alone (Arrow batches, no decoding), envelope aggregation"] = (
            lambda: spark.read.format("bench_arrow_only").load().agg(
                F.sum("sequence"), F.sum("size"), F.count("type")).collect(),
            queries["envelope aggregation"][1],
        )

        results: dict[str, Any] = {}
        for name, (s, p) in queries.items():
            print(f"timing: {name}", file=sys.stderr, flush=True)
            s()  # warm-up
            p()
            ts_s: list[tuple[float, float]] = []
            ts_p: list[tuple[float, float]] = []
            for _ in range(runs):  # alternate, so that load changes hit both alike
                ts_s.append(_time(s, pid))
                ts_p.append(_time(p, pid))
            rs, rp = _summary(ts_s), _summary(ts_p)
            results[name] = {"seqbus": rs, "parquet": rp,
                             "ratio": rp["median_s"] / rs["median_s"],
                             "cpu_ratio": rp["cpu_median_s"] / max(rs["cpu_median_s"], 1e-3)}
        spark.stop()
        return {"orders": orders, "records": records, "envelope_rows": env_rows,
                "segments": len(a.segments()), "setup_s": round(setup_s, 1), "queries": results}
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--orders", type=int, default=400_000)
    p.add_argument("--runs", type=int, default=11)
    p.add_argument("--quick", action="store_true", help="100,000 orders, 3 runs")
    p.add_argument("--json", action="store_true")
    args = p.parse_args(argv)
    if args.quick:
        args.orders, args.runs = 100_000, 3
    res = run(args.orders, args.runs)
    if args.json:
        print(json.dumps(res))
        return 0
    print(f"exchange demo of {res['orders']:,} orders: {res['records']:,} records "
          f"({res['envelope_rows']:,} messages) in {res['segments']} segments; setup {res['setup_s']} s; "
          f"local[2], medians of {args.runs} alternating runs")
    print(f"  {'query':44s} {'wall: seqbus':>13s} {'Parquet':>8s} {'ratio':>6s}   "
          f"{'JVM CPU: seqbus':>15s} {'Parquet':>8s} {'ratio':>6s}")
    for name, r in res["queries"].items():
        s, q = r["seqbus"], r["parquet"]
        print(f"  {name[:44]:44s} {s['median_s']:12.3f}s {q['median_s']:7.3f}s {r['ratio']:5.2f}x   "
              f"{s['cpu_median_s']:14.3f}s {q['cpu_median_s']:7.3f}s {r['cpu_ratio']:5.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
