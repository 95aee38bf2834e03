"""A handler for shallow mirroring (``--use.raw.bytes``, KIP-712): it sees each whole batch as a
description (topic, partition, offsets, codec, size), never its records, and decides where it
goes: here, ``orders`` becomes ``<prefix>orders`` on the target, and batches of topics whose
name ends in ``.tmp`` are dropped (their offsets are still committed).

    kafka-mirror-maker ... --use.raw.bytes --message.handler raw_batch_handler.PrefixTopics \
                           --message.handler.args "dc1."
"""

from mirror_maker import RawBatchHandler


class PrefixTopics(RawBatchHandler):
    def __init__(self, prefix: str) -> None:
        self.prefix = prefix

    def handle_batch(self, batch):
        if batch.topic.endswith(".tmp"):
            return None
        return self.prefix + batch.topic

    def target_topics(self, source_topic):
        return [] if source_topic.endswith(".tmp") else [self.prefix + source_topic]
