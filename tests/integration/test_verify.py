"""``kafka-mirror-maker verify`` on Apache Kafka: a complete mirror passes in every mode (in order
where partitions are kept, as a multiset where the partitioner chose them); a record deleted,
changed or duplicated on the target is named by its partition and first offset (exit 3); a
compacted topic is compared by each key's latest record; records removed from the target by
retention are "not proven" (exit 4), never passed; ``--sample`` bounds the read."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from confluent_kafka import Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition

from .harness import BIN, MirrorProcess, make_records, mirror_args, unique

PARTITIONS, PER_PARTITION = 3, 400
POLICY = ("--replication.policy.class", "default", "--source.cluster.alias", "a", "--target.cluster.alias", "b")
KEEP = ("--message.handler", "mirror_maker.handlers.PartitionPreservingHandler")
MODES = {"records": (), "records-partitions-kept": (*KEEP, *POLICY), "raw": ("--use.raw.bytes", *POLICY),
         "exactly-once": (*KEEP, "--exactly.once")}


def _verify(files, topic: str, *extra: str, report=None):
    args = [sys.executable, str(BIN), "verify", *mirror_args(files, topic, *extra)]
    if report is not None:
        args += ["--report", str(report)]
    return subprocess.run(args, capture_output=True, text=True, timeout=240)


def _partition_records():
    """Each partition's records, made once: a second ``make_records`` would stamp other times."""
    return {partition: make_records(PER_PARTITION, prefix=f"p{partition}") for partition in range(PARTITIONS)}


def _seed_partitions(cluster, topic: str, records, changes=None) -> None:
    for partition in range(PARTITIONS):
        cluster.seed(topic, (changes or {}).get(partition, lambda r: r)(records[partition]), partition=partition)


def _transactions(cluster, topic: str) -> None:
    """A committed and an aborted transaction: markers and invisible records on the source."""
    producer = Producer({"bootstrap.servers": cluster.bootstrap, "transactional.id": unique("txn")})
    producer.init_transactions(30)
    for commit in (True, False, True):
        producer.begin_transaction()
        for i in range(25):
            producer.produce(topic, f"txn-{commit}-{i}".encode(), f"k{i}".encode(), partition=i % PARTITIONS)
        producer.flush(30)
        (producer.commit_transaction if commit else producer.abort_transaction)(30)


@pytest.mark.parametrize("mode", list(MODES))
def test_a_complete_mirror_passes_in_every_mode(tmp_path, source, target, files, mode):
    topic = source.create_topic("verified", partitions=PARTITIONS)
    _seed_partitions(source, topic, _partition_records())
    _transactions(source, topic)
    mirror = MirrorProcess(mirror_args(files, topic, *MODES[mode], "--exit.when.caught.up"), tmp_path / "m.log")
    assert mirror.wait(120) == 0, mirror.log_tail()
    report = tmp_path / "report.json"
    done = _verify(files, topic, *MODES[mode], report=report)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "the target holds every record of the source" in done.stdout and "Traceback" not in done.stderr
    written = json.loads(report.read_text())
    assert written["complete"] and not written["differs"]
    assert sum(row["source_records"] for row in written["rows"]) == PARTITIONS * PER_PARTITION + 50
    if mode == "records":  # the partitioner chose the target partitions
        assert [row["method"] for row in written["rows"]] == ["multiset per key"]
    else:
        assert {row["method"] for row in written["rows"]} == {"in order"} and len(written["rows"]) == PARTITIONS
        assert all(row["source_digest"] == row["target_digest"] for row in written["rows"])


def _drop(at):
    return lambda records: records[:at] + records[at + 1:]


def _change(at):
    return lambda records: records[:at] + [records[at]._replace(value=b"changed")] + records[at + 1:]


def _duplicate(at):
    return lambda records: records[:at + 1] + records[at:]


