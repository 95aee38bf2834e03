"""Exact failover on Apache Kafka: in every mode that keeps partitions, a consumer group's
checkpoint and synced offset put it at the target offset of the first record it had not read,
whatever its offset (at 0, between two syncs, at the end, committed again after more records),
with a transactional source (its markers and an aborted transaction leave gaps) and with an
exactly-once target (its markers take offsets); Kafka's ``RemoteClusterUtils`` reads the same;
a restart of the mirror moves no checkpoint back; and syncs follow the records, not the commit
interval."""

from __future__ import annotations

import bisect
from collections import Counter
from typing import Dict, List, Tuple

import pytest
from confluent_kafka import Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from mirror_maker.records import TopicPartition
from mirror_maker.replication.formats import decode_checkpoint
from mirror_maker.replication.translate import translate_offsets

from ..brokers.java_mirror_makers import mirror_client_offsets
from .harness import MirrorProcess, make_records, mirror_args, mirror_files, unique, wait_until

pytestmark = pytest.mark.needs_kafka_feature("consumer group offsets administered on the target")

PARTITIONS, PER_PARTITION = 2, 1500
FAILOVER = ("--replication.policy.class", "default", "--source.cluster.alias", "a", "--target.cluster.alias", "b",
            "--emit.offset-syncs.enabled", "true", "--emit.checkpoints.enabled", "true",
            "--emit.checkpoints.interval.seconds", "1", "--sync.group.offsets.enabled", "true",
            "--sync.group.offsets.interval.seconds", "1")
HANDLER = ("--message.handler", "mirror_maker.handlers.PartitionPreservingHandler")
MODES = {"records": (*HANDLER, *FAILOVER), "raw": ("--use.raw.bytes", *FAILOVER),
         "exactly-once": (*HANDLER, *FAILOVER, "--exactly.once")}
#: How long checkpoints may take to reach where the test expects them, on a loaded machine.
CHECKPOINTS_WAIT_S = 90


def _plain_source(source) -> str:
    topic = source.create_topic("exact", partitions=PARTITIONS)
    for partition in range(PARTITIONS):
        source.seed(topic, make_records(PER_PARTITION, prefix=f"p{partition}"), partition=partition)
    return topic


def _transactional_source(source) -> str:
    """Transactions of uneven sizes, one of them aborted: a marker after each, on both partitions."""
    topic = source.create_topic("exact-txn", partitions=PARTITIONS)
    producer = Producer({"bootstrap.servers": source.bootstrap, "transactional.id": unique("txn"), "linger.ms": 5})
    producer.init_transactions(30)
    for number, size in enumerate((300, 7, 450, 1, 200, 333, 120, 90)):  # 309..758 aborted
        producer.begin_transaction()
        for i in range(size):
            for partition in range(PARTITIONS):
                producer.produce(topic, f"t{number}-{partition}-{i}".encode(), f"k{i % 13}".encode(),
                                 partition=partition)
        producer.flush(30)
        (producer.abort_transaction if number == 2 else producer.commit_transaction)(30)
    return topic


SOURCES = {"plain": _plain_source, "transactional": _transactional_source}


