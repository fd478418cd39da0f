"""The data pipeline on Spark (SPEC §7, docs/spark.md): session archives as DataFrames.

>>> from seqbus.spark import session
>>> spark = session()                                   # spark-submit's master, or local[*]
>>> spark.read.format("seqbus").load("run.archive")    # the envelope table
>>> spark.read.format("seqbus").option("message", "exchange.NewOrder").load("run.archive")
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["jar", "java_missing_reason", "register", "session", "skipped"]

log = logging.getLogger("seqbus.spark")


def java_missing_reason() -> str | None:
    """Why Spark cannot start here (no Java), or None."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and os.access(os.path.join(java_home, "bin", "java"), os.X_OK):
        return None
    if shutil.which("java"):
        return None
    return ("Java is missing: Spark 4 needs Java 17 or newer (install openjdk-17-jre-headless "
            "or set JAVA_HOME)")


#: The JVM half of the ``seqbus`` format (rust/crates/spark, built by ``make setup``).
JAR = Path(__file__).with_name("jars") / "seqbus-spark.jar"
SOURCE_CLASS = "seqbus.spark.SeqbusSource"


def jar() -> str:
    """The path of ``seqbus-spark.jar``: the ``seqbus`` Spark source, its native decoder
    inside (``spark-submit --jars "$(python -m seqbus.spark.jar)"``)."""
    if not JAR.exists():
        from seqbus.archive.errors import ArchiveError

        raise ArchiveError(f"{JAR} is missing: build it with `make setup` (it needs a JDK 17)")
    return str(JAR)


def _loadable(spark: SparkSession) -> bool:
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    try:
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        jvm.java.lang.Class.forName(SOURCE_CLASS, False, loader)
        return True
    except Exception:  # py4j raises its own error type for a Java ClassNotFoundException
        return False


def register(spark: SparkSession) -> SparkSession:
    """Checks that the ``seqbus`` format is on ``spark``'s classpath: a session started by
    :func:`session`, or with ``spark.jars`` (``spark-submit --jars``) naming :func:`jar`, has it.
    A jar added to a running session (``ADD JAR``) is not enough: its task results carry
    classes of the jar that the driver's own class loader must know."""
    if not _loadable(spark):
        from seqbus.archive.errors import ArchiveError

        raise ArchiveError(
            f"the seqbus source is not on this Spark session's classpath: start Spark with "
            f"spark.jars={jar()} (spark-submit --jars) or through seqbus.spark.session()")
    return spark


def skipped(spark: SparkSession) -> list[str]:
    """Records that PERMISSIVE reads skipped in this Spark application, oldest first, each as
    ``ARCHIVE/file:offset: sequence N: what was wrong`` (they are also logged on the driver
    as warnings, logger ``seqbus.spark``)."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    return [str(x) for x in jvm.seqbus.spark.Problems.recent()]


def session(master: str | None = None, app: str = "seqbus", **conf: str) -> SparkSession:
    """A SparkSession with the seqbus source registered, on the master the user chose.

    The master is, in order: an existing SparkContext's (it cannot change); ``master``, when
    given; else whatever Spark's own configuration names — ``spark-submit --master``,
    ``spark.master`` in ``spark-defaults.conf``, the ``MASTER`` variable — with ``local[*]``
    only when nothing does. A ``spark://`` master that does not answer fails here, naming it.
    The master in use is logged (logger ``seqbus.spark``). ``conf``: further Spark settings,
    ``spark_ui_enabled="false"`` for ``spark.ui.enabled``. Python workers run this
    interpreter unless ``spark.pyspark.python`` (or PYSPARK_PYTHON) says otherwise."""
    reason = java_missing_reason()
    if reason is not None:
        from seqbus.archive.errors import ArchiveError

        raise ArchiveError(reason)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    settings = {k.replace("_", "."): v for k, v in conf.items()}
    jars = [j for j in settings.get("spark.jars", "").split(",") if j]
    settings["spark.jars"] = ",".join([*jars, jar()])
    chosen, source = _master(master, settings)
    b = SparkSession.builder.appName(app)
    if chosen is not None:
        b = b.master(chosen)
    b = b.config("spark.sql.session.timeZone", "UTC")
    # Spark's own timestamps in Parquet are INT96 unless told: the export's are µs (INT64)
    b = b.config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
    for k, v in settings.items():
        b = b.config(k, v)
    spark = b.getOrCreate()
    in_use = spark.sparkContext.master
    log.info("Spark master %s (%s)", in_use, source)
    return register(spark)


def _master(master: str | None, settings: dict[str, str]) -> tuple[str | None, str]:
    """The master to ask the builder for (None: leave it to Spark's configuration) and where it
    comes from, for the log."""
    from pyspark import SparkConf
    from pyspark.core.context import SparkContext

    active = SparkContext._active_spark_context
    if active is not None:
        if master is not None and master != active.master:
            from seqbus.archive.errors import ArchiveError

            raise ArchiveError(f"a SparkContext already runs on {active.master}; "
                               f"it cannot move to {master}")
        return None, "the running SparkContext's"
    if master is not None:
        _check_reachable(master)
        return master, "given to seqbus.spark.session()"
    # Start the JVM now (under spark-submit: its own) so that its configuration is visible:
    # spark-submit --master, spark-defaults.conf, MASTER.
    pre = SparkConf(loadDefaults=False)
    for k, v in settings.items():
        pre.set(k, v)
    SparkContext._ensure_initialized(conf=pre)
    configured = SparkConf().get("spark.master", None)
    if configured:
        _check_reachable(configured)
        return None, "from Spark's configuration: spark-submit, spark-defaults.conf or MASTER"
    return "local[*]", "the default: nothing configures one"


def _check_reachable(master: str) -> None:
    """Fails naming a standalone master (``spark://host:port[,host:port]``) none of whose
    addresses accepts a connection, instead of waiting for executors that never come."""
    if not master.startswith("spark://"):
        return
    import socket

    from seqbus.archive.errors import ArchiveError

    errors = []
    for hp in master[len("spark://"):].split(","):
        host, _, port = hp.rpartition(":")
        try:
            with socket.create_connection((host, int(port)), timeout=5):
                return
        except (OSError, ValueError) as exc:
            errors.append(f"{hp}: {exc}")
    raise ArchiveError(f"the Spark master {master} does not answer ({'; '.join(errors)})")
