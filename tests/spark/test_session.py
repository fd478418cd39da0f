"""Issue 18: ``seqbus.spark.session()`` runs where the user says — spark-submit's ``--master``,
``spark.master`` in ``spark-defaults.conf``, an existing SparkContext — and ``local[*]`` only
when nothing says; an unreachable standalone master fails at once, naming it."""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from seqbus.spark import java_missing_reason

pytestmark = pytest.mark.skipif(java_missing_reason() is not None, reason=str(java_missing_reason()))

JOB = """
import logging, sys
logging.basicConfig(level=logging.INFO, stream=sys.stderr)
from seqbus.spark import session
spark = session(app="where")
print("MASTER", spark.sparkContext.master, flush=True)
spark.stop()
"""


def _env(conf_dir: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{Path(sys.executable).parent}:{env.get('PATH', '')}"  # spark-submit's python3
    env["SPARK_CONF_DIR"] = str(conf_dir)
    env["SPARK_LOCAL_IP"] = "127.0.0.1"
    for k in ("PYSPARK_SUBMIT_ARGS", "MASTER", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON"):
        env.pop(k, None)
    return env


@pytest.fixture(scope="module")
def conf(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    d = tmp_path_factory.mktemp("spark-conf")
    (d / "spark-defaults.conf").write_text("spark.master local[1]\nspark.ui.enabled false\n")
    job = d / "where.py"
    job.write_text(JOB)
    return d, job


def _master(p: subprocess.CompletedProcess[str]) -> str:
    assert p.returncode == 0, p.stderr[-3000:]
    [line] = [x for x in p.stdout.splitlines() if x.startswith("MASTER ")]
    return line.split()[1]


def test_spark_defaults_conf_names_the_master(conf: tuple[Path, Path]) -> None:
    d, job = conf
    p = subprocess.run([sys.executable, str(job)], env=_env(d), capture_output=True, text=True,
                       timeout=180, check=False)
    assert _master(p) == "local[1]"
    assert "Spark master local[1]" in p.stderr  # logged when the session starts


def test_spark_submit_master_wins_over_the_defaults(conf: tuple[Path, Path]) -> None:
    d, job = conf
    submit = Path(sys.executable).parent / "spark-submit"
    from seqbus.spark import jar

    # under spark-submit the jar comes with --jars (docs/spark.md): the driver's JVM is
    # spark-submit's, started before session() runs
    p = subprocess.run([str(submit), "--master", "local[2]", "--jars", jar(), str(job)],
                       env=_env(d), capture_output=True, text=True, timeout=180, check=False)
    assert _master(p) == "local[2]"


def test_an_unreachable_standalone_master_fails_naming_it(conf: tuple[Path, Path]) -> None:
    d, job = conf
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    submit = Path(sys.executable).parent / "spark-submit"
    p = subprocess.run([str(submit), "--master", f"spark://127.0.0.1:{port}", str(job)],
                       env=_env(d), capture_output=True, text=True, timeout=180, check=False)
    assert p.returncode != 0
    out = p.stdout + p.stderr  # spark-submit passes the driver's stderr on to its stdout
    assert f"the Spark master spark://127.0.0.1:{port} does not answer" in out
    assert "MASTER " not in out  # it did not run anywhere else


def test_an_existing_spark_context_is_kept(spark: Any, caplog: pytest.LogCaptureFixture) -> None:
    from seqbus.archive import ArchiveError
    from seqbus.spark import session

    with caplog.at_level(logging.INFO, logger="seqbus.spark"):
        s = session()
    assert s.sparkContext is spark.sparkContext and s.sparkContext.master == "local[2]"
    assert any("Spark master local[2]" in r.getMessage() for r in caplog.records)
    with pytest.raises(ArchiveError, match=r"already runs on local\[2\]; it cannot move to local\[3\]"):
        session("local[3]")


def test_a_session_without_the_jar_is_told_how_to_get_it(tmp_path: Path) -> None:
    script = tmp_path / "nojar.py"
    script.write_text(
        "from pyspark.sql import SparkSession\n"
        "from seqbus.spark import register\n"
        "s = SparkSession.builder.master('local[1]').config('spark.ui.enabled', 'false').getOrCreate()\n"
        "register(s)\n")
    p = subprocess.run([sys.executable, str(script)], env=_env(tmp_path), capture_output=True,
                       text=True, timeout=180, check=False)
    assert p.returncode != 0
    assert "the seqbus source is not on this Spark session's classpath: start Spark with spark.jars=" in p.stderr
