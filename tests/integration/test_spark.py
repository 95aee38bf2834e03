"""``--spark``: the streams as tasks of a real Spark job (local mode, and a standalone cluster on
loopback), against the real brokers. Each test starts a JVM (about 10 s), so they are marked
``spark`` and ``slow``.
"""

from __future__ import annotations

import collections
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import urllib.request
import uuid
from pathlib import Path

import pytest

from mirror_maker.embedded import die_with_parent, free_port

from ..budgets import setup_budget
from .harness import (MODE_IDS, MODES, RAW, BackgroundProducer, MirrorProcess, on_tansu, make_records, mirror_args,
                      mirror_files, values, wait_until)

pyspark = pytest.importorskip("pyspark")
pytestmark = [pytest.mark.spark, pytest.mark.slow,
              pytest.mark.skipif(not (shutil.which("java") or os.environ.get("JAVA_HOME")),
                                 reason="Spark needs Java 17 or later, and none is on PATH or in JAVA_HOME")]

#: Cold start of the JVM, the Python daemon and the workers, plus the group join.
START_S = 90
#: A standalone worker's start and registration with its master (two JVMs).
WORKER_REGISTERED_S = 90


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


@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
def test_two_streams_mirror_everything_and_sigterm_exits_143(tmp_path, source, target, files, mode):
    """Two Spark tasks, each one stream of the same engine, in every mode: every record once, its
    offsets committed, the metrics and the log of both on the driver, 143 on SIGTERM."""
    topic = source.create_topic("spark", partitions=4)
    seeded = make_records(2000, "spark")
    source.seed(topic, seeded, **{"compression.type": "lz4"})
    port = free_port()
    mirror = spark_mirror(tmp_path, files, topic, "--num.streams", "2", "--metrics.port", str(port),
                          "--metrics.bind", "127.0.0.1", *mode.args)
    try:
        target.read_values(topic, [r.value for r in seeded], timeout_s=START_S)
        wait_until(lambda: sum(mode.committed(source, target, files.group, topic).values()) == 2000, 30,
                   "offsets committed for every mirrored record")
        # the driver serves every worker's metrics, labelled by worker
        wait_until(lambda: sum(scrape(port, "mirrormaker_records_acknowledged_total").values()) == 2000, 30,
                   "2000 acknowledged records in the driver's /metrics")
        assert set(scrape(port, "mirrormaker_records_acknowledged_total")) == {"0", "1"}
        assert sum(scrape(port, "mirrormaker_record_count_total").values()) == 2000
        assert urllib.request.urlopen(f"http://127.0.0.1:{port}/ready", timeout=10).status == 200
        log = mirror.log()
        assert re.search(r"Spark worker 0 started \(pid \d+", log) and "Spark worker 1 started" in log
        # worker log lines reach the driver's log, and the driver logs the combined status
        assert "worker 1: [mirrormaker-thread-1] Starting mirror maker thread" in log
        mirror.wait_for_log("4 partitions assigned, 2000 records mirrored in total")
    finally:
        status = mirror.stop(signal.SIGTERM, timeout_s=90)
    assert status == 143, mirror.log()
    assert "Traceback" not in mirror.log()
    rows = target.read_all(topic, expected=2000)
    assert_exactly_once_each(rows, [r.value for r in seeded])
    if mode is RAW:  # batches as they are: the same partitions
        source_partitions = {rec.value: p for p, _o, rec in source.read_all(topic)}
        assert all(source_partitions[rec.value] == p for p, _o, rec in rows)
    if not mode.exactly_once:
        assert_committed_everything(source, files, topic)


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


def test_a_killed_worker_is_restarted_and_nothing_is_lost(tmp_path, source, target, files):
    topic = source.create_topic("spark-kill", partitions=4)
    producer = BackgroundProducer(source, topic, rate=300).start()
    mirror = spark_mirror(tmp_path, files, topic, "--num.streams", "2")
    try:
        target.read_values(topic, [b"v-300"], timeout_s=START_S)
        worker, pid, job = started_workers(mirror.log())[0]
        os.kill(pid, signal.SIGKILL)
        killed_at = len(producer.acked)
        mirror.wait_for_log("The Spark job ended (", 30)
        # within 30 s of the kill, records produced after it are on the target again
        target.read_values(topic, [f"v-{killed_at + 300}".encode()], timeout_s=30)
        assert len([w for w in started_workers(mirror.log()) if w[2] == job + 1]) == 2
        acked = producer.stop()
        target.read_values(topic, acked, timeout_s=60)
        assert mirror.process.poll() is None
    finally:
        producer.stop()
        status = mirror.stop(signal.SIGTERM, timeout_s=90)
    assert status == 143, mirror.log()
    assert "restarting all 2 streams in 2 s (restart 1 of at most 3 in a row)" in mirror.log()


