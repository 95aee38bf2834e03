"""Plugins that fail on purpose, loaded by the mirror subprocess in the failure tests."""

from mirror_maker import MessageHandler, ProducerRecord, RebalanceListener


class FailOnValue(MessageHandler):
    """Mirrors records unchanged, but raises on the record whose value is the args string."""

    def __init__(self, poison: str) -> None:
        self.poison = poison.encode()

    def handle(self, record):
        if record.value == self.poison:
            raise ValueError("cannot handle this record")
        return [ProducerRecord(record.topic, record.value, record.key, timestamp=record.timestamp,
                               headers=record.headers)]


class FailOnAssign(RebalanceListener):
    def on_partitions_assigned(self, partitions):
        raise RuntimeError("listener is broken")
