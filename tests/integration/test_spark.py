"""``--spark``: the streams as tasks of a real Spark job in local mode, against the real brokers:
every mode, a refused record, a handler shipped from the driver's directory, and the dedicated mode's
flows as Spark jobs. The workers' failures are in test_spark_failures.py, a standalone cluster in
test_spark_standalone.py. Each test starts a JVM, so they are marked ``spark`` and ``slow``.
"""

from __future__ import annotations

import collections
import re
import signal
import sys
import urllib.request
import uuid

import pytest

from mirror_maker.embedded import free_port

from .harness import MODE_IDS, MODES, RAW, MirrorProcess, make_records, mirror_files, wait_until
from .spark_harness import (MARKS, START_S, assert_committed_everything, assert_exactly_once_each,  # noqa: F401
                            client_compiler_jvms, handler_dir, scrape, spark_mirror, started_workers)

pytestmark = MARKS


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
