"""Handlers and listeners loaded by dotted path, partition handling, threads and topic pick-up."""

import signal
from collections import Counter

from ..java_partitioner import java_partition
from .harness import (ROOT, MirrorProcess, assert_order_per_key, make_records, mirror_args, mirror_files,
                      unique, wait_until)

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
        log = mirror.log()
        for i in range(3):
            assert f"[mirrormaker-thread-{i}] Assigned" in log
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
