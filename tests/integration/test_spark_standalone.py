"""``--spark`` on a Spark standalone cluster (a master and a worker on loopback, from the PySpark
package, started once for the module): a handler shipped to the executors, ``spark-submit`` running
the tool, and too few task slots refused with one line."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from mirror_maker.embedded import die_with_parent

from ..budgets import setup_budget
from .harness import make_records, mirror_args, wait_until
from .spark_harness import (MARKS, START_S, WORKER_REGISTERED_S, StandaloneCluster,  # noqa: F401
                            assert_committed_everything, assert_exactly_once_each, client_compiler_jvms, handler_dir,
                            spark_mirror)

pytestmark = MARKS


@pytest.fixture(scope="module")
@setup_budget(WORKER_REGISTERED_S + 30)
def standalone(tmp_path_factory):
    cluster = StandaloneCluster(tmp_path_factory.mktemp("spark-standalone")).start()
    try:
        yield cluster
    finally:
        cluster.stop()


def test_standalone_cluster_mirrors_with_a_shipped_handler(tmp_path, source, target, files, standalone):
    topic = source.create_topic("spark-standalone", partitions=4)
    seeded = make_records(1000, "s")
    source.seed(topic, seeded)
    app = handler_dir(tmp_path)
    env = {"PYTHONPATH": "", "PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    mirror = spark_mirror(tmp_path, files, topic, "--num.streams", "2", "--spark.master", standalone.url,
                          "--message.handler", "acme_tagging.Tagged", "--message.handler.args", "S:",
                          env=env, cwd=app)
    try:
        rows = target.read_values(topic, [b"S:" + r.value for r in seeded], timeout_s=START_S,
                                  evidence=lambda: mirror.log_tail(8000))
        wait_until(lambda: sum(source.committed(files.group, topic).values()) == 1000, 30,
                   "offsets committed for every mirrored record")
    finally:
        status = mirror.stop(signal.SIGINT, timeout_s=90)
    assert status == 130, mirror.log()
    assert "Received SIGINT, shutting down" in mirror.log() and "Traceback" not in mirror.log()
    # the executors run in the worker's own directory: the handler came from the shipped copy
    origins = {dict(rec.headers)["loaded-from"] for _p, _o, rec in rows}
    assert origins and not any(origin.startswith(str(app).encode()) for origin in origins), origins
    assert_exactly_once_each(target.read_all(topic, expected=1000), [b"S:" + r.value for r in seeded])
    assert_committed_everything(source, files, topic)


def test_spark_submit_runs_the_tool_on_the_standalone_cluster(tmp_path, source, target, files, standalone):
    topic = source.create_topic("spark-submit", partitions=4)
    seeded = make_records(800, "sub")
    source.seed(topic, seeded)
    command = [str(standalone.home / "bin" / "spark-submit"), "--master", standalone.url,
               str(Path(__file__).resolve().parents[2] / "bin" / "kafka-mirror-maker.py"),
               *mirror_args(files, topic, "--spark", "--num.streams", "2", "--exit.when.caught.up")]
    env = {**standalone.env, "PYSPARK_PYTHON": sys.executable}
    result = subprocess.run(command, env=env, cwd=str(tmp_path), capture_output=True, text=True,
                            timeout=START_S + 60, preexec_fn=die_with_parent(signal.SIGKILL))
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    assert f"Starting Spark (master {standalone.url}) for 2 streams" in output  # spark-submit's --master
    assert "Caught up: 800 records" in output
    assert_exactly_once_each(target.read_all(topic, expected=800), [r.value for r in seeded])
    assert_committed_everything(source, files, topic)


def test_not_enough_slots_fails_fast_with_a_clear_error(tmp_path, source, target, files, standalone):
    topic = source.create_topic("spark-slots", partitions=3)
    env = {"PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1"}
    # The check for slots is retried while executors register (30 s by default): 3 times here.
    mirror = spark_mirror(tmp_path, files, topic, "--num.streams", "3", "--spark.master", standalone.url,
                          "--spark.conf", "spark.scheduler.barrier.maxConcurrentTasksCheck.maxFailures=3", env=env)
    assert mirror.wait(START_S) == 1, mirror.log()
    # The tool's own ERROR lines, not Spark's (its JVM logs an executor's lost connection its way).
    errors = re.findall(r"^\[[^\]]*\] ERROR .*", mirror.log(), re.MULTILINE)
    assert len(errors) == 1 and "not enough Spark task slots: --num.streams 3 needs 3 tasks" in errors[0], errors
    assert "Traceback" not in mirror.log()
