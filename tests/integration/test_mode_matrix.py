"""Every guarantee for every mode (record, raw, exactly-once), on the same tests: the one copy loop
owns start positions, resets, refusals, rollbacks and stops, so each holds in each mode.

The bounces, the target outage and Spark's two tasks are parametrized by mode where they were
written first (test_reliability.py, test_spark.py), with ``MODES`` from the harness.
"""

from __future__ import annotations

import signal
import time
from collections import Counter, defaultdict
from typing import Dict, List

import pytest
from confluent_kafka import Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from ..budgets import setup_budget
from .harness import (MODE_IDS, MODES, BackgroundProducer, MirrorProcess, Rec, make_records, mirror_args,
                      mirror_files, unique, values, wait_until)


def by_key(rows) -> Dict[bytes, List]:
    """Each key's values in target order (per partition, by offset)."""
    out = defaultdict(list)
    for _partition, _offset, rec in sorted(rows, key=lambda row: (row[0], row[1])):
        out[rec.key].append(rec.value)
    return dict(out)


def error_lines(mirror) -> List[str]:
    return [line for line in mirror.log().splitlines() if " ERROR " in line]


# -- where a partition without a committed offset starts ----------------------------------------

@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
def test_auto_offset_reset_none_without_a_committed_offset_stops_naming_the_partitions(tmp_path, source, target,
                                                                                        mode):
    """Kafka's MirrorMaker v1 fails (NoOffsetForPartitionException): a lost offset never goes
    unnoticed. Nothing is mirrored or committed, one ERROR line, exit 255."""
    topic = source.create_topic("reset-none", partitions=2)
    source.seed(topic, make_records(50))
    files = mirror_files(tmp_path, source, target, consumer={"auto.offset.reset": "none"})
    mirror = MirrorProcess(mirror_args(files, topic, *mode.args), tmp_path / "m.log")
    assert mirror.wait(60) == 255, mirror.log()
    (line,) = error_lines(mirror)
    assert "auto.offset.reset=none" in line and f"{topic}-0" in line and f"{topic}-1" in line, line
    assert mode.committed(source, target, files.group, topic) == {}
    assert not target.topic_exists(topic) or target.count(topic) == 0
    assert "Traceback" not in mirror.log()


@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
def test_auto_offset_reset_earliest_mirrors_the_backlog(tmp_path, source, target, mode):
    topic = source.create_topic("reset-earliest", partitions=2)
    records = make_records(100)
    source.seed(topic, records)
    files = mirror_files(tmp_path, source, target, consumer={"auto.offset.reset": "earliest"})
    mirror = MirrorProcess(mirror_args(files, topic, *mode.args, "--exit.when.caught.up"), tmp_path / "m.log")
    assert mirror.wait(90) == 0, mirror.log()
    assert Counter(values(target.read_all(topic, expected=100))) == Counter(r.value for r in records)
    assert sum(mode.committed(source, target, files.group, topic).values()) == 100


@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
def test_auto_offset_reset_latest_starts_at_the_end_and_makes_that_start_durable_at_once(tmp_path, source, target,
                                                                                         mode):
    """What was there before the reset is skipped (the user's choice); what arrives after the
    "Resetting offset" line is mirrored. The start is committed at once, long before the commit
    interval: a crash before the first commit would otherwise reset again, past what arrived."""
    topic = source.create_topic("reset-latest", partitions=1)
    source.seed(topic, make_records(50, "old"))
    files = mirror_files(tmp_path, source, target, consumer={"auto.offset.reset": "latest"})
    mirror = MirrorProcess(mirror_args(files, topic, *mode.args, "--offset.commit.interval.ms", "600000"),
                           tmp_path / "m.log")
    try:
        mirror.wait_for_log("Resetting offset for partition", 60)
        wait_until(lambda: mode.committed(source, target, files.group, topic) == {0: 50}, 30,
                   "the start committed before any record and before the commit interval")
        mirror.kill()  # a crash: nothing flushed or committed since
        new = make_records(30, "new")
        source.seed(topic, new)
        mirror = MirrorProcess(mirror_args(files, topic, *mode.args, "--exit.when.caught.up"), tmp_path / "m2.log")
        assert mirror.wait(90) == 0, mirror.log()
    finally:
        mirror.kill()
    assert sorted(values(target.read_all(topic, expected=30))) == sorted(r.value for r in new)


