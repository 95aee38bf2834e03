"""Which partitions a stream owns: the source group's (MirrorMaker v1), or a static shard
(exactly-once). Both report to the stream the same way (``partitions_assigned``, ``_revoked``,
``_lost``), so what an assignment resolves and what a revoke commits is the stream's, once.
"""

from __future__ import annotations

import logging
import time
from typing import Dict, List

from confluent_kafka import TopicPartition as KafkaTopicPartition

from ..callbacks import client_callback
from ..records import TopicPartition
from .stream import describe

log = logging.getLogger("mirror_maker.worker")

#: librdkafka's "no offset": it reads the group's committed offset (or reports a reset).
INVALID_OFFSET = -1001
#: How long a stop serves the group's revoke before closing the consumer, in consume() calls of
#: this length: librdkafka's consume goes on waiting out its timeout after serving a callback,
#: and the revoke has paused the partitions, so no record ends it sooner.
CLOSE_REVOKE_S = 5.0
CLOSE_REVOKE_STEP_S = 0.005


def _ktps(tps, positions: Dict[TopicPartition, int]) -> List[KafkaTopicPartition]:
    return [KafkaTopicPartition(tp.topic, tp.partition, positions.get(tp, INVALID_OFFSET)) for tp in tps]


class GroupMembership:
    """The stream's consumer in the source group: subscribed to the matching topics (refreshed
    by the runner's subscription), the group's assignments passed to the stream."""

    #: A member of the source group: a wait for the target must keep its place (``Stream.keep_alive``).
    in_group = True

    def __init__(self, stream, consumer, subscription, incremental: bool, batch_size: int,
                 static_member: bool) -> None:
        self._stream = stream
        self._consumer = consumer
        self._subscription = subscription
        self._incremental = incremental
        self._batch_size = batch_size
        self._static = static_member
        self._version = -1
        self._topics = None
        self._subscribed = False

    def follow(self) -> bool:
        if self._subscription.version != self._version:
            version, topics = self._subscription.current()
            self._version = version
            if topics == self._topics:
                return self._subscribed  # only a partition count changed: the group follows it itself
            self._topics = topics
            self._subscribed = bool(topics)
            if topics:
                self._consumer.subscribe(topics, on_assign=self._on_assign, on_revoke=self._on_revoke,
                                         on_lost=self._on_lost)
                self._stream.log.info("Subscribed to %d topics", len(topics))
            else:
                # The loop makes no consume call while nothing matches: the revoke is served
                # here, or the partitions would keep their pending offsets until the topics
                # come back, and be committed to them.
                self._consumer.unsubscribe()
                self._serve_revoke()
        return self._subscribed

    @property
    def topics(self):
        """The topics subscribed to (raw mode connects to their leaders before the group assigns)."""
        return self._topics or []

    @client_callback
    def _on_assign(self, consumer, partitions) -> None:
        tps = [TopicPartition(p.topic, p.partition) for p in partitions]
        self._stream.partitions_assigned(tps, lambda starts: self._assign(_ktps(tps, starts)))

    def _assign(self, partitions: List[KafkaTopicPartition]) -> None:
        if self._incremental:
            self._consumer.incremental_assign(partitions)
        else:
            self._consumer.assign(partitions)

    @client_callback
    def _on_revoke(self, consumer, partitions) -> None:
        self._stream.partitions_revoked([TopicPartition(p.topic, p.partition) for p in partitions])

    @client_callback
    def _on_lost(self, consumer, partitions) -> None:
        self._stream.partitions_lost([TopicPartition(p.topic, p.partition) for p in partitions])

    def restart(self, positions: Dict[TopicPartition, int]) -> None:
        """Fetch these partitions again from these positions: librdkafka stops fetching a
        partition whose reset it reported, and only a new assignment starts it again (a seek is
        refused then). With an eager assignor the whole assignment is given again, the other
        partitions at the stream's own positions (what was prefetched is fetched again)."""
        if self._incremental:
            self._consumer.incremental_unassign(_ktps(positions, {}))
            self._consumer.incremental_assign(_ktps(positions, positions))
        else:
            everything = {**self._stream.positions, **positions}
            self._consumer.assign(_ktps(sorted(self._stream.assigned), everything))

    def close(self) -> None:
        self._revoke_before_close()
        self._consumer.close()  # leaves the group: the partitions move at once

    def _revoke_before_close(self) -> None:
        """Leave the group and serve the revoke in consume() calls, while the group still
        answers, so that close() has nothing left to revoke: a rebalance callback served in
        close() can hang with the GIL held (https://github.com/confluentinc/librdkafka/issues/4041).
        Records consume() returns here are dropped. Not for a static member: its unsubscribe
        would send the LeaveGroup that KIP-345 leaves out."""
        if not self._subscribed or self._static:
            return
        try:
            self._consumer.unsubscribe()
        except Exception as exc:  # the consumer failed or was fenced: close() still leaves
            self._stream.log.debug("unsubscribe before close: %s", exc, exc_info=True)
            return
        self._serve_revoke()

    def _serve_revoke(self) -> None:
        """After an unsubscribe: serve the revoke in consume() calls, bounded (the records they
        return are dropped: read again by the partitions' next owner)."""
        consumer, stream = self._consumer, self._stream
        deadline = stream.within_stop(CLOSE_REVOKE_S)
        try:
            consumer.consume(self._batch_size, 0)  # serves what is queued: the revoke, or an assignment first
            while stream.assigned and time.monotonic() < deadline:
                consumer.consume(1, min(CLOSE_REVOKE_STEP_S, max(0.0, deadline - time.monotonic())))
        except Exception as exc:  # the consumer failed or was fenced
            stream.log.debug("serving the revoke after unsubscribe: %s", exc, exc_info=True)
        if stream.assigned:
            stream.log.debug("%s still assigned after unsubscribe", describe(stream.assigned))


class ShardMembership:
    """Exactly-once's static shards: stream n of ``--num.streams`` N owns the partitions whose
    stable hash is n mod N (``offsets.transactional.shard_partitions``), as topics come and go.
    The target's group coordinator cannot check the source group's generation, so partitions are
    not handed out by a group: a shard's transactional.id fences whoever ran it before."""

    in_group = False

    def __init__(self, stream, consumer, subscription, shards: int) -> None:
        from ..offsets.transactional import shard_partitions

        self._stream = stream
        self._consumer = consumer
        self._subscription = subscription
        self._shards = shards
        self._mine = lambda partitions: set(shard_partitions(partitions, stream.index, shards))
        self._version = -1

    def follow(self) -> bool:
        version, partitions = self._subscription.partitions()
        if version != self._version:
            self._version = version
            stream = self._stream
            wanted = self._mine(partitions)
            gone, new = sorted(stream.assigned - wanted), sorted(wanted - stream.assigned)
            if gone:
                stream.partitions_revoked(gone)
                self._consumer.incremental_unassign(_ktps(gone, {}))
            if new:
                stream.partitions_assigned(new, lambda starts: self._consumer.incremental_assign(_ktps(new, starts)))
            stream.rebalanced = True
        return bool(self._stream.assigned)

    def restart(self, positions: Dict[TopicPartition, int]) -> None:
        self._consumer.incremental_unassign(_ktps(positions, {}))
        self._consumer.incremental_assign(_ktps(positions, positions))

    def close(self) -> None:
        self._consumer.close()
