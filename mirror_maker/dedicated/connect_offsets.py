"""Kafka Connect's offsets topic of a flow, read and kept current in its format, so that Kafka's
MirrorMaker 2 and this tool can each take a flow over where the other left it, in either direction
and at any time.

MirrorMaker 2 keeps a flow's progress in Connect's offsets topic on the target,
``mm2-offsets.<source>.internal`` (``offset.storage.topic``), one JSON record per source partition:
key ``["MirrorSourceConnector",{"cluster":"<source>","partition":0,"topic":"orders"}]`` (Connect's
JsonConverter without schemas, the map in Java's HashMap order), value ``{"offset":<the last record
mirrored>}``; on a restart it resumes one past it (``MirrorSourceTask.initializeConsumer``).
Connect looks a position up by the key's bytes, and keeps the newest record of a key: ours are
written byte for byte as Connect writes them, to the partition Java's producer picks for the key
(murmur2), so that the newest record of a key is always the one read.

Our records carry a header (``WRITER_HEADER``): Connect ignores it, and a take-over tells our own
past positions from MirrorMaker 2's by it (our consumer group is what we resume from; only a
position MirrorMaker 2 wrote after it is taken over).
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from typing import Dict, Optional, Tuple

import confluent_kafka
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import NewTopic

from ..clients.admin import connection_settings, list_topic_partitions
from ..ops.log import librdkafka_logger
from ..records import TopicPartition

log = logging.getLogger("mirror_maker.dedicated")

CONNECTOR = "MirrorSourceConnector"
WRITER_HEADER = "kafka-mirror-maker.writer"
#: The bound of each step of a read (finding the topic, reading it to its end).
READ_TIMEOUT_S = 10.0
#: Kafka Connect's defaults for the topic it creates (``offset.storage.partitions``,
#: ``offset.storage.replication.factor``), which we follow when we create it first.
DEFAULT_PARTITIONS = 25
DEFAULT_REPLICATION_FACTOR = 3


@dataclass(frozen=True)
class Position:
    #: The next source offset to mirror (one past the last mirrored).
    next_offset: int
    #: Written by this tool (else by Kafka's MirrorMaker 2).
    ours: bool


def key_bytes(source_alias: str, tp: TopicPartition) -> bytes:
    # Jackson writes UTF-8, not \u escapes.
    return json.dumps([CONNECTOR, {"cluster": source_alias, "partition": tp.partition, "topic": tp.topic}],
                      separators=(",", ":"), ensure_ascii=False).encode()


def value_bytes(next_offset: int) -> bytes:
    """The last mirrored offset; -1 (nothing mirrored: MirrorMaker 2 starts as auto.offset.reset
    says, ``MirrorSourceTask.isUncommitted``) for a flow at offset 0."""
    return json.dumps({"offset": next_offset - 1}, separators=(",", ":")).encode()


def decode(key: Optional[bytes], value: Optional[bytes], headers, source_alias: str
           ) -> Optional[Tuple[TopicPartition, Optional[Position]]]:
    """(source partition, its position, None for a tombstone) of a record about ``source_alias``'s
    partitions; None for anything else (another connector's, another cluster's, not JSON)."""
    try:
        connector, partition = json.loads(key or b"null")
        if connector != CONNECTOR or partition.get("cluster") != source_alias:
            return None
        tp = TopicPartition(partition["topic"], int(partition["partition"]))
        offset = json.loads(value)["offset"] if value else None
        next_offset = None if offset is None else max(0, int(offset) + 1)
    except (ValueError, TypeError, KeyError, AttributeError):
        return None
    if next_offset is None:
        return tp, None
    ours = any(name == WRITER_HEADER for name, _value in headers or ())
    return tp, Position(next_offset, ours)


def read_positions(target_conf: Dict[str, str], topic: str, source_alias: str
                   ) -> Optional[Dict[TopicPartition, Position]]:
    """The newest position of each partition of ``source_alias`` in ``topic`` (None: no such topic).
    Raises KafkaException when the target cannot be read in time."""
    reader = "mirror-maker-takeover"
    conf = dict(connection_settings(target_conf))
    conf.update({"group.id": reader, "enable.auto.commit": False, "enable.partition.eof": True,
                 "isolation.level": "read_committed", "client.id": reader, "logger": librdkafka_logger(reader)})
    consumer = confluent_kafka.Consumer(conf)
    try:
        metadata = consumer.list_topics(topic, timeout=READ_TIMEOUT_S).topics.get(topic)
        if metadata is None or metadata.error is not None or not metadata.partitions:
            return None
        consumer.assign([KafkaTopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in metadata.partitions])
        found: Dict[TopicPartition, Position] = {}
        at_end, deadline = set(), time.monotonic() + READ_TIMEOUT_S
        while len(at_end) < len(metadata.partitions):
            if time.monotonic() > deadline:
                raise KafkaException(KafkaError(KafkaError._TIMED_OUT, f"reading {topic} took too long"))
            for msg in consumer.consume(1000, 0.5):
                if msg.error() is not None:
                    if msg.error().code() == KafkaError._PARTITION_EOF:
                        at_end.add(msg.partition())
                    continue
                at_end.discard(msg.partition())
                decoded = decode(msg.key(), msg.value(), msg.headers(), source_alias)
                if decoded is not None:
                    tp, position = decoded
                    if position is None:
                        found.pop(tp, None)  # a tombstone: the offset was reset
                    else:
                        found[tp] = position
        return found
    finally:
        consumer.close()


class ConnectOffsetsWriter:
    """Writes a flow's committed positions into Connect's offsets topic, each one that moved."""

    def __init__(self, topic: str, source_alias: str, target_conf: Dict[str, str], admin,
                 partitions: int = DEFAULT_PARTITIONS, replication_factor: Optional[int] = DEFAULT_REPLICATION_FACTOR,
                 written: Optional[Dict[TopicPartition, int]] = None) -> None:
        self.topic = topic
        self._source_alias = source_alias
        self._admin = admin
        self._partitions = partitions
        self._replication_factor = replication_factor
        self._ready = False
        #: What the topic says now, as far as this writer knows (a position written again is not news).
        self.written: Dict[TopicPartition, int] = dict(written or {})
        conf = dict(connection_settings(target_conf))
        # Never an auto-created (uncompacted) topic, which Connect would refuse to start on.
        conf.update({"acks": "all", "enable.idempotence": True, "partitioner": "murmur2_random",
                     "allow.auto.create.topics": False, "linger.ms": 5, "client.id": f"{topic}-writer", "logger": librdkafka_logger(f"{topic}-writer")})
        self._producer = confluent_kafka.Producer(conf)

    def write(self, committed: Dict[TopicPartition, int], timeout_s: float) -> int:
        """Write each position of ``committed`` (the next offset to mirror) that moved, and wait
        until the target acknowledged them (at most ``timeout_s``); how many were written. Raises
        KafkaException when the topic cannot be made or a write is refused."""
        moved = {tp: offset for tp, offset in committed.items() if self.written.get(tp) != offset}
        if not moved:
            return 0
        deadline = time.monotonic() + timeout_s
        self._ensure_topic(timeout_s)
        if self._producer.flush(max(0.0, deadline - time.monotonic())):  # an earlier round's, still queued
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "earlier positions not acknowledged yet"))
        failures = []

        def delivered(err, _msg) -> None:
            if err is not None:
                failures.append(err)

        headers = [(WRITER_HEADER, b"kafka-mirror-maker")]
        for tp, offset in sorted(moved.items()):
            self._producer.produce(self.topic, key=key_bytes(self._source_alias, tp), value=value_bytes(offset),
                                   headers=headers, on_delivery=delivered)
        left = self._producer.flush(max(0.0, deadline - time.monotonic()))
        if failures:
            raise KafkaException(failures[0])
        if left:
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, f"{left} positions not acknowledged in time"))
        self.written.update(moved)
        return len(moved)

    def _ensure_topic(self, timeout_s: float) -> None:
        """The topic, created where missing as Connect creates it (compacted, its partition count
        and replication factor), so that Kafka's MirrorMaker 2 starts on it as on its own. One that
        exists is used as it is, as Connect does: a principal may write it without CREATE."""
        if self._ready:
            return
        # Every topic's metadata, not the one's: a request naming it may auto-create it, uncompacted.
        if self.topic in list_topic_partitions(self._admin, timeout_s=timeout_s):
            self._ready = True
            return
        new = NewTopic(self.topic, num_partitions=self._partitions,
                       replication_factor=self._replication_factor or -1, config={"cleanup.policy": "compact"})
        future = self._admin.create_topics([new], request_timeout=timeout_s)[self.topic]
        try:
            future.result()
            log.info("Created %s (%d partitions, compacted): Kafka Connect's offsets topic, which Kafka's "
                     "MirrorMaker 2 resumes from", self.topic, self._partitions)
        except KafkaException as exc:
            if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                raise
        self._ready = True

    def close(self, timeout_s: float) -> None:
        self._producer.flush(max(0.0, timeout_s))
