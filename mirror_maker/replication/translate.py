"""Offset translation for users failing a consumer group over to the target cluster: the latest
checkpoint per partition of a group, read from ``<source alias>.checkpoints.internal`` on the
target, as MirrorMaker 2's ``RemoteClusterUtils.translateOffsets`` reads it (the
``kafka-mirror-maker translate-offsets`` command is ``cli.translate_offsets``)."""

from __future__ import annotations

import struct
import time
from typing import Dict, Optional, Tuple

import confluent_kafka
from confluent_kafka import KafkaError
from confluent_kafka import TopicPartition as KafkaTopicPartition

from ..clients.polling import poll
from ..ops.log import librdkafka_logger
from ..records import TopicPartition
from .formats import Checkpoint, decode_checkpoint
from .policies import DefaultReplicationPolicy


def translate_offsets(client_conf: Dict[str, str], group: str, source_alias: str, separator: str = ".",
                      timeout_s: float = 30.0) -> Dict[TopicPartition, int]:
    """Where ``group`` resumes on the target cluster (``client_conf``: librdkafka settings of a
    client of the target): remote topic partition -> offset, from the newest checkpoints."""
    topic = DefaultReplicationPolicy(separator).checkpoints_topic(source_alias)
    checkpoints = read_checkpoints(client_conf, topic, timeout_s, f"mirror-translate-{group}")
    if checkpoints is None:
        raise LookupError(f"no checkpoints topic {topic} on the target")
    return {TopicPartition(c.topic, c.partition): c.downstream_offset
            for (g, _t, _p), c in checkpoints.items() if g == group}


def read_checkpoints(client_conf: Dict[str, str], topic: str, timeout_s: float,
                     reader: str) -> Optional[Dict[Tuple[str, str, int], Checkpoint]]:
    """The newest checkpoint per (group, remote topic, partition) in ``topic``, read to its end
    (None: no such topic). ``reader``: the consumer's group id, which commits nothing."""
    conf = {"logger": librdkafka_logger(reader), **client_conf, "group.id": reader, "client.id": reader,
            "enable.auto.commit": False, "enable.partition.eof": True}
    consumer = confluent_kafka.Consumer(conf)
    try:
        metadata = consumer.list_topics(topic, timeout=timeout_s).topics.get(topic)
        if metadata is None or metadata.error is not None:
            return None
        partitions = sorted(metadata.partitions)
        consumer.assign([KafkaTopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in partitions])
        checkpoints: Dict[Tuple[str, str, int], Checkpoint] = {}
        at_end, deadline = set(), time.monotonic() + timeout_s
        while len(at_end) < len(partitions):
            if time.monotonic() > deadline:
                raise TimeoutError(f"reading {topic} took longer than {timeout_s:.0f} s")
            for msg in poll(consumer, 10000, 0.5):
                if msg.error() is not None:
                    if msg.error().code() == KafkaError._PARTITION_EOF:
                        at_end.add(msg.partition())
                    continue
                try:
                    checkpoint = decode_checkpoint(msg.key(), msg.value())
                except (TypeError, ValueError, IndexError, struct.error):  # a tombstone, or not a checkpoint
                    continue
                checkpoints[(checkpoint.group, checkpoint.topic, checkpoint.partition)] = checkpoint
        return checkpoints
    finally:
        consumer.close()