@pytest.mark.needs_kafka_feature("read_committed that hides aborted transactions")
def test_exactly_once_with_a_killed_worker(tmp_path, source, target, files):
    """--exactly.once in Spark tasks: the task index is the shard, so the restarted job's task
    fences the killed one's transactional.id; a read_committed reader sees every record once."""
    topic = source.create_topic("spark-eos", partitions=4)
    producer = BackgroundProducer(source, topic, rate=300).start()
    mirror = spark_mirror(tmp_path, files, topic, "--num.streams", "2", "--exactly.once")
    try:
        target.read_values(topic, [b"v-300"], timeout_s=START_S)
        _worker, pid, _job = started_workers(mirror.log())[0]
        os.kill(pid, signal.SIGKILL)
        killed_at = len(producer.acked)
        mirror.wait_for_log("The Spark job ended (", 30)
        target.read_values(topic, [f"v-{killed_at + 300}".encode()], timeout_s=60)
        acked = producer.stop()
        target.read_values(topic, acked, timeout_s=60)
        rows = target.read_all(topic)  # to the end: a duplicate may follow the last acked value
        assert not {v for v, n in collections.Counter(values(rows)).items() if n > 1}
    finally:
        producer.stop()
        status = mirror.stop(signal.SIGTERM, timeout_s=90)
    assert status == 143, mirror.log()
    assert f"transactional.id {files.group}.eos.0" in mirror.log() and f"{files.group}.eos.1" in mirror.log()


def test_a_worker_stopped_by_its_executor_commits_and_the_job_restarts(tmp_path, source, target, files):
    # Tansu 0.6 stalls a group whose members leave while it is rebalancing (see
    # test_two_instances_started_and_stopped_during_a_stream), which is what the survivors of a
    # 2-stream job do when the driver restarts it; on your clusters the test runs 2 streams.
    streams = 1 if on_tansu() else 2
    topic = source.create_topic("spark-term", partitions=2)
    producer = BackgroundProducer(source, topic, rate=300).start()
    mirror = spark_mirror(tmp_path, files, topic, "--num.streams", str(streams))
    try:
        target.read_values(topic, [b"v-300"], timeout_s=START_S)
        worker, pid, job = started_workers(mirror.log())[0]
        # Its mirror is running (its signal handlers are in place): a worker killed while it was
        # still starting is a crash, which is another test's case.
        mirror.wait_for_log(f"worker {worker}: [mirrormaker-thread-{worker}] Subscribed to", START_S)
        os.kill(pid, signal.SIGTERM)  # what an executor shutting down sends its Python workers
        mirror.wait_for_log(f"The Spark job ended (worker {worker} stopped without being asked to)", 30)
        stopped_at = len(producer.acked)
        target.read_values(topic, [f"v-{stopped_at + 300}".encode()], timeout_s=30)
        assert len([w for w in started_workers(mirror.log()) if w[2] == job + 1]) == streams
        acked = producer.stop()
        target.read_values(topic, acked, timeout_s=60)
    finally:
        producer.stop()
        status = mirror.stop(signal.SIGTERM, timeout_s=90)
    assert status == 143, mirror.log()
    assert f"worker {worker}: Received SIGTERM, shutting down" in mirror.log()


def test_poison_record_with_abort_exits_255_without_restarting(tmp_path, source, target):
    topic = source.create_topic("spark-poison", partitions=1)
    records = make_records(100, "before") + make_records(1, "big", size=20000) + make_records(100, "after")
    source.seed(topic, records, partition=0)
    files = mirror_files(tmp_path, source, target, producer={"max.request.size": 10000})
    mirror = spark_mirror(tmp_path, files, topic, "--num.streams", "2")
    assert mirror.wait(START_S + 60) == 255, mirror.log()
    log = mirror.log()
    errors = [line for line in log.splitlines() if " ERROR " in line]
    assert len(errors) == 1, errors
    assert f"{topic}-0 offset 100" in errors[0] and "too large" in errors[0].lower()
    assert "the mirror maker stopped without committing past it" in errors[0]
    assert "restarting" not in log and "Traceback" not in log
    assert {job for _w, _p, job in started_workers(log)} == {1}
    assert source.committed(files.group, topic).get(0, 0) <= 100


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


