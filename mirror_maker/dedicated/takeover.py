"""Taking a flow over from Kafka's MirrorMaker 2 where it stopped, so that switching tools
neither mirrors the source again from its start nor skips what came in between.

MirrorMaker 2 keeps its progress in Kafka Connect's offset topic on the target,
``mm2-offsets.<source>.internal`` (``offset.storage.topic``), one JSON record per source partition:
key ``["MirrorSourceConnector",{"cluster":"<source>","partition":0,"topic":"orders"}]``, value
``{"offset":<the last record mirrored>}``; on a restart it resumes one past it
(``MirrorSourceTask.initializeConsumer``). Before a flow first starts here, every source partition
its consumer group has no committed offset for gets that position committed; partitions the group
already has are never touched, so this runs once in effect however many nodes start.
"""

from __future__ import annotations

import json
import logging
import time
from typing import Dict, Optional

import confluent_kafka
from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from ..clients.admin import admin_client, connection_settings
from ..ops.log import librdkafka_logger
from ..records import TopicPartition

log = logging.getLogger("mirror_maker.dedicated")

CONNECTOR = "MirrorSourceConnector"
#: The bound of each step (finding the topic, reading it, the group's offsets): a target that
#: cannot be reached holds the flow's start this long at most, then it starts as a new one would.
TIMEOUT_S = 10.0


def positions(target_conf: Dict[str, str], topic: str, source: str) -> Optional[Dict[TopicPartition, int]]:
    """Where MirrorMaker 2 would resume each partition of ``source`` (None: no such topic)."""
    conf = dict(connection_settings(target_conf))
    conf.update({"group.id": "mirror-maker-takeover", "enable.auto.commit": False, "enable.partition.eof": True,
                 "client.id": "mirror-maker-takeover", "logger": librdkafka_logger("mirror-maker-takeover")})
    consumer = confluent_kafka.Consumer(conf)
    try:
        metadata = consumer.list_topics(topic, timeout=TIMEOUT_S).topics.get(topic)
        if metadata is None or metadata.error is not None or not metadata.partitions:
            return None
        consumer.assign([KafkaTopicPartition(topic, p, confluent_kafka.OFFSET_BEGINNING) for p in metadata.partitions])
        found: Dict[TopicPartition, int] = {}
        at_end, deadline = set(), time.monotonic() + TIMEOUT_S
        while len(at_end) < len(metadata.partitions):
            if time.monotonic() > deadline:
                raise KafkaException(KafkaError(KafkaError._TIMED_OUT, f"reading {topic} took too long"))
            for msg in consumer.consume(1000, 0.5):
                if msg.error() is not None:
                    if msg.error().code() == KafkaError._PARTITION_EOF:
                        at_end.add(msg.partition())
                    continue
                at_end.discard(msg.partition())
                _read(msg.key(), msg.value(), source, found)
        return found
    finally:
        consumer.close()


def _read(key: Optional[bytes], value: Optional[bytes], source: str, found: Dict[TopicPartition, int]) -> None:
    try:
        connector, partition = json.loads(key or b"null")
        if connector != CONNECTOR or partition.get("cluster") != source:
            return
        tp = TopicPartition(partition["topic"], int(partition["partition"]))
        offset = json.loads(value)["offset"] if value else None
    except (ValueError, TypeError, KeyError):
        return  # another connector's record, or one this reading does not know
    if offset is None:
        found.pop(tp, None)  # a tombstone: the offset was reset
    else:
        found[tp] = int(offset) + 1


def take_over(flow) -> int:
    """Commit MirrorMaker 2's positions to the flow's group where it has none; how many. A cluster
    that cannot be reached is one WARN: the flow then starts as a new one would."""
    topic = flow.connect_offsets_topic
    group = flow.config.group_id
    try:
        points = positions(flow.config.producer, topic, flow.source)
        if not points:
            return 0
        admin = admin_client(connection_settings(flow.config.consumer), f"{group}-takeover")
        committed = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)],
                                                      request_timeout=TIMEOUT_S)[group].result()
        have = {TopicPartition(tp.topic, tp.partition) for tp in committed.topic_partitions or [] if tp.offset >= 0}
        missing = [KafkaTopicPartition(tp.topic, tp.partition, offset) for tp, offset in sorted(points.items())
                   if tp not in have and flow.config.include.fullmatch(tp.topic)]
        if not missing:
            return 0
        admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, missing)],
                                           request_timeout=TIMEOUT_S)[group].result()
    except KafkaException as exc:
        log.warning("Cannot read where Kafka's MirrorMaker 2 left flow %s (%s in %s): %s; partitions without a "
                    "committed offset start as auto.offset.reset says", flow.name, topic, flow.target,
                    exc.args[0].str())
        return 0
    log.info("Flow %s resumes where Kafka's MirrorMaker 2 left it (%s): %s", flow.name, topic,
             ", ".join(f"{tp.topic}-{tp.partition} at {tp.offset}" for tp in missing))
    return len(missing)
