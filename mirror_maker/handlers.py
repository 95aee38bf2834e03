"""Message handlers: turn one source record into zero or more target records.

A handler is any object with ``handle(record) -> iterable of ProducerRecord`` (or a plain
function of that shape). Returning nothing filters the record out; its offset still advances.
"""

from __future__ import annotations

from typing import Iterable, List, Optional

from .records import ConsumerRecord, ProducerRecord, RawBatch


class MessageHandler:
    """Base class for handlers; subclassing it is optional, having ``handle`` is what counts.

    Example, a handler that renames topics (built with ``--message.handler.args 'mirror.'``)::

        class PrefixHandler(MessageHandler):
            def __init__(self, prefix):
                self.prefix = prefix

            def handle(self, record):
                return [ProducerRecord(self.prefix + record.topic, record.value, record.key,
                                       timestamp=record.timestamp, headers=record.headers)]

            def target_topics(self, source_topic):
                return [self.prefix + source_topic]
    """

    def handle(self, record: ConsumerRecord) -> Iterable[ProducerRecord]:
        raise NotImplementedError

    def target_topics(self, source_topic: str) -> Iterable[str]:
        """The target topics this handler writes records of ``source_topic`` to.

        The mirror makes sure they exist on the target (with the source's partition count)
        when the source topic is assigned. Override it when the handler renames topics; return
        an empty list to opt out of topic creation.
        """
        return [source_topic]


class DefaultMessageHandler(MessageHandler):
    """MirrorMaker v1's handler: same topic, key, value, headers and timestamp; no partition.

    The producer's partitioner (murmur2, as Java's) then picks the partition from the key.
    The worker recognises this class (and the one below) and takes a fast path that builds no
    record objects.
    """

    #: Whether the target record keeps the source partition.
    keep_partition = False

    def handle(self, record: ConsumerRecord) -> List[ProducerRecord]:
        return [
            ProducerRecord(
                record.topic,
                record.value,
                record.key,
                record.partition if self.keep_partition else None,
                record.timestamp,
                record.headers,
            )
        ]


class PartitionPreservingHandler(DefaultMessageHandler):
    """MirrorMaker 2's mapping: like the default, but the record keeps its source partition.

    The target topic needs at least as many partitions as the source; topics the mirror
    creates get the source's partition count.
    """

    keep_partition = True


class FunctionHandler(MessageHandler):
    """Adapts a plain ``handle(record)`` function to the handler interface."""

    def __init__(self, function):
        self._function = function
        self.handle = function  # type: ignore[method-assign]

    def __repr__(self) -> str:
        return f"FunctionHandler({self._function!r})"


class RawBatchHandler:
    """Base class for handlers on the raw path (``--use.raw.bytes``), KIP-712's contract: a
    handler decides where a whole batch goes, never sees or changes its records.

    ``handle_batch(batch)`` returns the target topic's name (the batch keeps its partition
    number), or None to drop the batch (its offsets are still committed). A class with
    ``handle_batch`` is a raw handler; one with only ``handle(record)`` cannot run with
    ``--use.raw.bytes``.
    """

    def handle_batch(self, batch: RawBatch) -> Optional[str]:
        return batch.topic

    def target_topics(self, source_topic: str) -> Iterable[str]:
        """Every target topic batches of ``source_topic`` may go to: created when missing, with the
        source's partitions, before the first batch. A batch sent to a topic not named here
        stops the mirror (that topic would never be ready for it)."""
        return [source_topic]


def is_raw_handler(handler) -> bool:
    return callable(getattr(handler, "handle_batch", None))
