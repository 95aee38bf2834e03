"""Cluster metadata the mirror needs: which source topics match, and target topics to create.

KIP-3 asks for "the same partition number in source and target": when a source topic is
assigned and its target topic is missing, it is created with the source's partition count
(replication factor: the target broker's default).
"""

from __future__ import annotations

import logging
import threading
from typing import Dict, Iterable, List, Optional

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from .errors import ClientFailed
from .log import librdkafka_logger

log = logging.getLogger(__name__)

METADATA_TIMEOUT_S = 10.0
CREATE_TIMEOUT_S = 30.0

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


class TargetTopics:
    """Creates missing target topics with the source's partition count, once per topic."""

    def __init__(self, source: AdminClient, target: AdminClient) -> None:
        self._source = source
        self._target = target
        self._known: set = set()
        self._pending: set = set()
        self._lock = threading.Lock()

    def ensure(self, mapping: Dict[str, List[str]]) -> None:
        """``mapping``: source topic -> the target topics its records go to.

        A cluster that cannot be reached now is not a reason to stop: the check is kept and
        retried (``retry_pending``) while the producer waits for the target anyway. A topic the
        target refuses to create is fatal, with a clear error.
        """
        with self._lock:
            wanted = {(src, dst) for src, dsts in mapping.items() for dst in dsts
                      if dst not in self._known}
            if not wanted:
                return
            try:
                existing = list_topic_partitions(self._target)
                missing = {(src, dst) for src, dst in wanted if dst not in existing}
                if missing:
                    self._create(missing)
            except KafkaException as exc:
                self._pending.update(wanted)
                log.warning("Cannot check the target topics now (%s); will try again",
                            exc.args[0].str())
                return
            self._known.update(dst for _, dst in wanted)
            self._pending.difference_update(wanted)

    def retry_pending(self) -> None:
        """Check again the topics an unreachable cluster kept us from checking."""
        if self._pending:
            mapping: Dict[str, List[str]] = {}
            for src, dst in list(self._pending):
                mapping.setdefault(src, []).append(dst)
            self.ensure(mapping)

    def _create(self, missing: Iterable) -> None:
        counts = list_topic_partitions(self._source)  # KafkaException: retried by the caller
        new_topics = {}
        for src, dst in sorted(missing):
            if src in counts and dst not in new_topics:
                new_topics[dst] = NewTopic(dst, num_partitions=counts[src])
        if not new_topics:
            return
        futures = self._target.create_topics(list(new_topics.values()),
                                             operation_timeout=CREATE_TIMEOUT_S,
                                             request_timeout=CREATE_TIMEOUT_S)
        for name, future in futures.items():
            try:
                future.result()
                log.info("Created target topic %s with %d partitions (as on the source)",
                         name, new_topics[name].num_partitions)
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise ClientFailed(f"target topic {name} is missing and cannot be created: "
                                       f"{exc.args[0].str()}") from None
            self._known.add(name)
