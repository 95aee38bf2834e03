"""Shallow mirroring (``--use.raw.bytes``): whole batches, the same partitions, nothing decoded.

On Apache Kafka, which validates every batch it is given (CRC, one batch per partition per
request, sequences); on Tansu the target is read with ``check.crcs=true``.
"""

from __future__ import annotations

import signal
from collections import defaultdict
from typing import Dict, List

import pytest

from .harness import (BackgroundProducer, MirrorProcess, assert_order_per_key, make_records, mirror_args,
                      mirror_files, on_tansu, unique, wait_until)

RAW = "--use.raw.bytes"


def raw_batches(cluster, topic: str, partitions: int) -> Dict[int, List[tuple]]:
    """(codec, record count) of every batch of each partition, read raw from the broker."""
    from kafka.net.selector import NetworkSelector
    from kafka.protocol.consumer import FetchRequest

    from mirror_maker.shallow.batches import split
    from mirror_maker.shallow.connections import Cluster as Raw

    net = NetworkSelector()
    raw = Raw(net, {"bootstrap.servers": cluster.bootstrap, **(cluster.client_conf or {})}, "test-reader", "test")
    try:
        raw.connect()
        raw.track([topic])
        out = {}
        for partition in range(partitions):
            position, batches = 0, []
            while True:
                request = FetchRequest(max_wait_ms=0, min_bytes=0, max_bytes=50_000_000, isolation_level=0,
                                       topics=[FetchRequest.FetchTopic(topic=topic, partitions=[
                                           FetchRequest.FetchTopic.FetchPartition(
                                               partition=partition, fetch_offset=position,
                                               partition_max_bytes=10_000_000)])], max_version=12)
                answer = raw.client.send_and_receive(raw.leader(topic, partition), request)
                part = answer.responses[0].partitions[0]
                found = [b for b in split(part.records or b"") if b.last_offset >= position]
                if not found:
                    break
                batches += [(b.codec, b.record_count) for b in found if not b.is_control]
                position = found[-1].next_offset
            out[partition] = batches
        return out
    finally:
        raw.close()
        net.close()


def per_partition(rows) -> Dict[int, List]:
    out = defaultdict(list)
    for partition, _offset, rec in sorted(rows, key=lambda row: (row[0], row[1])):
        out[partition].append(rec)
    return dict(out)


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_batches_are_copied_as_they_are(tmp_path, source, target, files, codec):
    topic = source.create_topic(f"raw-{codec}", partitions=3)
    records = make_records(3000)
    source.seed(topic, records, **{"compression.type": codec, "linger.ms": 50, "batch.num.messages": 500})
    mirror = MirrorProcess(mirror_args(files, topic, RAW, "--offset.commit.interval.ms", "300"), tmp_path / "m.log")
    try:
        rows = target.read_all(topic, expected=len(records), timeout_s=90,
                               **({"check.crcs": True} if on_tansu() else {}))
        wait_until(lambda: sum(source.committed(files.group, topic).values()) == len(records), 30, "every offset committed")
    finally:
        assert mirror.stop(signal.SIGTERM) == 143, mirror.log()
    assert per_partition(rows) == per_partition(source.read_all(topic))  # same partitions, order, content
    assert_order_per_key(rows)
    if not on_tansu():
        assert raw_batches(target, topic, 3) == raw_batches(source, topic, 3)  # same codec and boundaries
    assert "Traceback" not in mirror.log()
