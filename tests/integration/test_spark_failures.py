"""``--spark`` when its processes fail: a Spark worker killed or stopped by its executor (the job
restarts from the last commit, exactly-once too), a worker that does not stop (a second signal
cancels it), a killed driver (no worker outlives it, and they commit)."""

from __future__ import annotations

import collections
import os
import signal
import textwrap

import pytest

from .harness import BackgroundProducer, MirrorProcess, make_records, mirror_args, on_tansu, values, wait_until
from .spark_harness import (MARKS, START_S, client_compiler_jvms, descendants, gone, spark_mirror,  # noqa: F401
                            started_workers)

pytestmark = MARKS


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
