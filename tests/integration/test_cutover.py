"""``kafka-mirror-maker cutover`` on Apache Kafka: a mirror stopped with records still to copy,
and consumer groups of the source at arbitrary offsets (at 0, at the end, inside an aborted
transaction, in the records not yet mirrored): the cutover drains them, proves the target
complete and places every group where it reads nothing twice and skips nothing, in every mode
that keeps partitions, its checkpoints saying the same; with the target away it exits 5 naming
the flow within its timeout; with a producer still writing it places nothing and says so."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from .harness import BIN, BackgroundProducer, MirrorProcess, make_records, mirror_args, mirror_files, unique, wait_until
from .test_exact_failover import (MODES, PARTITIONS, _commit, _exact, _partition_rows, _resumes_at, _translated,
                                  _transactional_source)

pytestmark = pytest.mark.needs_kafka_feature("consumer group offsets administered on the target")

#: The drain (a group join, the records), verify's reads and the placement, on a loaded machine.
CUTOVER_S = 180
#: Partitions kept and MirrorMaker 2's names, nothing synced on its own: what the cutover places
#: is all that is placed.
KEPT = ("--message.handler", "mirror_maker.handlers.PartitionPreservingHandler", "--replication.policy.class",
        "default", "--source.cluster.alias", "a", "--target.cluster.alias", "b")


def _cutover(files, topic: str, *extra: str, timeout_s: float = CUTOVER_S):
    return subprocess.run([sys.executable, str(BIN), "cutover", *mirror_args(files, topic, *extra)],
                          capture_output=True, text=True, timeout=timeout_s + 60)


@pytest.mark.parametrize("mode", list(MODES))
def test_a_cutover_drains_verifies_and_places_every_group_exactly(tmp_path, source, target, mode):
    topic = _transactional_source(source)
    remote = f"a.{topic}"
    ends = {p: rows[-1][0] + 1 for p, rows in _partition_rows(source, topic).items()}
    groups = {unique("at-zero"): {p: 0 for p in range(PARTITIONS)}, unique("between"): {0: 737, 1: 1211},
              unique("aborted"): {0: 500, 1: 759}, unique("later"): {}}
    for group, offsets in groups.items():
        if offsets:
            _commit(source, group, topic, offsets)
    files = mirror_files(tmp_path, source, target, consumer={"isolation.level": "read_committed"})
    args = (*MODES[mode], "--groups", "|".join(groups))
    mirror = MirrorProcess(mirror_args(files, topic, *args), tmp_path / "mirror.log")
    try:
        wait_until(lambda: target.topic_exists(remote) and sum(target.end_offsets(remote).values()) > 0, 120,
                   "the mirror writing to the target", evidence=mirror.log_tail)
    finally:
        assert mirror.stop() == 143, mirror.log()
    # After the mirror stopped: records it has not copied, and a group inside them and at the end.
    source.seed(topic, make_records(40, prefix="late"), partition=0)
    later = next(g for g in groups if g.startswith("later"))
    groups[later] = {0: ends[0] + 17, 1: ends[1]}
    _commit(source, later, topic, groups[later])

    report = tmp_path / "cutover.json"
    done = _cutover(files, topic, *args, "--report", str(report), "--timeout.ms", str(CUTOVER_S * 1000))
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert "a -> b: cut over: the target holds every record of the source and 4 groups are placed" in done.stdout

    source_rows, target_rows = _partition_rows(source, topic), _partition_rows(target, remote)
    target_ends = target.end_offsets(remote)
    for group, offsets in groups.items():
        placed = target.committed(group, remote)
        for partition, offset in offsets.items():
            want = _resumes_at(source_rows, target_rows, target_ends, partition, offset)
            assert _exact(placed.get(partition), want, target_rows, partition, mode), (group, partition, placed, want)
        translated = _translated(target, group, remote)  # the checkpoints say the same
        for partition, offset in offsets.items():
            want = _resumes_at(source_rows, target_rows, target_ends, partition, offset)
            assert _exact(translated.get(partition), want, target_rows, partition, mode), (group, translated, want)
    written = json.loads(report.read_text())
    assert written["complete"] and written["verify"]["complete"] and len(written["groups"]) == 2 * len(groups)
    assert all(g["result"] == "placed" for g in written["groups"])


@pytest.mark.needs_own_brokers("cuts the target off through a proxy")
def test_a_cutover_with_the_target_away_exits_5_naming_the_flow_within_its_timeout(tmp_path, source, target):
    topic = source.create_topic("away", partitions=1)
    source.seed(topic, make_records(100))
    proxy, proxied = target.proxy(tmp_path)
    try:
        files = mirror_files(tmp_path, source, proxied)
        proxy.cut()
        started = time.monotonic()
        done = _cutover(files, topic, *KEPT, "--timeout.ms", "20000", "--shutdown.timeout.ms", "2000",
                        timeout_s=20)
        took = time.monotonic() - started
    finally:
        proxy.stop()
    assert done.returncode == 5, done.stdout[-3000:] + done.stderr[-3000:]
    # Not caught up by the deadline, or caught up on the source with records the target never took.
    assert "a -> b: not cut over: not drained" in done.stdout, done.stdout
    assert "(the target cluster unreachable for" in done.stdout, done.stdout
    assert took < 20 + 2 + 30, took  # the timeout, the stop's bound, the process's start and exit
    assert "Traceback" not in done.stderr


def test_a_cutover_while_a_producer_still_writes_places_nothing_and_says_so(tmp_path, source, target, files):
    topic = source.create_topic("moving", partitions=1)
    source.seed(topic, make_records(200))
    group = unique("app")
    _commit(source, group, topic, {0: 50})
    producer = BackgroundProducer(source, topic, rate=200)
    producer.start()
    try:
        done = _cutover(files, topic, *KEPT, "--groups", group, "--timeout.ms", "120000")
    finally:
        producer.stop()
    assert done.returncode == 5, done.stdout[-3000:] + done.stderr[-3000:]
    assert f"{topic}-0 was written to during the cutover" in done.stdout, done.stdout[-3000:]
    assert target.committed(group, f"a.{topic}") == {}
