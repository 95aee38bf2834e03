"""Consumer failover on Apache Kafka: a group that read part of a topic on the source resumes on
the target where the mirror's checkpoints say, missing nothing; MirrorMaker 2's own client
(RemoteClusterUtils) reads our checkpoints and heartbeats and translates the same; a group active
on the target is never overwritten."""

from __future__ import annotations

import threading
from collections import Counter

import pytest
from confluent_kafka import TopicPartition as KafkaTopicPartition

from mirror_maker.replication.translate import translate_offsets
from mirror_maker.records import TopicPartition

from ..brokers.java_mirror_makers import mirror_client_check
from .harness import MirrorProcess, make_records, mirror_args, unique, wait_until

pytestmark = pytest.mark.needs_kafka_feature("consumer group offsets administered on the target")

FAILOVER = ("--message.handler", "mirror_maker.handlers.PartitionPreservingHandler",
            "--replication.policy.class", "default", "--source.cluster.alias", "a", "--target.cluster.alias", "b",
            "--emit.offset-syncs.enabled", "true", "--emit.checkpoints.enabled", "true",
            "--emit.checkpoints.interval.seconds", "1", "--sync.group.offsets.enabled", "true",
            "--sync.group.offsets.interval.seconds", "1", "--emit.heartbeats.enabled", "true",
            "--offset.commit.interval.ms", "1000")


def read_and_commit(cluster, group, topic, count):
    """A consumer group reads ``count`` records of ``topic`` and commits where it stopped."""
    consumer = cluster.consumer(group=group, **{"enable.partition.eof": False})
    consumer.subscribe([topic])
    seen = []
    try:
        while len(seen) < count:
            for msg in consumer.consume(min(100, count - len(seen)), 1.0):
                if msg.error() is None:
                    seen.append((msg.partition(), msg.offset(), msg.value()))
        positions = {}
        for partition, offset, _value in seen:
            positions[partition] = max(positions.get(partition, 0), offset + 1)
        consumer.commit(offsets=[KafkaTopicPartition(topic, p, o) for p, o in positions.items()], asynchronous=False)
    finally:
        consumer.close()
    return seen


def read_from_committed(cluster, group, topic):
    """The group on ``cluster`` reads from its committed offsets to the end of ``topic``."""
    consumer = cluster.consumer(group=group)
    n = cluster.partitions(topic)
    committed = cluster.committed(group, topic)
    consumer.assign([KafkaTopicPartition(topic, p, committed[p]) for p in range(n)])
    rows, at_end = [], set()
    try:
        while len(at_end) < n:
            for msg in consumer.consume(1000, 1.0):
                if msg.error() is not None:
                    at_end.add(msg.partition())
                else:
                    rows.append((msg.partition(), msg.offset(), msg.value()))
    finally:
        consumer.close()
    return rows


#: Raw mode keeps partitions with its own handler: the failover options without a handler.
RAW_FAILOVER = ("--use.raw.bytes", *FAILOVER[2:])


@pytest.mark.parametrize("mode, topic_config", [
    (FAILOVER, {}),
    (RAW_FAILOVER, {}),  # batches forwarded as they are
    # Every batch through raw mode's record path (its DEBUG line names each range).
    ((*RAW_FAILOVER, "--log.level", "DEBUG"), {"message.timestamp.type": "LogAppendTime"}),
    # Transactions: each commit marker takes a target offset after the records it commits.
    ((*FAILOVER, "--exactly.once"), {}),
], ids=["records", "raw", "raw-record-path", "exactly-once"])
def test_a_group_fails_over_to_the_target_missing_nothing(tmp_path, source, target, files, mode, topic_config):
    topic = source.create_topic("failover", partitions=2, config=topic_config)
    records = make_records(1000)
    source.seed(topic, records)
    group = unique("app")
    on_source = read_and_commit(source, group, topic, 600)
    mirror = MirrorProcess(mirror_args(files, topic, *mode, "--groups", group), tmp_path / "mirror.log")
    remote = f"a.{topic}"
    try:
        target.read_values(remote, [r.value for r in records])
        wait_until(lambda: len(target.committed(group, remote)) == 2, 60, "the group's offsets synced to the target")
        translated = translate_offsets({"bootstrap.servers": target.bootstrap}, group, "a")
        java = mirror_client_check(target.bootstrap, "a", group)
    finally:
        assert mirror.stop() == 143, mirror.log()
    committed = target.committed(group, remote)
    assert translated == {TopicPartition(remote, p): o for p, o in committed.items()}
    assert sorted(line for line in java if line.startswith("offset")) == \
        sorted(f"offset {remote} {p} {o}" for p, o in committed.items())
    assert "heartbeat a b" in java
    on_target = read_from_committed(target, group, remote)
    values_source = Counter(v for _p, _o, v in on_source)
    values_target = Counter(v for _p, _o, v in on_target)
    assert set(values_source) | set(values_target) == {r.value for r in records}  # nothing missed
    again = sum((values_source & values_target).values())
    assert again == 0, f"{again} records read again after the failover"  # the translation is exact
    assert "Synced the offsets of group" in mirror.log()
    if topic_config:
        assert "(LogAppendTime, " in mirror.log()


def test_a_group_active_on_the_target_is_never_overwritten(tmp_path, source, target, files):
    topic = source.create_topic("active", partitions=1)
    source.seed(topic, make_records(300))
    group = unique("busy")
    read_and_commit(source, group, topic, 200)
    remote = f"a.{topic}"
    target.create_topic(name=remote, partitions=1)
    stop = threading.Event()
    active = target.consumer(group=group, **{"enable.partition.eof": False})
    active.subscribe([remote])

    def poll():
        while not stop.is_set():
            active.poll(0.2)
    poller = threading.Thread(target=poll, daemon=True)
    poller.start()
    mirror = MirrorProcess(mirror_args(files, topic, *FAILOVER, "--groups", group), tmp_path / "mirror.log")
    try:
        wait_until(lambda: _translated(target, group), 60, "a checkpoint for the group")
        wait_until(lambda: "Wrote" in mirror.log(), 30, "checkpoints written")
        assert target.committed(group, remote) == {}  # active: left alone
        stop.set()
        poller.join(10)
        active.close()  # the group is empty now: the next sync moves it
        wait_until(lambda: target.committed(group, remote) == {0: _translated(target, group)[TopicPartition(remote, 0)]},
                   60, "the offsets synced once the group is empty")
    finally:
        stop.set()
        assert mirror.stop() == 143, mirror.log()


def _translated(target, group):
    try:
        return translate_offsets({"bootstrap.servers": target.bootstrap}, group, "a", timeout_s=10)
    except LookupError:
        return {}
