"""Helpers of the ``--spark`` tests (test_spark*.py): the marks every such module has, the mirror
with ``--spark``, what its log and /proc say of the Spark workers, a standalone cluster on loopback.

The tests start Spark's JVMs afresh many times, each for seconds of work: they run with the client
compiler only (``-XX:TieredStopAtLevel=1``, as the Kafka nodes of the tests do), which costs them
a third less CPU on the tests' shared cores.
"""

from __future__ import annotations

import collections
import os
import re
import shutil
import signal
import subprocess
import textwrap
import urllib.request
from pathlib import Path

import pytest

from mirror_maker.embedded import die_with_parent, free_port

from .harness import MirrorProcess, mirror_args, values, wait_until

pyspark = pytest.importorskip("pyspark")

#: Every Spark test module's marks.
MARKS = [pytest.mark.spark, pytest.mark.slow,
         pytest.mark.skipif(not (shutil.which("java") or os.environ.get("JAVA_HOME")),
                            reason="Spark needs Java 17 or later, and none is on PATH or in JAVA_HOME")]

#: Cold start of the JVM, the Python daemon and the workers, plus the group join.
START_S = 90
#: A standalone worker's start and registration with its master (two JVMs).
WORKER_REGISTERED_S = 90
#: Read by every JVM a test starts (Spark's driver, master, worker and executors).
JVM_OPTIONS = {"JDK_JAVA_OPTIONS": "-XX:TieredStopAtLevel=1"}


@pytest.fixture(autouse=True)
def client_compiler_jvms(monkeypatch):
    """Every JVM started by the test's processes compiles with C1 only (``JVM_OPTIONS``)."""
    for name, value in JVM_OPTIONS.items():
        monkeypatch.setenv(name, value)


def spark_mirror(tmp_path, files, topic, *extra, name="spark.log", env=None, cwd=None):
    args = mirror_args(files, topic, "--spark", "--offset.commit.interval.ms", "500",
                       "--status.interval.ms", "1000", *extra)
    return MirrorProcess(args, tmp_path / name, env=env, cwd=cwd)


def scrape(port: int, name: str) -> dict:
    """{worker: value summed over the other labels} of one metric from the driver's /metrics."""
    from prometheus_client.parser import text_string_to_metric_families

    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    per_worker = collections.Counter()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                per_worker[sample.labels.get("worker")] += sample.value
    return per_worker


def assert_exactly_once_each(rows, expected):
    counts = collections.Counter(values(rows))
    assert set(counts) == set(expected), f"{len(set(expected) - set(counts))} missing"
    duplicates = {value: n for value, n in counts.items() if n > 1}
    assert not duplicates, f"{len(duplicates)} duplicated, e.g. {list(duplicates)[:3]}"


def assert_committed_everything(source, files, topic):
    """Committed offsets are each source partition's end: all of it is on the target."""
    per_partition = collections.Counter(partition for partition, _o, _r in source.read_all(topic))
    committed = source.committed(files.group, topic)
    assert committed == dict(per_partition), (committed, per_partition)


def descendants(root: int):
    """Every process below ``root`` (read from /proc)."""
    children = collections.defaultdict(list)
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as stat:
                children[int(stat.read().rsplit(")", 1)[1].split()[1])].append(int(entry))
        except (OSError, ValueError, IndexError):
            continue
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def started_workers(log):
    """(worker, pid, job) of every "Spark worker N started" line."""
    return [(int(w), int(pid), int(job)) for w, pid, job in
            re.findall(r"Spark worker (\d+) started \(pid (\d+) on \S+, job (\d+)\)", log)]


HANDLER = '''
"""A handler that only the driver's working directory has; it names the file it ran from."""
import os

from mirror_maker import MessageHandler, ProducerRecord


class Tagged(MessageHandler):
    def __init__(self, prefix):
        self.prefix = prefix.encode()

    def handle(self, record):
        headers = list(record.headers or []) + [("loaded-from", os.path.abspath(__file__).encode())]
        return [ProducerRecord(record.topic, self.prefix + record.value, record.key,
                               timestamp=record.timestamp, headers=headers)]
'''


def handler_dir(tmp_path: Path) -> Path:
    app = tmp_path / "app"
    app.mkdir()
    (app / "acme_tagging.py").write_text(textwrap.dedent(HANDLER))
    return app


class StandaloneCluster:
    """A Spark standalone master and one worker (2 cores) on loopback, from the pip package."""

    def __init__(self, workdir: Path) -> None:
        self.home = Path(pyspark.__file__).parent
        self.port = free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.env = {**os.environ, "SPARK_HOME": str(self.home), "SPARK_LOCAL_IP": "127.0.0.1",
                    "SPARK_MASTER_OPTS": "-Dspark.master.rest.enabled=false"}
        self.workdir = workdir
        self.processes = []

    def _start(self, name, *args):
        with open(self.workdir / f"{name}.log", "ab") as log:
            self.processes.append(subprocess.Popen(
                [str(self.home / "bin" / "spark-class"), *args], stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL, env=self.env, cwd=str(self.workdir),
                preexec_fn=die_with_parent(signal.SIGKILL)))
        return self.workdir / f"{name}.log"

    def start(self) -> "StandaloneCluster":
        master_log = self._start("master", "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                 "--port", str(self.port), "--webui-port", str(free_port()))
        worker_log = self._start("worker", "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                                 "--cores", "2", "--memory", "2g", "--webui-port", str(free_port()),
                                 "--work-dir", str(self.workdir / "work"), self.url)
        wait_until(lambda: "Successfully registered with master" in worker_log.read_text(errors="replace")
                   or any(p.poll() is not None for p in self.processes), WORKER_REGISTERED_S,
                   "the Spark worker to register", evidence=lambda: worker_log.read_text(errors="replace")[-3000:])
        assert all(p.poll() is None for p in self.processes), master_log.read_text() + worker_log.read_text()
        return self

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.terminate()
        for process in self.processes:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
