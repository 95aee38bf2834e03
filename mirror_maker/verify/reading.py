"""Reading one cluster's partitions from their log start to the ends taken when the check began.

One consumer per cluster, assigned every partition at once (librdkafka fetches them side by side),
``read_committed`` (an aborted transaction's records are not data; the markers are not records),
never in a group and never committing. A partition is done at its end, at ``sample`` records, or
at the deadline: what is not done by then is returned, for the report to say so.
"""

from __future__ import annotations

import time
from typing import Callable, Dict, Optional, Set, Tuple

import confluent_kafka
from confluent_kafka import KafkaError
from confluent_kafka import TopicPartition as KafkaTopicPartition

from ..clients.admin import connection_settings
from ..errors import ClientFailed
from ..ops.log import librdkafka_logger
from ..records import TopicPartition

#: Records taken from librdkafka per call: enough to keep its fetch queue draining at full speed.
BATCH = 10000
WATERMARKS_TIMEOUT_S = 30.0

Bounds = Dict[TopicPartition, Tuple[int, int]]
OnRecord = Callable[[TopicPartition, "confluent_kafka.Message"], None]


def consumer_for(conf: Dict[str, str], client_id: str,
                 isolation: str = "read_committed") -> "confluent_kafka.Consumer":
    """``isolation``: read_committed reads and ends at the last stable offset (librdkafka asks
    ListOffsets with it); read_uncommitted gives the high watermark."""
    settings = connection_settings(conf)
    settings.update({"group.id": client_id, "client.id": client_id, "enable.auto.commit": False,
                     "enable.partition.eof": True, "isolation.level": isolation,
                     "auto.offset.reset": "earliest", "logger": librdkafka_logger(client_id)})
    return confluent_kafka.Consumer(settings)


def watermarks(consumer, partitions) -> Bounds:
    """Each partition's (log start, end) now; the end is the last stable offset for a
    read_committed consumer."""
    bounds: Bounds = {}
    for tp in partitions:
        try:
            bounds[tp] = consumer.get_watermark_offsets(KafkaTopicPartition(tp.topic, tp.partition),
                                                        timeout=WATERMARKS_TIMEOUT_S, cached=False)
        except confluent_kafka.KafkaException as exc:
            raise ClientFailed(f"cannot read the offsets of {tp.topic}-{tp.partition}: {exc.args[0].str()}") from None
    return bounds


def open_transactions(conf: Dict[str, str], stable: Bounds, client_id: str) -> Dict[TopicPartition, int]:
    """The partitions of ``stable`` (read_committed ends) whose high watermark is past that end: a
    transaction is open there, and what follows it is not readable yet (its last stable offset)."""
    consumer = consumer_for(conf, client_id, "read_uncommitted")
    try:
        high = watermarks(consumer, list(stable))
    finally:
        consumer.close()
    return {tp: stable[tp][1] for tp in stable if high[tp][1] > stable[tp][1]}


def read(consumer, bounds: Bounds, on_record: OnRecord, deadline: float, sample: Optional[int] = None,
         progress: Optional[Callable[[int], None]] = None) -> Set[TopicPartition]:
    """Hands every record of ``bounds`` to ``on_record`` in offset order per partition; returns the
    partitions not read to their end (or ``sample``) before ``deadline``."""
    remaining = {tp for tp, (low, end) in bounds.items() if end > low}
    counts = dict.fromkeys(remaining, 0)
    if remaining:
        consumer.assign([KafkaTopicPartition(tp.topic, tp.partition, bounds[tp][0]) for tp in remaining])

    def done(tp: TopicPartition) -> None:
        remaining.discard(tp)
        consumer.incremental_unassign([KafkaTopicPartition(tp.topic, tp.partition)])

    while remaining and time.monotonic() < deadline:
        messages = consumer.consume(BATCH, min(0.5, max(0.0, deadline - time.monotonic())))
        for message in messages:
            tp = TopicPartition(message.topic(), message.partition())
            if tp not in remaining:
                continue
            end = bounds[tp][1]
            error = message.error()
            if error is not None:
                if error.code() == KafkaError._PARTITION_EOF:
                    if message.offset() >= end:
                        done(tp)
                    continue
                if error.fatal() or not error.retriable():
                    raise ClientFailed(f"cannot read {tp.topic}-{tp.partition}: {error.str()}")
                continue
            offset = message.offset()
            if offset >= end:
                done(tp)
                continue
            on_record(tp, message)
            counts[tp] += 1
            if offset == end - 1 or (sample is not None and counts[tp] >= sample):
                done(tp)
        if progress is not None and messages:
            progress(len(messages))
    return remaining