def test_handler_from_the_driver_directory_runs_in_the_workers_and_exit_when_caught_up(
        tmp_path, source, target, files):
    topic = source.create_topic("spark-handler", partitions=3)
    seeded = make_records(600, "h")
    source.seed(topic, seeded)
    app = handler_dir(tmp_path)
    env = {"PYTHONPATH": ""}  # the module is found only through the driver's working directory
    mirror = spark_mirror(tmp_path, files, topic, "--num.streams", "2", "--exit.when.caught.up",
                          "--message.handler", "acme_tagging.Tagged", "--message.handler.args", "T:",
                          env=env, cwd=app)
    assert mirror.wait(START_S + 60) == 0, mirror.log()
    log = mirror.log()
    assert f"Shipping acme_tagging ({app / 'acme_tagging.py'}) to the Spark executors" in log
    assert re.search(r"Caught up: 600 records \(.*\) mirrored in [\d.]+ s, 0 dropped", log), log
    rows = target.read_all(topic, expected=600)
    assert_exactly_once_each(rows, [b"T:" + r.value for r in seeded])
    assert all(dict(rec.headers).get("loaded-from", b"").endswith(b"acme_tagging.py") for _p, _o, rec in rows)
    assert_committed_everything(source, files, topic)


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
        rows = target.read_values(topic, [b"S:" + r.value for r in seeded], timeout_s=START_S)
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
    errors = [line for line in mirror.log().splitlines() if " ERROR " in line]
    assert len(errors) == 1 and "not enough Spark task slots: --num.streams 3 needs 3 tasks" in errors[0], errors
    assert "Traceback" not in mirror.log()


HANGING_HANDLER = '''
import threading

from mirror_maker import MessageHandler, ProducerRecord


class HangOn(MessageHandler):
    """Never returns from a record whose value starts with b"hang": a stream that cannot stop."""

    def handle(self, record):
        if record.value.startswith(b"hang"):
            threading.Event().wait()
        return [ProducerRecord(record.topic, record.value, record.key)]
'''


def test_a_second_signal_cancels_workers_that_do_not_stop(tmp_path, source, target, files):
    topic = source.create_topic("spark-hang", partitions=1)
    source.seed(topic, make_records(10, "ok") + make_records(1, "hang"))
    (tmp_path / "hang_handler.py").write_text(textwrap.dedent(HANGING_HANDLER))
    mirror = spark_mirror(tmp_path, files, topic, "--num.streams", "1", "--message.handler",
                          "hang_handler.HangOn", "--shutdown.timeout.ms", "120000")
    try:
        target.read_values(topic, [f"ok-{i}".encode() for i in range(10)], timeout_s=START_S)
        mirror.process.send_signal(signal.SIGTERM)
        mirror.wait_for_log("Received SIGTERM, shutting down")
        assert mirror.process.poll() is None  # the worker is stuck in the handler
        mirror.process.send_signal(signal.SIGTERM)
        assert mirror.wait(30) == 143, mirror.log()
    finally:
        mirror.kill()
    assert "Second signal: cancelling the Spark job" in mirror.log()
    # the stuck worker does not outlive the driver
    pids = [pid for _w, pid, _j in started_workers(mirror.log())]
    wait_until(lambda: all(gone(pid) for pid in pids), 10, "the stuck worker process to be gone")
    assert source.committed(files.group, topic).get(0, 0) <= 10


def test_a_killed_driver_leaves_no_worker_behind_and_they_commit(tmp_path, source, target, files):
    topic = source.create_topic("spark-driver", partitions=2)
    seeded = make_records(500, "d")
    source.seed(topic, seeded)
    # periodic commits off: offsets can only come from the workers' final commit
    mirror = MirrorProcess(mirror_args(files, topic, "--spark", "--num.streams", "2",
                                       "--offset.commit.interval.ms", "3600000"), tmp_path / "driver.log")
    target.read_values(topic, [r.value for r in seeded], timeout_s=START_S)
    pids = descendants(mirror.process.pid)  # Spark's JVM, pyspark's daemon and the workers
    assert {pid for _w, pid, _j in started_workers(mirror.log())} <= set(pids)
    mirror.kill()  # SIGKILL: no handler runs in the driver

    # Seconds here; but a worker's final flush and commit may take --shutdown.timeout.ms (30 s) on
    # a busy machine, and the JVM and pyspark's daemon exit after it.
    wait_until(lambda: all(gone(pid) for pid in pids), 60, "the JVM and the Spark workers to exit")
    wait_until(lambda: sum(source.committed(files.group, topic).values()) == 500, 30,
               "the workers' final commit")


