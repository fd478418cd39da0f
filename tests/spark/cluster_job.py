"""The job tests/spark/test_cluster.py submits: the message counts report over an archive,
and a Python UDF that imports seqbus on the executors; written as JSON to argv[2]."""

from __future__ import annotations

import json
import sys


def main(archive: str, out: str) -> None:
    from pyspark.sql import functions as F

    from seqbus.spark import reports, session

    spark = session(app="seqbus cluster test")
    counts = sorted([r["account"], r["instance"], r["type"], r["messages"], r["bytes"]]
                    for r in reports.message_counts(spark, archive).collect())

    @F.udf("string")
    def where(i: int) -> str:
        import json as j
        import os

        import seqbus._core as core

        return f"{j.loads(core.archive_bus_ir())['package']} in {os.path.dirname(core.__file__)}"

    udf = [r[0] for r in spark.range(2).select(where("id")).collect()]
    result = {"master": spark.sparkContext.master, "app": spark.sparkContext.applicationId,
              "counts": counts, "udf": udf}
    with open(out, "w") as f:
        json.dump(result, f)
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