# -- a record the target refuses -----------------------------------------------------------------

def _refused_in_the_middle(source, target, topic_name: str) -> List[bytes]:
    """100 records, one of 20 KB the target topic refuses (max.message.bytes 10000), 100 more;
    each part its own batch, so that raw mode's batches hold only one of them."""
    topic = source.create_topic("refused", partitions=1, name=topic_name)
    source.seed(topic, make_records(100, "before"), partition=0)
    source.seed(topic, make_records(1, "big", size=20000), partition=0)
    source.seed(topic, make_records(100, "after"), partition=0)
    from confluent_kafka.admin import NewTopic

    remote = f"src.{topic}"
    target.admin().create_topics([NewTopic(remote, 1, config={"max.message.bytes": "10000"})])[remote].result()
    wait_until(lambda: target.partitions(remote) == 1, 15, "the target topic")
    return [r.value for r in make_records(100, "before") + make_records(100, "after")]


POLICY = ["--replication.policy.class", "default", "--source.cluster.alias", "src",
          "--target.cluster.alias", "dst"]


@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
def test_a_refused_record_with_abort_false_is_counted_skipped_and_the_rest_reaches_the_policy_s_topic(
        tmp_path, source, target, mode):
    topic = unique("refused")
    expected = _refused_in_the_middle(source, target, topic)
    files = mirror_files(tmp_path, source, target, producer={"batch.size": 8192})
    mirror = MirrorProcess(mirror_args(files, topic, *mode.args, *POLICY, "--abort.on.send.failure", "false",
                                       "--exit.when.caught.up"), tmp_path / "m.log")
    assert mirror.wait(120) == 0, mirror.log()
    rows = target.read_all(f"src.{topic}", expected=200)
    assert sorted(values(rows)) == sorted(expected)  # each once, the refused one skipped
    assert mode.committed(source, target, files.group, topic, f"src.{topic}") == {0: 201}
    assert "dropped; --abort.on.send.failure is false" in mirror.log()
    assert "1 dropped" in mirror.log()  # the summary counts it
    assert not target.topic_exists(topic)  # never the source's name


@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
def test_a_refused_record_with_abort_true_stops_with_nothing_committed_past_it_and_nothing_left_open(
        tmp_path, source, target, mode):
    """Exit 255, one ERROR line, the offset stays before the record; and no transaction is left
    open on the target, which would hold its read_committed readers for transaction.timeout.ms."""
    from confluent_kafka import IsolationLevel
    from confluent_kafka.admin import OffsetSpec

    topic = unique("refused")
    _refused_in_the_middle(source, target, topic)
    # Refused by the producer itself, so that the line can name the record (the target's own
    # refusal of a record comes back without it: test_parity_with_kafka_mirror_maker.py).
    files = mirror_files(tmp_path, source, target, producer={"batch.size": 8192, "max.request.size": 10000})
    for attempt in range(2):  # a restart stops at the same record rather than skip it
        mirror = MirrorProcess(mirror_args(files, topic, *mode.args, *POLICY, "--offset.commit.interval.ms", "60000"),
                               tmp_path / f"m{attempt}.log")
        assert mirror.wait(90) == 255, mirror.log()
        (line,) = error_lines(mirror)
        assert f"{topic}-0 offset" in line and "large" in line.lower(), line
        assert "Traceback" not in mirror.log()
        assert mode.committed(source, target, files.group, topic, f"src.{topic}").get(0, 0) <= 100
    remote = KafkaTopicPartition(f"src.{topic}", 0)

    def end(isolation):
        answer = target.admin().list_offsets({remote: OffsetSpec.latest()}, isolation_level=isolation)
        return answer[remote].result().offset

    assert end(IsolationLevel.READ_COMMITTED) == end(IsolationLevel.READ_UNCOMMITTED)  # nothing open


# -- transactional, compacted and truncated sources ----------------------------------------------------

def _transactional_source(source) -> tuple:
    """Transactions committed, aborted, committed, and one left open at the end."""
    topic = source.create_topic("txn-source", partitions=1)
    producer = Producer({"bootstrap.servers": source.bootstrap, "transactional.id": unique("txn"), "linger.ms": 5})
    producer.init_transactions(30)
    for name, commit in (("c1", True), ("a1", False), ("c2", True)):
        producer.begin_transaction()
        for i in range(10):
            producer.produce(topic, f"{name}-{i}".encode(), f"k{i}".encode(), partition=0)
        producer.flush(30)
        (producer.commit_transaction if commit else producer.abort_transaction)(30)
    producer.begin_transaction()
    for i in range(5):
        producer.produce(topic, f"open-{i}".encode(), f"k{i}".encode(), partition=0)
    producer.flush(30)
    return topic, producer


