"""The record types plugins see: our own, never confluent-kafka's objects.

They are the Python counterparts of Kafka's ``BaseConsumerRecord`` and ``ProducerRecord``, so a
handler written against them does not depend on the client library underneath.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, NamedTuple, Optional, Tuple

Header = Tuple[str, Optional[bytes]]


class TopicPartition(NamedTuple):
    """A topic and a partition number; hashable, so it can key offset maps."""

    topic: str
    partition: int


@dataclass(frozen=True)
class ConsumerRecord:
    """A record read from the source cluster.

    ``timestamp`` is in milliseconds, or None when the source record carries none.
    ``headers`` keeps order and duplicates, as Kafka does.
    """

    topic: str
    partition: int
    offset: int
    timestamp: Optional[int]
    key: Optional[bytes]
    value: Optional[bytes]
    headers: List[Header]

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)


@dataclass(frozen=True)
class ProducerRecord:
    """A record to send to the target cluster.

    ``partition=None`` lets the producer's partitioner choose (MirrorMaker v1's default);
    ``timestamp=None`` lets the producer stamp the current time.
    """

    topic: str
    value: Optional[bytes]
    key: Optional[bytes] = None
    partition: Optional[int] = None
    timestamp: Optional[int] = None
    headers: Optional[List[Header]] = None


@dataclass(frozen=True)
class RawBatch:
    """A record batch on the raw path (``--use.raw.bytes``), described, never decoded: a raw
    handler sees this, never the records inside (KIP-712's contract).

    ``codec`` is the batch's compression (none, gzip, snappy, lz4, zstd); ``size`` its bytes as
    stored; timestamps are in milliseconds (the batch's first and largest)."""

    topic: str
    partition: int
    base_offset: int
    last_offset: int
    record_count: int
    codec: str
    size: int
    base_timestamp: int
    max_timestamp: int
