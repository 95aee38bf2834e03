"""Exactly-once (``--exactly.once``): a read_committed reader of the target sees every source record
once, across kills, bounces, outages and a zombie; on Apache Kafka (Tansu's read_committed serves
aborted records)."""

from __future__ import annotations

import os
import re
import signal
from collections import Counter

import pytest

from .harness import (BackgroundProducer, MirrorProcess, make_records, mirror_args, mirror_files,
                      values, wait_until)

pytestmark = pytest.mark.needs_kafka_feature("read_committed that hides aborted transactions")

EOS = "--exactly.once"


def assert_exactly_once(rows, expected) -> None:
    counts = Counter(values(rows))
    missing = set(expected) - set(counts)
    duplicated = {value: n for value, n in counts.items() if n > 1}
    assert not missing, f"{len(missing)} values missing, e.g. {sorted(missing)[:5]}"
    assert not duplicated, f"{len(duplicated)} values duplicated, e.g. {list(duplicated.items())[:3]}"


def kill(*mirrors) -> None:
    for mirror in mirrors:
        if mirror is not None:
            mirror.kill()


def assert_stopped_fenced(mirror) -> None:
    """A fenced mirror stops with 255 and one ERROR line saying so."""
    assert mirror.wait(60) == 255, mirror.log()
    errors = [line for line in mirror.log().splitlines() if " ERROR " in line]
    assert len(errors) == 1 and "fenced: another mirror with the same group took over" in errors[0], errors


def check_and_stop(target, topic, stream, fenced, survivor) -> None:
    """Every record ``stream`` had acked, once on the target; then the survivor stops cleanly, the
    fenced one is gone."""
    acked = stream.stop()
    try:
        assert_exactly_once(read_committed(target, topic, acked), acked)
    except AssertionError as failed:  # where the records were and what each mirror said: seen once, under load
        named = set(re.findall(r"b'([^']+)'", str(failed)))
        where = ", ".join(f"{value.decode()} at {topic}-{partition} offset {offset}"
                          for value, (partition, offset) in sorted(stream.positions.items()) if value.decode() in named)
        # On the target but not read: in an aborted transaction, or past the last stable offset.
        uncommitted = [f"{rec.value.decode()} at {partition}:{offset}"
                       for partition, offset, rec in target.read_all(topic, timeout_s=30,
                                                                     **{"isolation.level": "read_uncommitted"})
                       if rec.value is not None and rec.value.decode() in named]
        said = "\n".join(f"{name} ({mirror.log_path}):\n" + "\n".join(mirror.log().splitlines()[-150:])
                         for name, mirror in (("fenced", fenced), ("survivor", survivor)) if mirror is not None)
        raise AssertionError(f"{failed}\non the source: {where}\non the target, read_uncommitted: "
                             f"{', '.join(uncommitted) or 'none'}\n{said}") from None
    finally:
        if survivor is not None:
            assert survivor.stop(signal.SIGTERM) == 143, survivor.log()
        fenced.kill()


def read_committed(cluster, topic, expected, timeout_s=120.0):
    """Every record a read_committed reader sees, read to the end once all of ``expected`` is
    there (a duplicate may come after the last expected value)."""
    cluster.read_values(topic, expected, timeout_s=timeout_s)
    return cluster.read_all(topic, timeout_s=timeout_s)


@pytest.mark.smoke
def test_every_record_once_and_the_offsets_on_the_target(tmp_path, source, target, files):
    topic = source.create_topic("eos", partitions=4)
    records = make_records(2000)
    source.seed(topic, records)
    mirror = MirrorProcess(mirror_args(files, topic, EOS, "--num.streams", "2", "--offset.commit.interval.ms", "300"),
                           tmp_path / "m.log")
    try:
        rows = read_committed(target, topic, [r.value for r in records])
        wait_until(lambda: sum(target.committed(files.group, topic).values()) == 2000, 30,
                   "the source offsets committed on the target, in the group named after the source group")
        wait_until(lambda: sum(source.committed(files.group, topic).values()) == 2000, 30,
                   "the best-effort commit to the source group, for lag monitoring")
    finally:
        assert mirror.stop(signal.SIGTERM) == 143, mirror.log()
    assert_exactly_once(rows, [r.value for r in records])
    log = mirror.log()
    assert "transactional.id " + f"{files.group}.eos.0" in log and f"{files.group}.eos.1" in log
    assert "2000 records mirrored in total" in log  # both shards' transactions counted, not the last one's
    assert "Traceback" not in log


