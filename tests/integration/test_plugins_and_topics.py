"""Handlers and listeners loaded by dotted path, partition handling, threads and topic pick-up."""

import signal
from collections import Counter

import pytest

from ..java_partitioner import java_partition
from .harness import (ROOT, BackgroundProducer, MirrorProcess, assert_order_per_key, make_records,
                      mirror_args, mirror_files, on_tansu, unique, wait_until)

EXAMPLES = {"PYTHONPATH": str(ROOT / "examples")}


def test_handler_and_listener_by_dotted_path(tmp_path, source, target, files):
    topic = source.create_topic("plug", partitions=2)
    keep = make_records(50, "keep")
    skip = [r._replace(key=b"internal-" + r.key) for r in make_records(30, "skip")]
    source.seed(topic, keep + skip)
    events = tmp_path / "events.txt"
    mirror = MirrorProcess(mirror_args(files, topic, "--offset.commit.interval.ms", "300",
                                       "--message.handler", "filtering_handler.SkipKeyPrefix",
                                       "--message.handler.args", "internal-",
                                       "--consumer.rebalance.listener", "recording_listener:RecordingListener",
                                       "--rebalance.listener.args", str(events)),
                           tmp_path / "m.log", env=EXAMPLES)
    try:
        rows = target.read_all(topic, expected=50, timeout_s=60)
        assert sorted(rec.value for _p, _o, rec in rows) == sorted(r.value for r in keep)
        # filtered records still advance the committed offsets
        wait_until(lambda: sum(source.committed(files.group, topic).values()) == 80, 30,
                   "offsets past the filtered records")
    finally:
        assert mirror.stop(signal.SIGTERM) == 143, mirror.log()
    lines = events.read_text().splitlines()
    assert lines[0].startswith("assigned") and f"{topic}-0" in lines[0]
    assert lines[-1].startswith("revoked")


def test_renaming_handler_creates_the_renamed_topic(tmp_path, source, target, files):
    topic = source.create_topic("ren", partitions=3)
    source.seed(topic, make_records(40))
    mirror = MirrorProcess(mirror_args(files, topic, "--message.handler", "renaming_handler.PrefixTopics",
                                       "--message.handler.args", "dc1."),
                           tmp_path / "m.log", env=EXAMPLES)
    try:
        rows = target.read_all(f"dc1.{topic}", expected=40, timeout_s=60)
        assert len(rows) == 40
        assert target.partitions(f"dc1.{topic}") == 3
        assert not target.topic_exists(topic)
    finally:
        assert mirror.stop(signal.SIGTERM) == 143, mirror.log()


def test_partition_preserving_handler_and_default_partitioning(tmp_path, source, target, files):
    topic = source.create_topic("part", partitions=4)
    records = make_records(200)
    source.seed(topic, records)
    mirror = MirrorProcess(mirror_args(files, topic, "--message.handler",
                                       "mirror_maker.handlers.PartitionPreservingHandler"),
                           tmp_path / "m.log")
    try:
        target_rows = target.read_all(topic, expected=200, timeout_s=60)
    finally:
        assert mirror.stop(signal.SIGTERM) == 143, mirror.log()
    source_rows = source.read_all(topic, expected=200)
    where = {rec.value: (p, o) for p, o, rec in source_rows}
    assert all(where[rec.value] == (p, o) for p, o, rec in target_rows)


def test_keyed_records_land_where_a_java_producer_puts_them(tmp_path, source, target, files):
    """murmur2 partitioning: Java's partition for key k is toPositive(murmur2(k)) % n."""
    topic = source.create_topic("murmur", partitions=5)
    source.seed(topic, make_records(100))
    mirror = MirrorProcess(mirror_args(files, topic), tmp_path / "m.log")
    try:
        rows = target.read_all(topic, expected=100, timeout_s=60)
    finally:
        mirror.stop(signal.SIGTERM)
    assert all(p == java_partition(rec.key, 5) for p, _o, rec in rows)
    assert_order_per_key(rows)


def test_num_streams_threads_share_the_work_with_cooperative_sticky(tmp_path, source, target):
    topic = source.create_topic("coop", partitions=6)
    files = mirror_files(tmp_path, source, target, consumer={
        "partition.assignment.strategy": "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"})
    source.seed(topic, make_records(600))
    mirror = MirrorProcess(mirror_args(files, topic, "--num.streams", "3",
                                       "--offset.commit.interval.ms", "300"), tmp_path / "m.log")
    try:
        rows = target.read_all(topic, expected=600, timeout_s=90)
        assert len(rows) == 600
        assert_order_per_key(rows)
        wait_until(lambda: sum(source.committed(files.group, topic).values()) == 600, 30, "all committed")
        # The records can be done before the last thread's turn: when two members join before the
        # third, it gets its share at the next rebalance, about a second later (README, Performance).
        for i in range(3):
            mirror.wait_for_log(f"[mirrormaker-thread-{i}] Assigned", 30)
    finally:
        assert mirror.stop(signal.SIGTERM) == 143, mirror.log()


