"""Admin clients that share a consumer's or producer's connection and security settings, and
the one metadata question every part of the mirror asks: which topics exist, with how many
partitions.
"""

from __future__ import annotations

import concurrent.futures
import time
from typing import Dict, Iterable, Optional

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException
from confluent_kafka.admin import AdminClient

from ..ops.log import librdkafka_logger
from ..records import TopicPartition

METADATA_TIMEOUT_S = 10.0
#: How often a metadata wait that a stop may end looks for one: at first, and at most.
STOP_CHECK_S = 0.25
STOP_CHECK_MAX_S = 1.0
#: How long one admin request of the background syncs (create, describe, alter, list) may take.
REQUEST_TIMEOUT_S = 30.0

_CLIENT_KEYS_SKIPPED = {
    "group.id", "group.instance.id", "enable.auto.commit", "auto.offset.reset",
    "partition.assignment.strategy", "session.timeout.ms", "heartbeat.interval.ms",
    "max.poll.interval.ms", "auto.commit.interval.ms", "isolation.level", "fetch.min.bytes",
    "fetch.max.bytes", "fetch.wait.max.ms", "max.partition.fetch.bytes", "queued.min.messages",
    "queued.max.messages.kbytes", "check.crcs", "allow.auto.create.topics", "group.protocol",
    "acks", "enable.idempotence", "max.in.flight.requests.per.connection", "message.timeout.ms",
    "partitioner", "linger.ms", "batch.size", "batch.num.messages", "compression.type",
    "compression.level", "retries", "queue.buffering.max.kbytes", "queue.buffering.max.messages",
    "message.max.bytes", "request.timeout.ms", "transaction.timeout.ms", "delivery.report.only.error",
    "fetch.queue.backoff.ms",
}


def connection_settings(conf: Dict[str, str]) -> Dict[str, str]:
    """A consumer's or producer's settings without what only a consumer or a producer takes: how to
    reach and log in to its cluster, for another client of that cluster."""
    return {k: v for k, v in conf.items() if k not in _CLIENT_KEYS_SKIPPED and k not in ("logger", "error_cb")}


def admin_client(conf: Dict[str, str], client_id: str) -> AdminClient:
    """An AdminClient that shares a consumer's or producer's connection and security settings."""
    admin_conf = {k: v for k, v in conf.items() if k not in _CLIENT_KEYS_SKIPPED}
    admin_conf["client.id"] = client_id
    admin_conf["logger"] = librdkafka_logger(client_id)
    return AdminClient(admin_conf)


def group_offsets(admin: AdminClient, group: str, timeout_s: float = REQUEST_TIMEOUT_S) -> Dict[TopicPartition, int]:
    """A consumer group's committed offsets (those it has: no -1); raises KafkaException."""
    answer = admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group)],
                                               request_timeout=timeout_s)[group].result()
    return {TopicPartition(tp.topic, tp.partition): tp.offset for tp in answer.topic_partitions or []
            if tp.offset >= 0}


def list_topic_partitions(admin: AdminClient, topic: Optional[str] = None,
                          timeout_s: float = METADATA_TIMEOUT_S, state=None) -> Dict[str, int]:
    """Topic name to partition count (topics with a metadata error are left out). With the
    run's ``state``, a stop ends the wait (raising the last error) within STOP_CHECK_MAX_S."""
    if state is None:
        metadata = admin.list_topics(topic=topic, timeout=timeout_s)
    else:
        metadata = _list_topics_until_stop(admin, topic, timeout_s, state)
    return {
        name: len(meta.partitions)
        for name, meta in metadata.topics.items()
        if meta.error is None and meta.partitions
    }


def _list_topics_until_stop(admin: AdminClient, topic: Optional[str], timeout_s: float, state):
    """librdkafka's ``list_topics`` cannot be interrupted, and a cluster that is away holds it for
    the whole timeout (a SIGTERM during an assignment's target topic check waited up to 10 s):
    asked in slices instead, from STOP_CHECK_S up to STOP_CHECK_MAX_S, so that a distant cluster
    whose answer takes longer than a short slice still gets one long enough (the client keeps its
    connection between them)."""
    deadline = time.monotonic() + timeout_s
    slice_s = STOP_CHECK_S
    while True:
        started = time.monotonic()
        try:
            return admin.list_topics(topic=topic, timeout=max(0.01, min(slice_s, deadline - started)))
        except KafkaException:
            if state.stopping or time.monotonic() >= deadline:
                raise
            state.wait(slice_s - (time.monotonic() - started))  # an answer that failed at once
            slice_s = min(slice_s * 2, STOP_CHECK_MAX_S)


def wait_for_answers(futures: Iterable[concurrent.futures.Future], state=None) -> None:
    """Wait until an admin request's futures are answered (librdkafka answers each by the
    request's timeout, an error if nothing else). With the run's ``state``, a stop ends the wait
    within STOP_CHECK_S with a KafkaException: a CreateTopics the target holds for its 30 s
    otherwise held a SIGTERM as long, past a shorter --shutdown.timeout.ms."""
    pending = set(futures)
    while pending:
        if state is not None and state.stopping:
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "the mirror is stopping"))
        pending = concurrent.futures.wait(pending, timeout=STOP_CHECK_S if state is not None else None).not_done
