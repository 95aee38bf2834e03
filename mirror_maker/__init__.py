"""kafka-mirror-maker for Python: a drop-in replacement for Kafka's ``kafka-mirror-maker.sh``.

The mirror maker consumes from a source cluster and produces to a target cluster.
It runs ``--num.streams`` mirror threads; each has its own consumer in one consumer group,
and all of them share one producer. Each thread periodically flushes the producer and only
then commits its consumer's offsets, so no offset is committed before the target has
acknowledged every record below it (at-least-once delivery).

No-data-loss defaults (each may be overridden, with a warning naming the risk):
consumer ``enable.auto.commit=false``; producer ``acks=all``, idempotence on (which keeps order
with ``max.in.flight.requests.per.connection=5``), the maximum delivery timeout, and a produce that
waits when the local queue is full; ``--abort.on.send.failure true`` stops the whole mirror
at the first record that cannot be delivered, without committing past it.

The public plugin API lives in this module: :class:`ConsumerRecord`, :class:`ProducerRecord`,
:class:`TopicPartition`, :class:`MessageHandler` and :class:`RebalanceListener`; for shallow
mirroring (``--use.raw.bytes``), :class:`RawBatch` and :class:`RawBatchHandler`.

Layout: the API-level modules a plugin or a user may import sit here (``records``, ``handlers``,
``listeners``, ``plugins``, ``errors``), with ``demo``, ``embedded`` and ``redaction`` (the
configuration's secrets, kept out of every line written); the rest is grouped by
concern, each subpackage saying what it may import: ``cli`` (command line, exit codes),
``config`` (files and options to one configuration), ``clients`` (producer, admin, client errors,
retries), ``engine`` (runner, mirror threads), ``offsets`` (flush-then-commit and where offsets
go), ``ops`` (logs, metrics, status, endpoint) and ``spark``. Log lines name their logger with the
names these modules had before the split (``mirror_maker.worker``, ``mirror_maker.producer``, ...),
so what users grep for does not change.
"""

__version__ = "0.1.0"

from .handlers import MessageHandler, RawBatchHandler
from .listeners import RebalanceListener
from .records import ConsumerRecord, ProducerRecord, RawBatch, TopicPartition

__all__ = [
    "ConsumerRecord",
    "MessageHandler",
    "ProducerRecord",
    "RawBatch",
    "RawBatchHandler",
    "RebalanceListener",
    "TopicPartition",
    "__version__",
]