def test_a_record_deleted_changed_or_duplicated_on_the_target_is_named_by_partition_and_offset(
        tmp_path, source, target, files):
    topic = source.create_topic("faulty", partitions=PARTITIONS)
    target.create_topic(name=topic, partitions=PARTITIONS)
    records = _partition_records()
    _seed_partitions(source, topic, records)
    _seed_partitions(target, topic, records, {0: _drop(17), 1: _change(123), 2: _duplicate(311)})
    report = tmp_path / "report.json"
    done = _verify(files, topic, *KEEP, report=report)
    assert done.returncode == 3, done.stdout + done.stderr
    assert f"{topic}-0: record missing on the target from source offset 17 (before target offset 17)" in done.stdout
    assert f"{topic}-1: record different from source offset 123 at target offset 123" in done.stdout
    assert (f"{topic}-2: record extra on the target at target offset 312, a duplicate of source offset 311"
            in done.stdout), done.stdout
    rows = {row["partition"]: row for row in json.loads(report.read_text())["rows"]}
    assert [rows[p]["counts"] for p in range(PARTITIONS)] == [{"missing": 1}, {"different": 1}, {"extra": 1}]
    assert (rows[0]["source_records"], rows[0]["target_records"]) == (PER_PARTITION, PER_PARTITION - 1)

    # The first 10 of each partition agree; the rest is not proven by a sample.
    sampled = _verify(files, topic, *KEEP, "--sample", "10")
    assert sampled.returncode == 4 and "only the first 10 records of each partition" in sampled.stdout, sampled.stdout
    assert "nothing differs in what was compared" in sampled.stdout

    # Records the target's retention removed cannot be compared: not proven, not passed.
    target.admin().delete_records([KafkaTopicPartition(topic, 1, 50)])[KafkaTopicPartition(topic, 1, 50)].result(30)
    done = _verify(files, topic, *KEEP)
    assert done.returncode == 3 and "the target's log starts at offset 50" in done.stdout, done.stdout


def test_a_compacted_topic_is_compared_by_each_key_s_latest_record(tmp_path, source, target, files):
    config = {"cleanup.policy": "compact"}
    topic = source.create_topic("compacted", partitions=1, config=config)
    target.create_topic(name=topic, partitions=1, config=config)
    records = make_records(300, prefix="c")  # 97 keys, each written three or four times
    source.seed(topic, records)
    latest = {rec.key: i for i, rec in enumerate(records)}
    kept = [rec for i, rec in enumerate(records) if latest[rec.key] == i]  # as compaction would leave it
    target.seed(topic, kept)
    done = _verify(files, topic)
    assert done.returncode == 0 and "latest record per key" in done.stdout, done.stdout
    target.seed(topic, [kept[5]._replace(value=b"newer on the target only")])
    done = _verify(files, topic)
    assert done.returncode == 3 and "1 different" in done.stdout, done.stdout


def _mirrored_by_hand(source, target, name: str, count: int) -> str:
    """A one-partition topic with the same ``count`` records on both clusters."""
    topic = source.create_topic(name, partitions=1)
    target.create_topic(name=topic, partitions=1)
    records = make_records(count)
    source.seed(topic, records)
    target.seed(topic, records)
    return topic


def test_retention_on_the_target_alone_is_not_proven(tmp_path, source, target, files):
    topic = _mirrored_by_hand(source, target, "retained", 200)
    target.admin().delete_records([KafkaTopicPartition(topic, 0, 40)])[KafkaTopicPartition(topic, 0, 40)].result(30)
    done = _verify(files, topic, *KEEP)
    assert done.returncode == 4, done.stdout + done.stderr
    assert "not compared: source offsets 0 to 39: the target's log starts at offset 40" in done.stdout


def test_an_open_transaction_on_the_source_is_not_proven(tmp_path, source, target, files):
    """Records committed after an open transaction are not readable until it ends: not passed."""
    topic = _mirrored_by_hand(source, target, "open-txn", 30)
    producer = Producer({"bootstrap.servers": source.bootstrap, "transactional.id": unique("open")})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce(topic, b"not committed yet", partition=0)
    producer.flush(30)
    try:
        done = _verify(files, topic, *KEEP)
    finally:
        producer.abort_transaction(30)
    assert done.returncode == 4, done.stdout + done.stderr
    assert f"{topic}-0: a transaction is open at offset 30" in done.stdout, done.stdout
