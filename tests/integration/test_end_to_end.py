"""The CLI as a user runs it: mirror, verify content, stop cleanly, check committed offsets."""

import signal
from collections import Counter

import pytest

from .harness import MirrorProcess, assert_order_per_key, make_records, wait_until


def _content(rows):
    return Counter((rec.key, rec.value, rec.headers, rec.timestamp) for _p, _o, rec in rows)


@pytest.mark.smoke
def test_mirror_copies_every_record_and_sigterm_commits(tmp_path, source, target, files):
    topic = source.create_topic("e2e", partitions=3)
    records = make_records(2000)
    source.seed(topic, records)

    mirror = MirrorProcess(["--consumer.config", str(files.consumer),
                            "--producer.config", str(files.producer),
                            "--whitelist", topic, "--offset.commit.interval.ms", "500"],
                           tmp_path / "mirror.log")
    try:
        mirrored = target.read_all(topic, expected=len(records), timeout_s=90)
        wait_until(lambda: sum(source.committed(files.group, topic).values()) == len(records),
                   30, "offsets committed up to the end of every partition")
    finally:
        status = mirror.stop(signal.SIGTERM)

    assert status == 143, mirror.log()
    assert _content(mirrored) == _content(
        [(0, 0, r._replace(headers=tuple(r.headers))) for r in records])
    assert_order_per_key(mirrored)
    assert target.partitions(topic) == 3  # created with the source's partition count
    assert "Resetting offset for partition" in mirror.log()
    assert "Traceback" not in mirror.log()
