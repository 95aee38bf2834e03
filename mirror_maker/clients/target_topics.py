"""Target topics: created when missing, with the source's partition count, and their limits.

KIP-3 asks for "the same partition number in source and target": when a source topic is
assigned and its target topic is missing, it is created with the source's partition count
(replication factor: the target broker's default).

With MirrorMaker 2's options (the replication package) the names come from the replication
policy (``remote``), the replication factor from ``--replication.factor``, and the new topic's
configs from its source topic's (``--sync.topic.configs.enabled``).

Each target topic's ``max.message.bytes`` is read too: the broker refuses a whole batch larger
than it, and librdkafka, unlike Java's producer, never splits a refused batch. A topic whose
limit is below the producer's batch size gets a WARN naming the setting to change, and the
producer tells such a refusal apart from a record that is too large by itself.
"""

from __future__ import annotations

import logging
import threading
from typing import Callable, Dict, Iterable, List, Optional, Tuple

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic, ResourceType

from ..errors import ClientFailed
from .admin import list_topic_partitions, wait_for_answers

log = logging.getLogger("mirror_maker.admin")

CREATE_TIMEOUT_S = 30.0


class TargetTopics:
    """Creates missing target topics with the source's partition count, once per topic."""

    def __init__(self, source: AdminClient, target: AdminClient, batch_bytes: int = 0,
                 remote: Callable[[str], str] = str, replication_factor: Optional[int] = None,
                 new_topic_configs: Optional[Callable[[str], Dict[str, str]]] = None, state=None) -> None:
        """``batch_bytes``: the most the producer puts in one batch (its batch.size);
        ``remote``: a topic's name on the target (the replication policy's);
        ``new_topic_configs``: the configs a topic created for this source topic gets;
        ``state``: the run's, whose stop ends a wait for a cluster's metadata."""
        self._state = state
        self._source = source
        self._target = target
        self._batch_bytes = batch_bytes
        self.remote = remote
        self._replication_factor = replication_factor
        self._new_topic_configs = new_topic_configs
        #: Source topic -> the target topics its records go to (what the syncs keep alike).
        self.mapping: Dict[str, set] = {}
        self._known: set = set()
        self._pending: set = set()
        self._lock = threading.Lock()
        #: Target topic -> its max.message.bytes, where the target said (read by the producer).
        self.max_message_bytes: Dict[str, int] = {}
        #: (target topic, partition) of topics this process created, until first asked (``fresh``).
        self._fresh: set = set()

    def _stopping(self) -> bool:
        """A stop ends the metadata waits: a wait it ended is not a failure to announce."""
        return self._state is not None and self._state.stopping

    def ensure(self, mapping: Dict[str, List[str]]) -> None:
        """``mapping``: source topic -> the target topics its records go to.

        A cluster that cannot be reached now is not a reason to stop: the check is kept and
        retried (``retry_pending``) while the producer waits for the target anyway. A topic the
        target refuses to create is fatal, with a clear error.
        """
        with self._lock:
            for src, dsts in mapping.items():
                self.mapping.setdefault(src, set()).update(dsts)
            wanted = {(src, dst) for src, dsts in mapping.items() for dst in dsts
                      if dst not in self._known}
            if not wanted:
                return
            try:
                existing = list_topic_partitions(self._target, state=self._state)
                missing = {(src, dst) for src, dst in wanted if dst not in existing}
                if missing:
                    self._create(missing)
            except KafkaException as exc:
                self._pending.update(wanted)
                if not self._stopping():
                    log.warning("Cannot check the target topics now (%s); will try again",
                                exc.args[0].str())
                return
            self._known.update(dst for _, dst in wanted)
            self._pending.difference_update(wanted)
            self._read_limits(sorted({dst for _, dst in wanted}))

    def _read_limits(self, topics: List[str]) -> None:
        """Each topic's max.message.bytes; a WARN where a full batch would be refused."""
        resources = [ConfigResource(ResourceType.TOPIC, topic) for topic in topics]
        try:
            futures = self._target.describe_configs(resources, request_timeout=CREATE_TIMEOUT_S)
            wait_for_answers(futures.values(), self._state)
        except KafkaException as exc:
            log.debug("cannot read the target topics' configs: %s", exc)
            return
        for resource, future in futures.items():
            try:
                entry = future.result().get("max.message.bytes")
            except KafkaException as exc:  # no DESCRIBE_CONFIGS permission, say: not needed to mirror
                log.debug("cannot read %s's configs: %s", resource.name, exc)
                continue
            if entry is None or entry.value is None:
                continue
            limit = int(entry.value)
            self.max_message_bytes[resource.name] = limit
            if 0 < limit < self._batch_bytes:
                log.warning("Target topic %s takes batches of at most %d bytes (max.message.bytes), "
                            "less than the producer's batch.size of %d: the target refuses a fuller "
                            "batch as a whole (librdkafka does not split it as Java's producer does) "
                            "and the mirror stops; set batch.size to at most %d in --producer.config",
                            resource.name, limit, self._batch_bytes, limit)

    def short_topics(self, mapping: Dict[str, Iterable[str]]) -> Dict[str, Tuple[str, int, int]]:
        """Target topics with fewer partitions than their source topic: target topic -> (source
        topic, target count, source count), the largest source count where several map to one.
        Raises KafkaException when a cluster cannot be listed now."""
        source = list_topic_partitions(self._source, state=self._state)
        target = list_topic_partitions(self._target, state=self._state)
        short: Dict[str, Tuple[str, int, int]] = {}
        for src, dsts in mapping.items():
            for dst in dsts:
                if src in source and dst in target and target[dst] < source[src] \
                        and source[src] > short.get(dst, ("", 0, 0))[2]:
                    short[dst] = (src, target[dst], source[src])
        return short

    def require_partitions(self, mapping: Dict[str, List[str]], grow: bool, why: str) -> None:
        """Each target topic has at least its source topic's partitions, where records keep their
        partition number (``why``: what keeps it), before a record of a new partition is sent
        there: grown to the source's count (``grow``: the mirror keeps partitions in line, as
        MirrorMaker 2 does at each start), else one clear line."""
        try:
            short = self.short_topics(mapping)
        except KafkaException as exc:
            if not self._stopping():
                log.warning("Cannot compare partition counts now (%s)", exc.args[0].str())
            return
        if not short:
            return
        if grow:
            refused = self.grow(short)
            if refused:
                dst = min(refused)
                raise ClientFailed(f"{why} keeps partition numbers, and target topic {dst} cannot grow to the "
                                   f"{short[dst][2]} partitions of source topic {short[dst][0]}: {refused[dst]}")
            return
        dst, (src, target_count, source_count) = min(short.items())
        raise ClientFailed(f"{why} keeps partition numbers: target topic {dst} has {target_count} partitions, "
                           f"fewer than the {source_count} of source topic {src}; add partitions to the target "
                           f"topic (or --refresh.topics.enabled true grows it)")

    def grow(self, short: Dict[str, Tuple[str, int, int]]) -> Dict[str, str]:
        """Target topics grown to their source topics' partition counts (``short_topics``); the
        ones that could not grow, with why (one WARN each). A topic grown meanwhile
        (INVALID_PARTITIONS, as MirrorMaker 2 takes it) has grown."""
        if not short:
            return {}
        futures = self._target.create_partitions([NewPartitions(dst, count) for dst, (_s, _t, count) in short.items()],
                                                 request_timeout=CREATE_TIMEOUT_S)
        refused: Dict[str, str] = {}
        for dst, future in futures.items():
            try:
                future.result()
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.INVALID_PARTITIONS:
                    refused[dst] = exc.args[0].str()
                    log.warning("Cannot add partitions to target topic %s: %s", dst, refused[dst])
                continue
            log.info("Target topic %s grew from %d to %d partitions (as its source topic)", dst, *short[dst][1:])
        return refused

    def fresh(self, topic: str, partition: int) -> bool:
        """Whether this process created ``topic`` and this is the first ask for ``partition``: its
        next record lands at offset 0 (the first owner's; a later one finds records there)."""
        try:
            self._fresh.remove((topic, partition))
        except KeyError:
            return False
        return True

    def retry_pending(self) -> None:
        """Check again the topics an unreachable cluster kept us from checking."""
        if self._pending:
            mapping: Dict[str, List[str]] = {}
            for src, dst in list(self._pending):
                mapping.setdefault(src, []).append(dst)
            self.ensure(mapping)

    def _create(self, missing: Iterable) -> None:
        counts = list_topic_partitions(self._source, state=self._state)  # KafkaException: retried by the caller
        new_topics = {}
        for src, dst in sorted(missing):
            if src in counts and dst not in new_topics:
                configs = self._new_topic_configs(src) if self._new_topic_configs else {}
                new_topics[dst] = NewTopic(dst, num_partitions=counts[src],
                                           replication_factor=self._replication_factor or -1,
                                           config=configs)
        if not new_topics:
            return
        futures = self._target.create_topics(list(new_topics.values()),
                                             operation_timeout=CREATE_TIMEOUT_S,
                                             request_timeout=CREATE_TIMEOUT_S)
        wait_for_answers(futures.values(), self._state)  # KafkaException at a stop: the caller's retry
        for name, future in futures.items():
            try:
                future.result()
                log.info("Created target topic %s with %d partitions (as on the source)%s", name,
                         new_topics[name].num_partitions,
                         f", configs {new_topics[name].config}" if new_topics[name].config else "")
                self._fresh.update((name, p) for p in range(new_topics[name].num_partitions))
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
                    raise ClientFailed(f"target topic {name} is missing and cannot be created: "
                                       f"{exc.args[0].str()}") from None
            self._known.add(name)
