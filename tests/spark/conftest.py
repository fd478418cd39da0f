"""One Spark session for every Spark test: local[2], 2 shuffle partitions, no UI."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from seqbus.spark import java_missing_reason


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    reason = java_missing_reason()
    if reason is not None:
        pytest.skip(reason)
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    from seqbus.spark import jar, register

    s = (
        SparkSession.builder.master("local[2]")
        .config("spark.jars", jar())
        .appName("seqbus-tests")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.parquet.outputTimestampType", "TIMESTAMP_MICROS")
        .config("spark.driver.memory", "1g")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.python.worker.reuse", "true")
        .getOrCreate()
    )
    s.sparkContext.setLogLevel("ERROR")
    register(s)
    yield s
    s.stop()


@pytest.fixture(scope="session")
def session_archive(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[object]]:
    from tests.archive import session as sess

    msgs = sess.build(200)
    path = sess.write(tmp_path_factory.mktemp("spark") / "session.archive", msgs)
    return path, msgs