@pytest.mark.slow
def test_a_zombie_cannot_commit_after_another_instance_took_over(tmp_path, source, target):
    """SIGSTOP one mirror mid-stream, start a second with the same group: it takes over every
    shard (its init_transactions aborts the first one's open transactions and fences it). SIGCONT
    the first: it cannot commit again and stops with one line; every record is there once."""
    topic = source.create_topic("eos-zombie", partitions=4)
    files = mirror_files(tmp_path, source, target)
    args = mirror_args(files, topic, EOS, "--num.streams", "2", "--offset.commit.interval.ms", "500")
    stream = BackgroundProducer(source, topic, rate=400).start()
    first = MirrorProcess(args, tmp_path / "first.log")
    second = None
    try:
        wait_until(lambda: sum(target.committed(files.group, topic).values()) > 400, 60, "the first one's transactions")
        os.kill(first.process.pid, signal.SIGSTOP)  # past any session timeout: 15 s below
        second = MirrorProcess(args, tmp_path / "second.log")
        stopped_at = sum(target.committed(files.group, topic).values())
        wait_until(lambda: sum(target.committed(files.group, topic).values()) > stopped_at + 1000, 60,
                   "the second one mirroring")
        os.kill(first.process.pid, signal.SIGCONT)
        assert_stopped_fenced(first)
    except BaseException:
        kill(first, second)  # closes their logs: a leaked one fails a later test
        raise
    finally:
        stream.stop()
    check_and_stop(target, topic, stream, first, second)


@pytest.mark.slow
def test_a_second_process_with_other_shards_fences_the_first(tmp_path, source, target):
    """Three shards running, two started with the same group: the newcomer fences its own ids'
    predecessors and, for partitions that moved between shards, their last writer (named in the
    target's offset metadata). The first one stops with one line; every record is there once."""
    topic = source.create_topic("eos-reshard", partitions=6)
    files = mirror_files(tmp_path, source, target)
    stream = BackgroundProducer(source, topic, rate=400).start()
    first = MirrorProcess(mirror_args(files, topic, EOS, "--num.streams", "3", "--offset.commit.interval.ms", "500"),
                          tmp_path / "first.log")
    second = None
    try:
        wait_until(lambda: len(target.committed(files.group, topic)) == 6, 60, "every partition committed")
        second = MirrorProcess(mirror_args(files, topic, EOS, "--num.streams", "2", "--offset.commit.interval.ms",
                                           "500"), tmp_path / "second.log")
        assert_stopped_fenced(first)
        wait_until(lambda: f"Fenced {files.group}.eos.2, the last writer of" in second.log(), 60,
                   "the old layout's third shard fenced by the new owner of its partitions")
        stopped_at = sum(target.committed(files.group, topic).values())
        wait_until(lambda: sum(target.committed(files.group, topic).values()) > stopped_at + 500, 60,
                   "the second one mirroring every partition")
    except BaseException:
        kill(first, second)  # closes their logs: a leaked one fails a later test
        raise
    finally:
        stream.stop()
    check_and_stop(target, topic, stream, first, second)


