"""Target topics: created when missing, with the source's partition count.

KIP-3 asks for "the same partition number in source and target": when a source topic is
assigned and its target topic is missing, it is created with the source's partition count
(replication factor: the target broker's default).
"""

from __future__ import annotations

import logging
import threading
from typing import Dict, Iterable, List

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

from ..errors import ClientFailed
from .admin import list_topic_partitions

log = logging.getLogger("mirror_maker.admin")

CREATE_TIMEOUT_S = 30.0


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
