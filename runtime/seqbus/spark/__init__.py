"""The data pipeline on Spark (SPEC §7, docs/spark.md): session archives as DataFrames.

>>> from seqbus.spark import session
>>> spark = session()                                   # local[*], the seqbus source registered
>>> spark.read.format("seqbus").load("run.archive")    # the envelope table
>>> spark.read.format("seqbus").option("message", "exchange.NewOrder").load("run.archive")
"""

from __future__ import annotations

import os
import shutil
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["java_missing_reason", "register", "session"]


def java_missing_reason() -> str | None:
    """Why Spark cannot start here (no Java), or None."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and os.access(os.path.join(java_home, "bin", "java"), os.X_OK):
        return None
    if shutil.which("java"):
        return None
    return ("Java is missing: Spark 4 needs Java 17 or newer (install openjdk-17-jre-headless "
            "or set JAVA_HOME)")


def register(spark: SparkSession) -> SparkSession:
    """Registers the ``seqbus`` format with ``spark`` and enables Python filter pushdown."""
    from seqbus.spark.datasource import SeqbusDataSource

    spark.conf.set("spark.sql.python.filterPushdown.enabled", "true")
    spark.dataSource.register(SeqbusDataSource)
    return spark


def session(master: str | None = None, app: str = "seqbus", **conf: str) -> SparkSession:
    """A SparkSession with the seqbus source registered: ``local[*]`` unless ``master`` (or
    spark-submit) says otherwise. Python workers run this interpreter."""
    reason = java_missing_reason()
    if reason is not None:
        from seqbus.archive.errors import ArchiveError

        raise ArchiveError(reason)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    b = SparkSession.builder.appName(app)
    if master is not None:
        b = b.master(master)
    elif "spark.master" not in os.environ.get("PYSPARK_SUBMIT_ARGS", ""):
        b = b.config("spark.master", os.environ.get("SEQBUS_SPARK_MASTER", "local[*]"))
    b = b.config("spark.sql.python.filterPushdown.enabled", "true")
    b = b.config("spark.sql.session.timeZone", "UTC")
    for k, v in conf.items():
        b = b.config(k.replace("_", "."), v)
    return register(b.getOrCreate())
