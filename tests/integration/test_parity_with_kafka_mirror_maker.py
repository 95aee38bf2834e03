"""Parity with Kafka's own MirrorMaker v1 (``kafka.tools.MirrorMaker`` from the 3.9 jars).

Each test runs the Java tool and ours with the same command line and the same properties files
against the same clusters, one after the other (the target topics and the group are reset in
between), and compares what a user can observe: the records in each target partition, the
committed offsets, the exit statuses. Where the two differ on purpose, the README's
compatibility table says so and the test checks each side of that row.
"""

from __future__ import annotations

import shutil
import signal
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Dict, List

import pytest

from .harness import MirrorProcess, Rec, make_records, mirror_args, mirror_files, unique, wait_until

pytestmark = [
    pytest.mark.needs_kafka_feature("Kafka's MirrorMaker v1 is compared on Apache Kafka"),
    pytest.mark.skipif(shutil.which("java") is None, reason="Kafka's MirrorMaker needs Java"),
]

TOOLS = ("kafka", "ours")


def mirror(tool: str, args: List[str], log_path) -> MirrorProcess:
    if tool == "ours":
        return MirrorProcess(args, log_path)
    from ..brokers.java_mirror_makers import mirror_maker_v1

    return MirrorProcess(args, log_path, command=mirror_maker_v1(args, log_path.parent / "java-mm1"))


@dataclass
class Outcome:
    status: int
    #: target partition -> records in offset order
    partitions: Dict[int, List[Rec]]
    committed: Dict[int, int]
    log: str

    def keyed(self) -> Dict[int, Dict[bytes, List[Rec]]]:
        """Per target partition, each key's records in offset order. Records of different source
        partitions interleave in an order neither tool promises; per key, order is kept."""
        out: Dict[int, Dict[bytes, List[Rec]]] = {}
        for partition, rows in self.partitions.items():
            for r in rows:
                if r.key is not None:
                    out.setdefault(partition, {}).setdefault(r.key, []).append(r)
        return out

    def unkeyed(self) -> Counter:
        return Counter(r for rows in self.partitions.values() for r in rows if r.key is None)


def run_each(tmp_path, source, target, files, args, topic, expected, prepare=None) -> Dict[str, Outcome]:
    """Run both tools in turn until ``expected`` records are in ``topic`` on the target, stop each
    with SIGTERM, and return what each left behind. ``prepare`` (re)creates target topics."""
    outcomes = {}
    for tool in TOOLS:
        target.delete_topics(topic)
        source.delete_group(files.group)
        if prepare is not None:
            prepare()
        process = mirror(tool, args, tmp_path / f"{tool}.log")
        try:
            rows = target.read_all(topic, expected=expected, timeout_s=90)
        finally:
            status = process.stop(signal.SIGTERM, timeout_s=60)
        partitions = defaultdict(list)
        for partition, _offset, rec in sorted(rows, key=lambda row: (row[0], row[1])):
            partitions[partition].append(rec)
        outcomes[tool] = Outcome(status, dict(partitions), source.committed(files.group, topic), process.log())
    return outcomes


def assert_same_records(outcomes: Dict[str, Outcome]) -> None:
    kafka, ours = outcomes["kafka"], outcomes["ours"]
    # Keyed records (tombstones too) land in the same partition, in the same order per key.
    assert ours.keyed() == kafka.keyed()
    # Null-key records: the sticky partitioner (Java) and librdkafka's random one place them
    # differently, so only the multiset (value, headers, timestamp) is compared.
    assert ours.unkeyed() == kafka.unkeyed()


def mixed_records() -> List[Rec]:
    """Keyed records with headers and timestamps, null-key records, and tombstones."""
    records = make_records(300, "keyed")
    unkeyed = [r._replace(key=None) for r in make_records(100, "unkeyed")]
    tombstones = [r._replace(value=None, key=b"gone-" + r.key) for r in make_records(30, "tomb")]
    return records + unkeyed + tombstones


@pytest.mark.parametrize("streams", ["1", "2"])
def test_same_records_per_partition_and_same_commits_after_sigterm(tmp_path, source, target, streams):
    topic = source.create_topic("parity", partitions=4)
    records = mixed_records()
    source.seed(topic, records)
    files = mirror_files(tmp_path, source, target)
    args = mirror_args(files, topic, "--num.streams", streams)
    outcomes = run_each(tmp_path, source, target, files, args, topic, len(records),
                        prepare=lambda: target.create_topic(name=topic, partitions=4))
    assert_same_records(outcomes)
    end_offsets = Counter(p for p, _o, _r in source.read_all(topic))
    for tool, outcome in outcomes.items():
        assert outcome.status == 143, (tool, outcome.log)
        assert outcome.committed == dict(end_offsets), tool
        tombstones = [r for rows in outcome.partitions.values() for r in rows if r.value is None]
        assert len(tombstones) == 30 and all(r.key.startswith(b"gone-") for r in tombstones), tool


def test_topic_selection_with_java_regex_constructs(tmp_path, source, target):
    prefix = unique("sel")
    wanted = [f"{prefix}-orders-1", f"{prefix}-payments-22"]
    others = [f"{prefix}-orders-x", f"{prefix}-refunds-1"]
    for name in wanted + others:
        source.create_topic(name=name)
        source.seed(name, make_records(20, name))
    files = mirror_files(tmp_path, source, target)
    # A named group, a POSIX class and a possessive quantifier: Java regex, as Kafka compiles it.
    include = rf"{prefix}-(?<kind>orders|payments)-\p{{Digit}}++"
    for tool in TOOLS:
        target.delete_topics(*wanted, *others)
        source.delete_group(files.group)
        process = mirror(tool, mirror_args(files, include), tmp_path / f"{tool}.log")
        try:
            for name in wanted:
                assert len(target.read_all(name, expected=20, timeout_s=90)) == 20, tool
        finally:
            assert process.stop(signal.SIGTERM) == 143, process.log()
        assert not any(target.topic_exists(name) for name in others), tool