@pytest.mark.needs_kafka_feature("read_committed that hides aborted transactions")
@pytest.mark.parametrize("isolation", ["read_committed", "read_uncommitted"])
@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
def test_a_transactional_source_with_markers_and_an_open_transaction(tmp_path, source, target, mode, isolation):
    """read_committed mirrors the committed records and stops at the open transaction, which a
    bounded run does not wait out (its lag counts to the last stable offset); read_uncommitted
    mirrors every record, the aborted and the open ones too. Markers never go to the target (Kafka
    refuses them from a producer)."""
    topic, open_transaction = _transactional_source(source)
    try:
        files = mirror_files(tmp_path, source, target, consumer={"isolation.level": isolation})
        mirror = MirrorProcess(mirror_args(files, topic, *mode.args, "--exit.when.caught.up"), tmp_path / "m.log")
        assert mirror.wait(60) == 0, mirror.log()
    finally:
        open_transaction.abort_transaction(30)
    rows = target.read_all(topic, **{"isolation.level": "read_uncommitted"})
    got = sorted(values(rows))
    committed = [f"{name}-{i}".encode() for name in ("c1", "c2") for i in range(10)]
    if isolation == "read_committed":
        assert got == sorted(committed)
    else:
        assert got == sorted(committed + [f"a1-{i}".encode() for i in range(10)]
                             + [f"open-{i}".encode() for i in range(5)])
    assert "Traceback" not in mirror.log() and not error_lines(mirror)


#: Seeding 6,000 records of 700 bytes, and the log cleaner leaving holes in both partitions.
COMPACTED_SEED_S, COMPACTED_HOLES_S = 60, 90


@pytest.fixture(scope="module")
@setup_budget(COMPACTED_SEED_S + COMPACTED_HOLES_S + 60)  # + one look of holes() past the deadline
def compacted(clusters):
    """A compacted source with offset holes and tombstones: 2 partitions, keys written again and
    again, a third of them deleted; waited for until the cleaner left holes in both partitions."""
    import os

    source = clusters[0]

    topic = source.create_topic("compacted", partitions=2, config={
        "cleanup.policy": "compact", "segment.bytes": str(1 << 20),  # Kafka 4's smallest segment
        "min.cleanable.dirty.ratio": "0.01", "min.compaction.lag.ms": "0", "delete.retention.ms": "3600000"})
    base_ts = int(time.time() * 1000) - 60_000
    records = [Rec(f"k{i % (150 if i < 4000 else 75)}".encode(),
                   None if i >= 5900 and i % 3 == 0 else f"v{i}-".encode() + os.urandom(700),
                   (("seq", str(i).encode()),), base_ts + i) for i in range(6000)]
    source.seed(topic, records, **{"compression.type": "lz4", "linger.ms": 20})

    def holes():
        offsets = defaultdict(list)
        for partition, offset, _rec in source.read_all(topic):
            offsets[partition].append(offset)
        return len(offsets) == 2 and all(max(o) + 1 > len(o) for o in offsets.values())

    wait_until(holes, COMPACTED_HOLES_S, "the source's log cleaner to leave holes in both partitions", step_s=1.0)
    return topic, source.read_all(topic)


@pytest.mark.needs_kafka_feature("a log cleaner that compacts")
@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
def test_a_compacted_source_with_tombstones_and_offset_holes(tmp_path, source, target, compacted, mode):
    """Each surviving record once, tombstones too, in order per key; the offsets committed at
    each partition's end, past the holes."""
    topic, kept = compacted
    remote = f"{mode.name}.{topic}"
    files = mirror_files(tmp_path, source, target)
    mirror = MirrorProcess(mirror_args(files, topic, *mode.args, "--replication.policy.class",
                                       "default", "--source.cluster.alias", mode.name,
                                       "--target.cluster.alias", "dst", "--exit.when.caught.up"), tmp_path / "m.log")
    assert mirror.wait(120) == 0, mirror.log()
    rows = target.read_all(remote, expected=len(kept))
    assert by_key(rows) == by_key(kept) and len(rows) == len(kept)
    ends = {}
    for partition, offset, _rec in kept:
        ends[partition] = max(ends.get(partition, 0), offset + 1)
    committed = mode.committed(source, target, files.group, topic, remote)
    assert all(committed.get(p, 0) >= end for p, end in ends.items()), (committed, ends)


