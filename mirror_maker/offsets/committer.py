"""Where a mirror thread's offsets go once the target acknowledged the records below them.

MirrorMaker v1 commits them to the source cluster's consumer group, through the thread's own
consumer: :class:`OffsetCommitter`. It is the seam an exactly-once mode replaces (offsets
committed on the target, inside the transaction that wrote the records).
"""

from __future__ import annotations

import logging
from typing import Dict, Optional

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from ..clients.retry import REBALANCE_CODES, commit_retrying, error_code, is_retriable, stop_at
from ..errors import ClientFailed
from ..records import TopicPartition

log = logging.getLogger("mirror_maker.checkpoint")


class OffsetCommitter:
    """Commits offsets to the source cluster through the thread's consumer (MirrorMaker v1)."""

    def __init__(self, consumer, retrying=commit_retrying) -> None:
        self._consumer = consumer
        self._retrying = retrying

    def commit(self, offsets: Dict[TopicPartition, int],
               deadline: Optional[float] = None) -> Dict[TopicPartition, int]:
        """Commit synchronously; return the offsets that were committed.

        Retriable errors are retried (bounded, logged; no new attempt after ``deadline``, a
        ``time.monotonic()`` value). A commit refused because the group rebalanced, or one whose
        retries ran out, commits nothing this time (the offsets stay pending). Offsets of
        topics that no longer exist are dropped. Anything else is fatal.
        """
        request = [KafkaTopicPartition(tp.topic, tp.partition, off) for tp, off in offsets.items()]
        retrying = self._retrying()
        if deadline is not None:
            retrying = retrying.copy(stop=retrying.stop | stop_at(deadline))
        try:
            result = retrying(self._consumer.commit, offsets=request, asynchronous=False)
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
