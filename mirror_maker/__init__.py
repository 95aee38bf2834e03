"""kafka-mirror-maker for Python: a drop-in replacement for Kafka's ``kafka-mirror-maker.sh``.

The mirror maker consumes from a source cluster and produces to a target cluster.
It runs ``--num.streams`` mirror threads; each has its own consumer in one consumer group,
and all of them share one producer. Each thread periodically flushes the producer and only
then commits its consumer's offsets, so no offset is committed before the target has
acknowledged every record below it (at-least-once delivery).

No-data-loss defaults (each may be overridden, with a warning naming the risk):
consumer ``enable.auto.commit=false``; producer ``acks=all``, idempotence on,
``max.in.flight.requests.per.connection=1``, the maximum delivery timeout, and a produce that
waits when the local queue is full; ``--abort.on.send.failure true`` stops the whole mirror
at the first record that cannot be delivered, without committing past it.

The public plugin API lives in this module: :class:`ConsumerRecord`, :class:`ProducerRecord`,
:class:`TopicPartition`, :class:`MessageHandler` and :class:`RebalanceListener`.
"""

__version__ = "0.1.0"

from .handlers import MessageHandler
from .listeners import RebalanceListener
from .records import ConsumerRecord, ProducerRecord, TopicPartition

__all__ = [
    "ConsumerRecord",
    "MessageHandler",
    "ProducerRecord",
    "RebalanceListener",
    "TopicPartition",
    "__version__",
]
