"""The streaming query tests/spark/test_remote.py runs (and kills) in its own process: the
typed Ping table of a live bus, read over SoupBinTCP, written to Parquet with a checkpoint,
until ``total`` Pings are in the output. Usage: remote_stream_job.py CONFIG.json"""

from __future__ import annotations

import json
import sys
import time


def committed(spark: object, out: str) -> int:
    from pyspark.errors import AnalysisException

    try:
        return int(spark.read.parquet(out).count())  # type: ignore[attr-defined]
    except AnalysisException:  # nothing committed yet
        return 0


def main(config: str) -> int:
    c = json.loads(open(config).read())
    from seqbus.spark import session

    spark = session("local[2]", app="seqbus remote stream", spark_ui_enabled="false",
                    spark_sql_shuffle_partitions="2")
    q = (spark.readStream.format("seqbus").option("soupbin", c["server"])
         .option("username", c["username"]).option("password", c["password"])
         .option("schemas", ",".join(c["schemas"])).option("message", "pingpong.Ping")
         .option("maxRecordsPerTrigger", str(c["max_records"])).load()
         .select("sequence", "timestamp_ns", "id", "sent_at_ns")
         .writeStream.format("parquet").option("path", c["out"])
         .option("checkpointLocation", c["checkpoint"])
         .trigger(processingTime="200 milliseconds").start())
    deadline = time.monotonic() + c["timeout"]
    while time.monotonic() < deadline:
        if q.exception() is not None:
            print(f"query failed: {q.exception()}", file=sys.stderr)
            return 1
        if q.lastProgress and q.lastProgress["numInputRows"]:
            print(f"batch {q.lastProgress['batchId']}", flush=True)
        # what the file sink has committed (its metadata log), not files being written
        if committed(spark, c["out"]) >= c["total"]:
            q.stop()
            spark.stop()
            return 0
        time.sleep(1.0)
    print(f"timed out with {committed(spark, c['out'])} of {c['total']} rows committed",
          file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
