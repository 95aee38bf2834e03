"""Java's ``poll()`` on a confluent consumer: what is there, returned as soon as anything is.

librdkafka's batch consume, ``consume(n, timeout)``, returns only once it holds ``n`` messages or
the timeout has passed, so asking it for ``max.poll.records`` would hold every short batch (the
last records of a backlog, a trickle of traffic) for the whole timeout. Java's
``KafkaConsumer.poll`` (MirrorMaker v1's loop) returns what it has as soon as it has any, with
``max.poll.records`` as the most, not a count to wait for.
"""

from __future__ import annotations

from typing import List


def poll(consumer, max_records: int, timeout: float) -> List:
    """Up to ``max_records`` messages (events and errors included, as ``consume`` gives them):
    those already fetched at once; else waits up to ``timeout`` for the first and takes the
    others that came with it. Rebalance and error callbacks are served by either call."""
    messages = consumer.consume(max_records, 0)
    if messages or timeout <= 0:
        return messages
    messages = consumer.consume(1, timeout)
    if messages and max_records > 1:
        messages.extend(consumer.consume(max_records - 1, 0))
    return messages
