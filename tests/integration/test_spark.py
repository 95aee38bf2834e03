"""``--spark``: the streams as tasks of a real Spark job (local mode, and a standalone cluster on
loopback), against the real brokers. Each test starts a JVM (about 10 s), so they are marked
``spark`` and ``slow``.
"""

from __future__ import annotations

import collections
import os
import re
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from mirror_maker.embedded import die_with_parent, free_port

from .harness import (BackgroundProducer, MirrorProcess, make_records, mirror_args, mirror_files,
                      values, wait_until)

pyspark = pytest.importorskip("pyspark")
pytestmark = [pytest.mark.spark, pytest.mark.slow]

#: Cold start of the JVM, the Python daemon and the workers, plus the group join.
START_S = 90


def spark_mirror(tmp_path, files, topic, *extra, name="spark.log", env=None, cwd=None):
    args = mirror_args(files, topic, "--spark", "--offset.commit.interval.ms", "500",
                       "--status.interval.ms", "1000", *extra)
    return MirrorProcess(args, tmp_path / name, env=env, cwd=cwd)


def assert_exactly_once_each(rows, expected):
    counts = collections.Counter(values(rows))
    assert set(counts) == set(expected), f"{len(set(expected) - set(counts))} missing"
    duplicates = {value: n for value, n in counts.items() if n > 1}
    assert not duplicates, f"{len(duplicates)} duplicated, e.g. {list(duplicates)[:3]}"


def assert_committed_everything(source, files, topic):
    """Committed offsets are each source partition's end: all of it is on the target."""
    per_partition = collections.Counter(partition for partition, _o, _r in source.read_all(topic))
    committed = source.committed(files.group, topic)
    assert committed == dict(per_partition), (committed, per_partition)


def test_two_streams_mirror_everything_and_sigterm_exits_143(tmp_path, source, target, files):
    topic = source.create_topic("spark", partitions=4)
    seeded = make_records(2000, "spark")
    source.seed(topic, seeded)
    mirror = spark_mirror(tmp_path, files, topic, "--num.streams", "2")
    try:
        target.read_values(topic, [r.value for r in seeded], timeout_s=START_S)
        wait_until(lambda: sum(source.committed(files.group, topic).values()) == 2000, 30,
                   "offsets committed for every mirrored record")
        log = mirror.log()
        assert re.search(r"Spark worker 0 started \(pid \d+", log) and "Spark worker 1 started" in log
        # worker log lines reach the driver's log, and the driver logs the combined status
        assert "worker 1: [mirrormaker-thread-1] Starting mirror maker thread" in log
        mirror.wait_for_log("4 partitions assigned, 2000 records mirrored in total")
    finally:
        status = mirror.stop(signal.SIGTERM, timeout_s=90)
    assert status == 143, mirror.log()
    assert "Traceback" not in mirror.log()
    assert_exactly_once_each(target.read_all(topic, expected=2000), [r.value for r in seeded])
    assert_committed_everything(source, files, topic)