def test_a_matching_topic_created_later_is_picked_up(tmp_path, source, target, files):
    prefix = unique("late")
    first = source.create_topic(name=f"{prefix}-a")
    source.seed(first, make_records(10))
    mirror = MirrorProcess(mirror_args(files, f"{prefix}-.*"), tmp_path / "m.log")
    try:
        target.read_all(first, expected=10, timeout_s=60)
        second = source.create_topic(name=f"{prefix}-b", partitions=2)
        source.seed(second, make_records(20))
        rows = target.read_all(second, expected=20, timeout_s=60)
        assert Counter(rec.value for _p, _o, rec in rows) == Counter(r.value for r in make_records(20))
    finally:
        assert mirror.stop(signal.SIGTERM) == 143, mirror.log()


@pytest.mark.needs_kafka_feature("a deleted topic's metadata that librdkafka survives (see the next test)")
def test_a_source_topic_deleted_while_mirroring(tmp_path, source, target, files):
    """Kafka's MirrorMakerIntegrationTest.testCommitOffsetsRemoveNonExistentTopics: the mirror
    keeps mirroring the other topics, and the deleted topic's offsets are dropped, not retried."""
    prefix = unique("del")
    doomed, kept = f"{prefix}-a", f"{prefix}-b"
    for name in (doomed, kept):
        source.create_topic(name=name, partitions=2)
    mirror = MirrorProcess(mirror_args(files, f"{prefix}-.*", "--offset.commit.interval.ms", "300"),
                           tmp_path / "m.log")
    stream = BackgroundProducer(source, kept, rate=200).start()
    try:
        source.seed(doomed, make_records(100, "doomed"))
        target.read_all(doomed, expected=100, timeout_s=60)
        wait_until(lambda: sum(source.committed(files.group, doomed).values()) == 100, 30, "a commit on both")
        source.delete_topics(doomed)
        mirror.wait_for_log(f"-['{doomed}']", 30)  # the subscription drops it
        after = len(stream.acked)
        wait_until(lambda: len(stream.acked) > after + 400, 30, "the producer to go on")
        acked = stream.stop()
        target.read_values(kept, acked, timeout_s=60)
        assert mirror.process.poll() is None, mirror.log()
        wait_until(lambda: sum(source.committed(files.group, kept).values()) >= len(acked), 30,
                   "the kept topic committed to its end")
    finally:
        stream.stop()
        status = mirror.stop(signal.SIGTERM)
    assert status == 143, mirror.log()
    assert " ERROR " not in mirror.log()


@pytest.mark.skipif(not on_tansu(), reason="a crash only Tansu's metadata triggers")
def test_on_tansu_a_deleted_topic_crashes_librdkafka_and_a_restart_loses_nothing(tmp_path, source, target, files):
    """On Tansu, deleting a subscribed topic makes librdkafka 2.16 crash (SIGSEGV, exit -11) right
    after 'Topic (null) not found in cache', in rd_kafka_metadata_update_op: the crash site of
    https://github.com/confluentinc/librdkafka/issues/5280. What systemd's Restart=on-failure (or
    Spark's job restart) then does must lose nothing."""
    prefix = unique("del")
    doomed, kept = f"{prefix}-a", f"{prefix}-b"
    for name in (doomed, kept):
        source.create_topic(name=name, partitions=2)
    args = mirror_args(files, f"{prefix}-.*", "--offset.commit.interval.ms", "300")
    mirror = MirrorProcess(args, tmp_path / "crashed.log")
    stream = BackgroundProducer(source, kept, rate=200).start()
    try:
        wait_until(lambda: sum(source.committed(files.group, kept).values()) > 50, 60, "a first commit")
        source.delete_topics(doomed)
        assert mirror.wait(60) == -signal.SIGSEGV, mirror.log()
        mirror = MirrorProcess(args, tmp_path / "restarted.log")  # systemd: Restart=on-failure
        mirror.wait_for_log("Assigned", 60)
    finally:
        acked = stream.stop()
    try:
        target.read_values(kept, acked, timeout_s=90)
    finally:
        assert mirror.stop(signal.SIGTERM) == 143, mirror.log()