def by_partition(rows):
    """Values per partition, in offset order."""
    found = collections.defaultdict(list)
    for partition, _offset, rec in sorted(rows, key=lambda row: (row[0], row[1])):
        found[partition].append(rec.value)
    return dict(found)


def test_dedicated_mode_runs_every_flow_as_spark_tasks(tmp_path, source, target):
    """``connect-mirror-maker mm2.properties --spark``: A->B and B->A from one file, each flow one
    Spark job of tasks.max 2 tasks on one SparkContext (local[4]). Each flow's records arrive once,
    in order per partition, under the policy's names; task 0 of each flow runs its heartbeats as the
    election says; MirrorMaker 2's metric names come from the workers; SIGTERM stops it all, 143."""
    from .test_dedicated_mode import BIN as DEDICATED_BIN, write_mm2

    a, b = (f"{side}{uuid.uuid4().hex[:6]}" for side in ("a", "b"))  # aliases of this test only
    orders = source.create_topic("spark-orders", partitions=4)
    payments = target.create_topic("spark-payments", partitions=2)
    source.seed(orders, make_records(1000, "orders"))
    target.seed(payments, make_records(400, "payments"))
    port = free_port()
    path = write_mm2(tmp_path / "mm2.properties", {a: source, b: target}, extra={
        f"{a}->{b}.enabled": "true", f"{b}->{a}.enabled": "true", "topics": f"{orders}, {payments}",
        "tasks.max": 2, "emit.heartbeats.interval.seconds": 1, "shutdown.timeout.ms": 10000,
        "metrics.port": port, "metrics.bind": "127.0.0.1"})
    mirror = MirrorProcess([], tmp_path / "dedicated.log",
                           command=[sys.executable, str(DEDICATED_BIN), str(path), "--spark"])
    try:
        target.read_values(f"{a}.{orders}", [r.value for r in make_records(1000, "orders")], timeout_s=START_S)
        source.read_values(f"{b}.{payments}", [r.value for r in make_records(400, "payments")], timeout_s=30)
        wait_until(lambda: {(hb.source_alias, hb.target_alias) for hb in heartbeats(target)} >= {(a, b)}
                   and {(hb.source_alias, hb.target_alias) for hb in heartbeats(source)} >= {(b, a)}, 30,
                   "each flow's task 0 writing its heartbeats")
        # the workers send their metrics every 5 s
        wait_until(lambda: (mm2_record_count(port, f"{a}.{orders}"), mm2_record_count(port, f"{b}.{payments}"))
                   == (1000, 400), 30, "MirrorMaker 2's record_count of each remote topic on /metrics")
        wait_until(lambda: sum(scrape(port, "mirrormaker_offset_syncs_total").values()) > 0, 30,
                   "offset syncs written by the workers")
    finally:
        status = mirror.stop(signal.SIGTERM, timeout_s=90)
    log = mirror.log()
    assert status == 143, log[-3000:]
    assert f"Starting Spark (master local[4]) for 4 streams ({a}->{b}: 2, {b}->{a}: 2)" in log
    assert f"INFO [{a}->{b}] This node now runs the syncs, checkpoints and heartbeats of {a}->{b}" in log
    assert re.search(rf"\[{b}->{a}\] worker 1: \[mirrormaker-thread-1\] Starting mirror maker thread", log), log
    assert "Traceback" not in log and " ERROR " not in log
    # Once each, in the source's order per partition (partitions kept), and every offset committed.
    for cluster, topic, remote, flow_source, flow_target in ((source, orders, target, a, b),
                                                           (target, payments, source, b, a)):
        rows = cluster.read_all(topic)
        assert by_partition(remote.read_all(f"{flow_source}.{topic}", expected=len(rows))) == by_partition(rows)
        assert cluster.committed(f"mm2-{flow_source}->{flow_target}", topic) == cluster.end_offsets(topic)


def heartbeats(cluster):
    from mirror_maker.replication.formats import decode_heartbeat

    if not cluster.topic_exists("heartbeats"):
        return []
    return [decode_heartbeat(rec.key, rec.value) for _p, _o, rec in cluster.read_all("heartbeats", timeout_s=30)]


def mm2_record_count(port: int, remote_topic: str) -> float:
    """MirrorMaker 2's record_count of a remote topic, summed over its partitions, from /metrics."""
    from prometheus_client.parser import text_string_to_metric_families

    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read().decode()
    return sum(sample.value for family in text_string_to_metric_families(text) for sample in family.samples
               if sample.name == "kafka_connect_mirror_mirrorsourceconnector_record_count"
               and sample.labels.get("topic") == remote_topic)
