"""Issue 18: a real standalone Spark cluster on 127.0.0.1 (master and worker started from the
pyspark installation). spark-submit with its master runs there — the master's and the
worker's JSON status show the application and its executors — with results equal to local
mode's. The executors' Python has no seqbus: the source reaches them as seqbus-spark.jar
(--jars) and the Python package, for a UDF that imports it, as an archive
(python -m seqbus.spark.pack, --archives), the recipe of docs/spark.md."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

from seqbus.spark import jar, java_missing_reason
from tests.archive import session as sess
from tests.conftest import Processes, free_tcp_port

SYSTEM_PYTHON = Path("/usr/bin/python3.11")

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(java_missing_reason() is not None, reason=str(java_missing_reason())),
    pytest.mark.skipif(not SYSTEM_PYTHON.exists(), reason="no system python3.11 for the executors"),
]


def _status(port: int) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/", timeout=5) as r:
        return dict(json.loads(r.read()))


def _wait(what: str, cond: Any, processes: Processes, timeout: float = 90) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            v = cond()
            if v:
                return v
        except OSError:
            pass
        time.sleep(0.5)
    pytest.fail(f"timed out waiting for {what}\n{processes.logs()}")


def test_spark_submit_runs_on_the_standalone_cluster(tmp_path: Path, processes: Processes) -> None:
    import pyspark

    home = Path(pyspark.__file__).parent
    # the cluster's own environment: no virtualenv, a Python without seqbus or pyspark
    env = {k: v for k, v in os.environ.items()
           if k not in ("VIRTUAL_ENV", "PYTHONPATH", "PYSPARK_PYTHON", "PYSPARK_DRIVER_PYTHON")}
    env.update(SPARK_HOME=str(home), SPARK_LOCAL_IP="127.0.0.1", PATH="/usr/bin:/bin",
               SPARK_CONF_DIR=str(tmp_path))
    assert subprocess.run([str(SYSTEM_PYTHON), "-c", "import seqbus"], env=env,
                          capture_output=True, check=False).returncode != 0
    port, ui, worker_ui = free_tcp_port(), free_tcp_port(), free_tcp_port()
    spark_class = str(home / "bin" / "spark-class")
    processes.start("master", [spark_class, "org.apache.spark.deploy.master.Master",
                               "--host", "127.0.0.1", "--port", str(port), "--webui-port", str(ui)],
                    env=env)
    _wait("the master", lambda: _status(ui).get("status") == "ALIVE", processes)
    processes.start("worker", [spark_class, "org.apache.spark.deploy.worker.Worker",
                               f"spark://127.0.0.1:{port}", "--host", "127.0.0.1", "--cores", "2",
                               "--memory", "2g", "--webui-port", str(worker_ui),
                               "--work-dir", str(tmp_path / "work")], env=env)
    _wait("the worker", lambda: [w for w in _status(ui)["workers"] if w["state"] == "ALIVE"], processes)

    frag = sess.build_fragmented(150)
    archive = sess.write_records(tmp_path / "a.archive", frag.records, 4096)
    pack = subprocess.run([sys.executable, "-m", "seqbus.spark.pack", str(tmp_path / "seqbus-py.tar.gz")],
                          capture_output=True, text=True, check=True, timeout=120).stdout.strip()
    submit_env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1",
                      PATH=f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}")
    job = str(Path(__file__).with_name("cluster_job.py"))

    def submit(master: str, out: Path, *ship: str) -> dict[str, Any]:
        # a relative archive path: made absolute on the driver (the cwd is tmp_path)
        p = subprocess.run(
            [str(Path(sys.executable).parent / "spark-submit"), "--master", master,
             "--jars", jar(), *ship,
             "--conf", f"spark.pyspark.driver.python={sys.executable}",
             "--conf", "spark.ui.enabled=false", "--conf", "spark.executor.memory=1g",
             job, archive.name, str(out)],
            cwd=tmp_path, env=submit_env, capture_output=True, text=True, timeout=300, check=False)
        assert p.returncode == 0, (p.stdout + p.stderr)[-5000:] + processes.logs()
        return dict(json.loads(out.read_text()))

    # the recipe: the jar (--jars) and, for Python code on the executors, the package
    cluster = submit(f"spark://127.0.0.1:{port}", tmp_path / "cluster.json",
                     "--archives", f"{pack}#seqbus-py",
                     "--conf", "spark.executorEnv.PYTHONPATH=seqbus-py",
                     "--conf", f"spark.pyspark.python={SYSTEM_PYTHON}")
    assert cluster["master"] == f"spark://127.0.0.1:{port}"
    # the master ran the application, the worker its executors
    status = _wait("the application to finish on the master",
                   lambda: [a for a in _status(ui)["completedapps"] if a["id"] == cluster["app"]],
                   processes)
    assert status[0]["name"] == "seqbus cluster test"
    executors = _wait("the worker's executors of the application", lambda: [
        e for e in _status(worker_ui).get("finishedexecutors", []) if e["appid"] == cluster["app"]],
        processes)
    assert executors
    # the UDF ran on the executors, from the shipped package (not the driver's)
    assert all(u.startswith("bus in ") and "seqbus-py" in u for u in cluster["udf"]), cluster["udf"]

    local = submit("local[2]", tmp_path / "local.json")  # executors in the driver's JVM
    assert local["master"] == "local[2]"
    assert cluster["counts"] == local["counts"]
    want = sorted({(m.account, m.instance, m.type) for m in frag.messages})
    assert [tuple(c[:3]) for c in cluster["counts"]] == want