def test_a_missing_target_topic(tmp_path, source, target):
    """Kafka's tool relies on the broker's auto-creation (num.partitions, 1 here); ours creates the
    topic with the source's partition count (the README's compatibility table)."""
    topic = source.create_topic("missing", partitions=3)
    records = make_records(100)
    source.seed(topic, records)
    files = mirror_files(tmp_path, source, target)
    outcomes = run_each(tmp_path, source, target, files, mirror_args(files, topic), topic, len(records))
    assert len(outcomes["kafka"].partitions) <= 1 and len(outcomes["ours"].partitions) == 3
    for tool, outcome in outcomes.items():
        rows = [r for rows in outcome.partitions.values() for r in rows]
        assert Counter(rows) == Counter(records), tool
        assert outcome.status == 143, outcome.log


def _refusing_target_topic(target, topic):
    """A target topic whose max.message.bytes refuses the 20 kB record in the middle."""
    from confluent_kafka.admin import NewTopic

    futures = target.admin().create_topics(
        [NewTopic(topic, num_partitions=1, config={"max.message.bytes": "10000"})], operation_timeout=30)
    futures[topic].result()
    wait_until(lambda: target.partitions(topic) == 1, 15, f"{topic} on the target")


def _poison(source):
    topic = source.create_topic("poison", partitions=1)
    source.seed(topic, make_records(100, "before") + make_records(1, "big", size=20000)
                + make_records(100, "after"), partition=0)
    return topic


def test_abort_on_send_failure_true_stops_both_without_committing_past_the_record(tmp_path, source, target):
    topic = _poison(source)
    files = mirror_files(tmp_path, source, target)
    args = mirror_args(files, topic, "--offset.commit.interval.ms", "200")
    for tool in TOOLS:
        target.delete_topics(topic)
        source.delete_group(files.group)
        _refusing_target_topic(target, topic)
        process = mirror(tool, args, tmp_path / f"{tool}.log")
        assert process.wait(90) == 255, (tool, process.log())
        assert source.committed(files.group, topic).get(0, 0) <= 100, tool
        assert not any(r.value.startswith(b"big") for _p, _o, r in target.read_all(topic)), tool


def test_abort_on_send_failure_false_skips_the_record_in_both(tmp_path, source, target):
    """With a batch.size the topic takes (what our WARN asks for), both refuse one record."""
    topic = _poison(source)
    files = mirror_files(tmp_path, source, target, producer={"batch.size": 8192})
    args = mirror_args(files, topic, "--offset.commit.interval.ms", "200", "--abort.on.send.failure", "false")
    outcomes = run_each(tmp_path, source, target, files, args, topic, 200,
                        prepare=lambda: _refusing_target_topic(target, topic))
    assert_same_records(outcomes)
    for tool, outcome in outcomes.items():
        assert outcome.status == 143, (tool, outcome.log)
        assert outcome.committed == {0: 201}, tool  # the refused record's offset is committed too
        assert len(outcome.partitions[0]) == 200


BAD_COMMAND_LINES = {
    "no arguments": [],
    "--help": ["--help"],
    "missing --consumer.config": ["--producer.config", "{producer}", "--include", "t"],
    "unknown option": ["{base}", "--blacklist", "x"],
    "abbreviated option": ["{base}", "--abort.on.send", "true"],
    "--num.streams not a number": ["{base}", "--num.streams", "many"],
    "--abort.on.send.failure not a boolean": ["{base}", "--abort.on.send.failure", "maybe"],
    "no include list": ["--consumer.config", "{consumer}", "--producer.config", "{producer}"],
    "consumer file missing": ["--consumer.config", "{missing}", "--producer.config", "{producer}",
                              "--include", "t"],
    "--version": ["--version"],
}


@pytest.mark.parametrize("case", list(BAD_COMMAND_LINES))
def test_exit_status_of_command_lines(tmp_path, source, target, case):
    files = mirror_files(tmp_path, source, target)
    args = []
    for arg in BAD_COMMAND_LINES[case]:
        if arg == "{base}":
            args += mirror_args(files, "t")
        else:
            args.append(arg.format(consumer=files.consumer, producer=files.producer,
                                   missing=tmp_path / "missing.properties"))
    statuses = {}
    for tool in TOOLS:
        process = mirror(tool, args, tmp_path / f"{tool}.log")
        statuses[tool] = process.wait(60)
        if tool == "ours":
            assert "Traceback" not in process.log()
    assert statuses["ours"] == statuses["kafka"], statuses


def test_a_batch_larger_than_the_target_topic_takes(tmp_path, source, target):
    """The README's row: Java's producer splits a refused batch and refuses only the oversized
    record; librdkafka refuses the whole batch, so ours warns at assignment and stops (255) rather
    than drop records the target never refused one by one, even with abort false."""
    topic = _poison(source)
    files = mirror_files(tmp_path, source, target)
    args = mirror_args(files, topic, "--offset.commit.interval.ms", "200", "--abort.on.send.failure", "false")
    _refusing_target_topic(target, topic)
    process = mirror("ours", args, tmp_path / "ours.log")
    assert process.wait(90) == 255, process.log()
    log = process.log()
    assert f"Target topic {topic} takes batches of at most 10000 bytes" in log
    errors = [line for line in log.splitlines() if " ERROR " in line]
    assert len(errors) == 1 and "set batch.size to at most 10000" in errors[0], errors
    assert source.committed(files.group, topic).get(0, 0) == 0
