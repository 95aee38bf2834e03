"""Admin clients that share a consumer's or producer's connection and security settings, and
the one metadata question every part of the mirror asks: which topics exist, with how many
partitions.
"""

from __future__ import annotations

from typing import Dict, Optional

from confluent_kafka.admin import AdminClient

from ..ops.log import librdkafka_logger

METADATA_TIMEOUT_S = 10.0
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


def list_topic_partitions(admin: AdminClient, topic: Optional[str] = None,
                          timeout_s: float = METADATA_TIMEOUT_S) -> Dict[str, int]:
    """Topic name to partition count (topics with a metadata error are left out)."""
    metadata = admin.list_topics(topic=topic, timeout=timeout_s)
    return {
        name: len(meta.partitions)
        for name, meta in metadata.topics.items()
        if meta.error is None and meta.partitions
    }
