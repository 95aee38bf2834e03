"""A filtering handler: mirror only records whose key does not start with a given prefix.

    kafka-mirror-maker ... --message.handler filtering_handler.SkipKeyPrefix \
                           --message.handler.args "internal-"

(Put this folder on PYTHONPATH, or run from it.) Filtered records still count as consumed:
their offsets are committed, so they are not read again.
"""

from mirror_maker import MessageHandler, ProducerRecord


class SkipKeyPrefix(MessageHandler):
    def __init__(self, prefix: str) -> None:
        self.prefix = prefix.encode()

    def handle(self, record):
        if record.key is not None and record.key.startswith(self.prefix):
            return []
        return [ProducerRecord(record.topic, record.value, record.key,
                               timestamp=record.timestamp, headers=record.headers)]
