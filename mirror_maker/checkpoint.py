"""Flush, then commit: the only place where the no-data-loss commit rule lives.

A thread records ``offset + 1`` per partition after a record's outputs were handed to the
producer (or after the handler filtered it out). A commit first flushes the *shared*
producer; only if every queued record was acknowledged, and no fatal failure happened, does it
commit those offsets synchronously. So a committed offset never passes an undelivered record.

Where offsets go is behind :class:`OffsetCommitter`, so an exactly-once mode can commit them
inside the target's transaction instead.
"""

from __future__ import annotations

import logging
import time
from typing import Dict, Iterable, Optional

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from .errors import ClientFailed
from .producer import MirrorProducer
from .records import TopicPartition
from .retry import REBALANCE_CODES, commit_retrying, error_code, is_retriable
from .state import RunState

log = logging.getLogger(__name__)


class OffsetCommitter:
    """Commits offsets to the source cluster through the thread's consumer (MirrorMaker v1)."""

    def __init__(self, consumer, retrying=commit_retrying) -> None:
        self._consumer = consumer
        self._retrying = retrying

    def commit(self, offsets: Dict[TopicPartition, int]) -> Dict[TopicPartition, int]:
        """Commit synchronously; return the offsets that were committed.

        Retriable errors are retried (bounded, logged). A commit refused because the group
        rebalanced, or one whose retries ran out, commits nothing this time (the offsets stay
        pending). Offsets of topics that no longer exist are dropped. Anything else is fatal.
        """
        request = [KafkaTopicPartition(tp.topic, tp.partition, off) for tp, off in offsets.items()]
        try:
            result = self._retrying()(self._consumer.commit, offsets=request, asynchronous=False)
        except KafkaException as exc:
            return self._failed(exc, offsets)
        committed = {}
        for tp in result or []:
            key = TopicPartition(tp.topic, tp.partition)
            if tp.error is None:
                committed[key] = tp.offset
            elif tp.error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                log.warning("Dropping the offset of %s-%d: the topic no longer exists",
                            tp.topic, tp.partition)
                committed[key] = tp.offset
            else:
                log.warning("Offset commit for %s-%d failed: %s", tp.topic, tp.partition, tp.error.str())
        return committed

    def _failed(self, exc: KafkaException, offsets):
        code = error_code(exc)
        if code == KafkaError._NO_OFFSET:
            return dict(offsets)
        if code in REBALANCE_CODES:
            log.warning("Offset commit failed because the consumer group rebalanced (%s); the "
                        "offsets will be committed by the partitions' next owner. If this repeats, "
                        "raise max.poll.interval.ms or session.timeout.ms, or lower max.poll.records.",
                        exc.args[0].str())
            return {}
        if code == KafkaError.UNKNOWN_TOPIC_OR_PART:
            log.warning("Offset commit failed: a topic no longer exists; dropping its offsets")
            return dict(offsets)
        if is_retriable(exc):
            log.warning("Offset commit still failing after retries (%s); will try again at the "
                        "next commit interval. Nothing is lost: the records stay uncommitted.",
                        exc.args[0].str())
            return {}
        raise ClientFailed(f"offset commit failed: {exc.args[0].str()}")


class Checkpoint:
    """One mirror thread's pending offsets and its flush-then-commit cycle."""

    def __init__(
        self,
        producer: MirrorProducer,
        committer: OffsetCommitter,
        state: RunState,
        interval_ms: int,
        clock=time.monotonic,
        metrics=None,
    ) -> None:
        self._producer = producer
        self._committer = committer
        self._state = state
        self._interval_s = interval_ms / 1000.0
        self._clock = clock
        self._metrics = metrics
        self._last_commit = clock()
        self.pending: Dict[TopicPartition, int] = {}

    def due(self) -> bool:
        return self._clock() - self._last_commit > self._interval_s

    def discard(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            self.pending.pop(tp, None)

    def commit(self, partitions: Optional[Iterable[TopicPartition]] = None,
               deadline: Optional[float] = None) -> bool:
        """Flush the shared producer, then commit (only ``partitions``, if given).

        Returns False, committing nothing, when the flush did not complete or a fatal failure
        has been recorded.
        """
        self._last_commit = self._clock()
        if self._state.failed:
            log.info("Exiting on send failure, skip committing offsets.")
            return False
        started = time.monotonic()
        wanted = set(partitions) if partitions is not None else None
        offsets = {tp: off for tp, off in self.pending.items() if wanted is None or tp in wanted}
        if not self._producer.flush(deadline):
            return False
        if not offsets:
            return True
        committed = self._committer.commit(offsets)
        for tp, offset in committed.items():
            if self.pending.get(tp) == offset:
                del self.pending[tp]
        if self._metrics is not None:
            self._metrics.committed(time.monotonic() - started)
        return True
