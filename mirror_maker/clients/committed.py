"""A consumer's committed offsets, read so that an offset not read is never taken for none.

librdkafka answers ``committed()`` per partition: a partition whose offset could not be read
(its group coordinator loading, a pending transaction's offsets past the timeout) comes back
with an error and offset -1001, the same offset as a partition that has none. Taken for none,
it starts where ``auto.offset.reset`` says (the end, with ``latest``), past records never
mirrored. Here a partition's error is raised, and retried as a commit is.
"""

from __future__ import annotations

from typing import List

from confluent_kafka import KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from .retry import commit_retrying


def read_committed_offsets(consumer, partitions: List[KafkaTopicPartition], timeout_s: float,
                           retrying=commit_retrying) -> List[KafkaTopicPartition]:
    """``consumer.committed(partitions)``; raises the first partition's error, if any."""
    def read() -> List[KafkaTopicPartition]:
        answer = consumer.committed(partitions, timeout=timeout_s)
        failed = [tp.error for tp in answer if tp.error is not None]
        if failed:
            raise KafkaException(failed[0])
        return answer
    return retrying()(read)
