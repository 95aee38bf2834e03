"""The default handler's record mapping: Kafka's MirrorMakerTest cases, and MM2's partition-keeping one."""

from mirror_maker import ConsumerRecord, ProducerRecord
from mirror_maker.handlers import DefaultMessageHandler, PartitionPreservingHandler

HEADERS = [("h1", b"v1"), ("h1", b"dup"), ("none", None)]


def record(timestamp=1234):
    return ConsumerRecord("topic", 3, 42, timestamp, b"key", b"value", HEADERS)


def test_default_handler_keeps_timestamp_key_value_headers_not_partition():
    assert DefaultMessageHandler().handle(record()) == [
        ProducerRecord("topic", b"value", b"key", None, 1234, HEADERS)]


def test_default_handler_without_timestamp():
    (out,) = DefaultMessageHandler().handle(record(timestamp=None))
    assert out.timestamp is None


def test_default_handler_tombstone():
    (out,) = DefaultMessageHandler().handle(ConsumerRecord("t", 0, 0, None, b"k", None, []))
    assert out.value is None and out.key == b"k"


def test_partition_preserving_handler_keeps_the_partition():
    (out,) = PartitionPreservingHandler().handle(record())
    assert out.partition == 3 and out.headers == HEADERS


def test_default_target_topic_is_the_source_topic():
    assert list(DefaultMessageHandler().target_topics("orders")) == ["orders"]