def test_a_writer_killed_between_its_offsets_and_its_commit_is_fenced_without_waiting(tmp_path, source, target,
                                                                                      files):
    """A shard of an older layout (``--num.streams`` was 3) left a transaction open after sending
    its offsets, as a SIGKILL between the two leaves it. The new layout's owner of its partitions
    learns the last writers from a read that does not wait for that transaction, fences the writer
    (which aborts it), then reads stably: it starts at once at the last committed offsets, where
    the stable read alone waited for the transaction to time out."""
    from confluent_kafka import Consumer, Producer
    from confluent_kafka import TopicPartition as KafkaTopicPartition

    topic = source.create_topic("eos-pending", partitions=2)
    by_partition = {p: make_records(100, f"p{p}") for p in range(2)}
    for partition, records in by_partition.items():
        source.seed(topic, records, partition=partition)
    target.create_topic(name=topic, partitions=2)  # offsets are taken for existing topics only
    writer = f"{files.group}.eos.2"
    conf = {**(target.client_conf or {}), "bootstrap.servers": target.bootstrap}
    producer = Producer({**conf, "transactional.id": writer, "transaction.timeout.ms": 600000})
    group = Consumer({**conf, "group.id": files.group})
    producer.init_transactions(30)
    for offset, commit in ((50, True), (80, False)):
        producer.begin_transaction()
        producer.send_offsets_to_transaction([KafkaTopicPartition(topic, p, offset, metadata=writer) for p in range(2)],
                                             group.consumer_group_metadata(), 30)
        if commit:
            producer.commit_transaction(30)
    group.close()
    mirror = MirrorProcess(mirror_args(files, topic, EOS, "--num.streams", "2", "--exit.when.caught.up"),
                           tmp_path / "m.log")
    assert mirror.wait(60) == 0, mirror.log()
    assert f"Fenced {writer}, the last writer of {topic}-" in mirror.log()
    expected = [r.value for records in by_partition.values() for r in records[50:]]
    assert_exactly_once(read_committed(target, topic, expected), expected)
    assert target.committed(files.group, topic) == {0: 100, 1: 100}


def test_migrating_from_an_at_least_once_group(tmp_path, source, target, files):
    topic = source.create_topic("eos-migrate", partitions=2)
    first, second = make_records(500, "alo"), make_records(500, "eos")
    source.seed(topic, first)
    record_mode = MirrorProcess(mirror_args(files, topic, "--exit.when.caught.up"), tmp_path / "alo.log")
    assert record_mode.wait(60) == 0, record_mode.log()
    source.seed(topic, second)
    mirror = MirrorProcess(mirror_args(files, topic, EOS, "--exit.when.caught.up"), tmp_path / "eos.log")
    assert mirror.wait(60) == 0, mirror.log()
    assert "at the source group's committed offset" in mirror.log() and "migrating from at-least-once" in mirror.log()
    assert_exactly_once(read_committed(target, topic, [r.value for r in first + second]),
                        [r.value for r in first + second])
    assert sum(target.committed(files.group, topic).values()) == 1000


@pytest.mark.slow
def test_a_shard_of_a_larger_layout_is_fenced_at_start_even_where_it_was_no_partition_s_last_writer(
        tmp_path, source, target):
    """--num.streams 3 runs, then a process with 2 starts: shard 2 of the old layout owns only
    partitions it never committed (idle ones, before its first commit interval), so no offset
    names it as a last writer; still running, it would write a partition (idle, or added later)
    that the new layout gives to another shard. The new process fences every shard of its group
    numbered 2 or more that the target's coordinators know, at once."""
    from mirror_maker.offsets.transactional import shard_of

    topic = source.create_topic("eos-layout", partitions=6)
    busy = [p for p in range(6) if shard_of(topic, p, 3) != 2]
    files = mirror_files(tmp_path, source, target)
    for p in busy:
        source.seed(topic, make_records(50, f"p{p}"), partition=p)
    # No commit in the minute the test takes: the busy shards' records wait in open transactions,
    # and nothing on the target names any shard as a partition's last writer.
    first = MirrorProcess(mirror_args(files, topic, EOS, "--num.streams", "3", "--offset.commit.interval.ms",
                                      "600000"), tmp_path / "first.log")
    second = None
    try:
        wait_until(lambda: _high_watermarks(target, topic) >= 50 * len(busy), 60,
                   "the busy partitions' records on the target, in open transactions")
        assert f"{files.group}.eos.2" in first.log()  # shard 2 runs, with nothing to write
        assert target.committed(files.group, topic) == {}
        second = MirrorProcess(mirror_args(files, topic, EOS, "--num.streams", "2", "--offset.commit.interval.ms",
                                           "500"), tmp_path / "second.log")
        second.wait_for_log(f"Fenced {files.group}.eos.2, a shard of an earlier layout (--num.streams is now 2)", 60)
        assert f"Fenced {files.group}.eos.2, the last writer of" not in second.log()  # no offset named it
    finally:
        for mirror in (first, second):
            if mirror is not None:
                mirror.kill()


def _high_watermarks(cluster, topic: str) -> int:
    """The records in ``topic``, open transactions' too (0 while a topic just made has no leader)."""
    from confluent_kafka import KafkaException

    try:
        return sum(cluster.end_offsets(topic, "read_uncommitted").values())
    except KafkaException:
        return 0
