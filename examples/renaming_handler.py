"""A topic-renaming handler: ``orders`` on the source becomes ``<prefix>orders`` on the target.

    kafka-mirror-maker ... --message.handler renaming_handler.PrefixTopics \
                           --message.handler.args "dc1."

``target_topics`` tells the mirror which target topics to create (with the source's partition
count) when a source topic is assigned.
"""

from mirror_maker import MessageHandler, ProducerRecord


class PrefixTopics(MessageHandler):
    def __init__(self, prefix: str) -> None:
        self.prefix = prefix

    def handle(self, record):
        return [ProducerRecord(self.prefix + record.topic, record.value, record.key,
                               timestamp=record.timestamp, headers=record.headers)]

    def target_topics(self, source_topic):
        return [self.prefix + source_topic]