def _commit(cluster, group: str, topic: str, offsets: Dict[int, int]) -> None:
    consumer = cluster.consumer(group=group)
    try:
        consumer.commit(offsets=[KafkaTopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False)
    finally:
        consumer.close()


def _partition_rows(cluster, topic: str) -> Dict[int, List[Tuple[int, bytes]]]:
    """Each partition's (offset, value) as a read_committed consumer reads them."""
    rows: Dict[int, List[Tuple[int, bytes]]] = {}
    for partition, offset, rec in cluster.read_all(topic, **{"isolation.level": "read_committed"}):
        rows.setdefault(partition, []).append((offset, rec.value))
    return rows


def _resumes_at(source_rows, target_rows, target_ends, partition: int, group_offset: int):
    """Where a group that committed ``group_offset`` on the source must resume on the target:
    (the target offset of the first record it had not read, that record's value), or the
    partition's end and None when it read everything."""
    on_target = {value: offset for offset, value in target_rows.get(partition, [])}
    source = source_rows.get(partition, [])
    unread = source[bisect.bisect_left(source, (group_offset, b"")):]
    if not unread:
        return target_ends[partition], None
    value = unread[0][1]
    return on_target[value], value


def _first_read_from(target_rows, partition: int, offset: int):
    """The value a read_committed consumer of the target reads first from ``offset`` (None: none)."""
    rows = target_rows.get(partition, [])
    at = bisect.bisect_left(rows, (offset, b""))
    return rows[at][1] if at < len(rows) else None


#: The transactional source in every mode (its gaps are the hard part), the plain one where the
#: mirror's own gaps are the only ones (records mode: none; an exactly-once target: its markers).
CASES = [("records", "plain"), ("exactly-once", "plain"), *((mode, "transactional") for mode in MODES)]


@pytest.mark.parametrize("mode, kind", CASES, ids=[f"{mode}-{kind}" for mode, kind in CASES])
def test_every_group_resumes_on_the_target_at_its_first_unread_record(tmp_path, source, target, mode, kind):
    topic = SOURCES[kind](source)
    remote = f"a.{topic}"
    source_rows = _partition_rows(source, topic)
    ends = {p: rows[-1][0] + 1 for p, rows in source_rows.items()}
    # Groups at 0, at the end, and at offsets that are multiples of nothing (inside the aborted
    # transaction too), one of them committed again later, after more records.
    groups = {unique("at-zero"): {p: 0 for p in range(PARTITIONS)},
              unique("at-end"): dict(ends),
              unique("between"): {0: 737, 1: 1211},
              unique("aborted"): {0: 500, 1: 759},  # in the transactional source: an aborted record, its marker
              unique("again"): {0: 1, 1: 99}}
    for group, offsets in groups.items():
        _commit(source, group, topic, offsets)
    files = mirror_files(tmp_path, source, target, consumer={"isolation.level": "read_committed"})
    names = "|".join(groups)
    mirror = MirrorProcess(mirror_args(files, topic, *MODES[mode], "--groups", names), tmp_path / "mirror.log")
    try:
        wait_until(lambda: target.holds(remote, sum(len(r) for r in source_rows.values())), 120,
                   "the target holding every record")
        again = next(g for g in groups if g.startswith("again"))
        more = make_records(40, prefix="more")
        source.seed(topic, more, partition=0)
        groups[again] = {0: ends[0] + 17, 1: 1203}
        _commit(source, again, topic, groups[again])
        source_rows = _partition_rows(source, topic)
        wait_until(lambda: target.holds(remote, sum(len(r) for r in source_rows.values())), 120,
                   "the target holding the records produced later")
        target_rows = _partition_rows(target, remote)
        target_ends = target.end_offsets(remote)
        expected = {group: {p: _resumes_at(source_rows, target_rows, target_ends, p, o) for p, o in offsets.items()}
                    for group, offsets in groups.items()}

        def placed(group: str) -> bool:
            try:
                translated = translate_offsets({"bootstrap.servers": target.bootstrap}, group, "a", timeout_s=20)
            except LookupError:
                return False
            return all(_exact(translated.get(TopicPartition(remote, p)), want, target_rows, p, mode)
                       for p, want in expected[group].items())

        for group in groups:
            wait_until(lambda: placed(group), CHECKPOINTS_WAIT_S, f"the checkpoints of {group} placed exactly",
                       evidence=lambda: f"expected {expected[group]}, translated {_translated_or_none(target, group, remote)}"
                                        f"\n{mirror.log_tail()}")
            wait_until(lambda: target.committed(group, remote) == _translated(target, group, remote),
                       CHECKPOINTS_WAIT_S, f"the offsets of {group} synced on the target")
        before = {group: _translated(target, group, remote) for group in groups}
        java = mirror_client_offsets(target.bootstrap, "a", list(groups))
        assert java == {group: {f"{remote} {p}": o for p, o in offsets.items()} for group, offsets in before.items()}
    finally:
        assert mirror.stop() == 143, mirror.log()
    written = _checkpoint_records(target)

    # A restart reads the checkpoints written before it and moves none back: once a group that
    # moved on has its new checkpoint (its rounds ran), every other one is where it was.
    restarted = MirrorProcess(mirror_args(files, topic, *MODES[mode], "--groups", names), tmp_path / "again.log")
    try:
        restarted.wait_for_log("checkpoints written before this start", 60)
        moved = {**groups[again], 0: groups[again][0] + 5}
        _commit(source, again, topic, moved)
        wait_until(lambda: _translated(target, again, remote)[0] > before[again][0], CHECKPOINTS_WAIT_S,
                   "a checkpoint after the restart", evidence=restarted.log_tail)
        after = _checkpoint_records(target)
        for group in groups:
            if group != again:  # none written again: the ones before the start were read
                assert _translated(target, group, remote) == before[group] and after[group] == written[group], group
    finally:
        assert restarted.stop() == 143, restarted.log()


def _checkpoint_records(target) -> Counter:
    """How many checkpoint records each group has in the target's checkpoints topic."""
    return Counter(decode_checkpoint(rec.key, rec.value).group
                   for _p, _o, rec in target.read_all("a.checkpoints.internal"))


def _exact(translated, want, target_rows, partition: int, mode: str) -> bool:
    """0 records read again and 0 skipped: at the expected offset; an exactly-once target's commit
    markers take offsets, where a read_committed consumer reads the same first record."""
    offset, value = want
    if translated is None:
        return False
    if translated == offset:
        return True
    return mode == "exactly-once" and translated < offset and _first_read_from(target_rows, partition, translated) == value


def _translated(target, group: str, remote: str) -> Dict[int, int]:
    translated = translate_offsets({"bootstrap.servers": target.bootstrap}, group, "a", timeout_s=20)
    return {tp.partition: o for tp, o in translated.items() if tp.topic == remote}


def test_syncs_follow_the_records_not_a_60_s_commit_interval(tmp_path, source, target, files):
    """MirrorMaker 2's dedicated mode commits every 60 s (offset.flush.interval.ms): a group's
    checkpoint still comes within seconds of its records reaching the target."""
    topic = _plain_source(source)
    remote = f"a.{topic}"
    group = unique("early")
    _commit(source, group, topic, {0: 1000, 1: 321})
    mirror = MirrorProcess(mirror_args(files, topic, *MODES["records"], "--groups", group,
                                       "--offset.commit.interval.ms", "60000"), tmp_path / "mirror.log")
    try:
        wait_until(lambda: target.holds(remote, PARTITIONS * PER_PARTITION), 120, "the target holding every record")
        # Within seconds (a second's commit, a second's checkpoint, a loaded machine), not 60 s.
        wait_until(lambda: _translated_or_none(target, group, remote) == {0: 1000, 1: 321}, 20,
                   "the group's checkpoints", evidence=mirror.log_tail)
        assert "Offsets are committed every 1000 ms (emit.checkpoints.interval.seconds)" in mirror.log()
    finally:
        assert mirror.stop() == 143, mirror.log()


def _translated_or_none(target, group: str, remote: str):
    try:
        return _translated(target, group, remote)
    except LookupError:
        return None
