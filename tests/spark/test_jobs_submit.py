"""Issue 29: the Spark jobs find seqbus-spark.jar by themselves. Under spark-submit the
driver's JVM is started before Python runs, so the ``spark.jars`` that ``session()`` sets
comes too late for the driver: the jobs add the jar to spark-submit's class loader and ship it
to the executors, so ``spark-submit JOBS counts ARCHIVE`` runs with no ``--jars`` (it failed
with "the seqbus source is not on this Spark session's classpath")."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from seqbus.spark import java_missing_reason
from tests.archive import session as sess

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(java_missing_reason() is not None, reason=str(java_missing_reason())),
]


def test_spark_submit_of_a_job_needs_no_jars(tmp_path: Path) -> None:
    frag = sess.build_fragmented(150)
    archive = sess.write_records(tmp_path / "a.archive", frag.records, 4096)
    import seqbus.spark.jobs as jobs

    env = {k: v for k, v in os.environ.items()
           if k not in ("PYSPARK_SUBMIT_ARGS", "MASTER", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    env.update(PATH=f"{Path(sys.executable).parent}:{env.get('PATH', '')}",
               SPARK_CONF_DIR=str(tmp_path), SPARK_LOCAL_IP="127.0.0.1")
    p = subprocess.run(
        [str(Path(sys.executable).parent / "spark-submit"), "--master", "local[2]",
         "--conf", "spark.ui.enabled=false", str(jobs.__file__), "counts", str(archive),
         "--rows", "100"],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300, check=False)
    out = p.stdout + p.stderr
    assert p.returncode == 0, out[-5000:]
    rows = [[c.strip() for c in line.strip().strip("|").split("|")]
            for line in p.stdout.splitlines() if line.startswith("|")]
    assert rows and rows[0][:3] == ["account", "instance", "type"], p.stdout
    assert {(r[0], r[2]) for r in rows[1:]} == {(m.account, m.type) for m in frag.messages}