@pytest.mark.needs_kafka_feature("DeleteRecords")
@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
def test_records_deleted_before_they_were_mirrored_are_counted_and_the_mirror_goes_on(tmp_path, source, target,
                                                                                      mode):
    """The committed offset is out of range: retention deleted everything after it. One WARN line
    counts the records lost, the new position is committed, and the lag is measured from there:
    a bounded run ends (it waited for ever on the old position's lag, with nothing left to read)."""
    from confluent_kafka import ConsumerGroupTopicPartitions

    topic = source.create_topic("retention", partitions=1)
    source.seed(topic, make_records(100), partition=0)
    files = mirror_files(tmp_path, source, target, consumer={"auto.offset.reset": "earliest"})
    group_cluster = target if mode.exactly_once else source
    if mode.exactly_once:
        target.create_topic(name=topic)  # a group's offsets name a topic its cluster has
    request = ConsumerGroupTopicPartitions(files.group, [KafkaTopicPartition(topic, 0, 10)])
    group_cluster.admin().alter_consumer_group_offsets([request])[files.group].result()
    list(source.admin().delete_records([KafkaTopicPartition(topic, 0, 100)]).values())[0].result()
    mirror = MirrorProcess(mirror_args(files, topic, *mode.args, "--exit.when.caught.up"), tmp_path / "m.log")
    assert mirror.wait(60) == 0, mirror.log()
    warnings = [line for line in mirror.log().splitlines() if "out of range" in line]
    assert len(warnings) == 1 and "90 records were deleted by retention before they were mirrored" in warnings[0]
    assert mode.committed(source, target, files.group, topic) == {0: 100}


# -- stops ------------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
def test_sigterm_mid_stream_exits_143_in_time_and_the_restart_loses_nothing(tmp_path, source, target, report, mode):
    """A SIGTERM while records flow (mid-batch, mid-transaction): 143 within the shutdown timeout,
    no transaction left open, and after a restart every acked record is on the target (in
    exactly-once, each once)."""
    from confluent_kafka import IsolationLevel
    from confluent_kafka.admin import OffsetSpec

    topic = source.create_topic("sigterm", partitions=2)
    files = mirror_files(tmp_path, source, target, consumer={"auto.offset.reset": "earliest"})
    args = mirror_args(files, topic, *mode.args, "--num.streams", "2", "--offset.commit.interval.ms", "500",
                       "--shutdown.timeout.ms", "10000")
    stream = BackgroundProducer(source, topic, rate=1000).start()
    mirror = MirrorProcess(args, tmp_path / "m1.log")
    try:
        wait_until(lambda: target.holds(topic, 500), 60, "records on the target")
        assert mirror.stop(signal.SIGTERM, timeout_s=10 + 5) == 143, mirror.log()  # within --shutdown.timeout.ms
        assert "did not stop in time" not in mirror.log() and "not finished" not in mirror.log()
        for partition in range(2):
            remote = KafkaTopicPartition(topic, partition)
            ends = [target.admin().list_offsets({remote: OffsetSpec.latest()}, isolation_level=level)[remote]
                    .result().offset for level in (IsolationLevel.READ_COMMITTED, IsolationLevel.READ_UNCOMMITTED)]
            assert ends[0] == ends[1], f"a transaction left open on {remote}: {ends}"
        mirror = MirrorProcess(args, tmp_path / "m2.log")
        wait_until(lambda: len(stream.acked) > 3000, 60, "more records written")
    except BaseException:
        mirror.kill()  # not left running into the next test
        raise
    finally:
        acked = stream.stop()
    try:
        rows = target.read_values(topic, acked, timeout_s=120)
    finally:
        mirror.stop(signal.SIGTERM)
    counts = Counter(values(rows))
    twice = sum(n - 1 for n in counts.values() if n > 1)
    report(f"{mode.name}: SIGTERM mid-stream and a restart: {len(acked)} acked, {twice} duplicates")
    if mode.exactly_once:
        assert twice == 0
