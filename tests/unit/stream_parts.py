"""Stand-ins for the clients around one stream, and a stream built on them as a mode builds it.

The stream, its membership, source, copier and checkpoint are the real ones; the consumer, the
producer and the committer are recorders, so the tests see exactly what is sent, what becomes
pending and what is committed, and when.
"""

import re
from typing import List

from confluent_kafka import TIMESTAMP_CREATE_TIME, KafkaError, Message
from confluent_kafka import TopicPartition as KafkaTopicPartition

from mirror_maker.clients.producer import SendInterrupted
from mirror_maker.config.mirror_config import MirrorMakerConfig
from mirror_maker.engine.copier import RecordCopier
from mirror_maker.engine.membership import GroupMembership
from mirror_maker.engine.modes import SharedSink
from mirror_maker.engine.parts import Parts, Shared
from mirror_maker.engine.positions import ResetPolicy, StartPositions
from mirror_maker.engine.record_source import RecordSource
from mirror_maker.engine.state import RunState
from mirror_maker.engine.stream import Stream
from mirror_maker.errors import SendFailed
from mirror_maker.handlers import DefaultMessageHandler
from mirror_maker.ops.metrics import MirrorMetrics
from mirror_maker.records import ProducerRecord, TopicPartition

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


def Msg(topic, partition, offset, value=b"v", key=b"k", ts=1000, headers=None, error=None) -> Message:
    """A confluent Message as a consumer returns it (the hot path reads it through the class's own
    accessors, so a look-alike would not do)."""
    return Message(topic=topic, partition=partition, offset=offset, key=key, value=value, headers=headers,
                   error=error, timestamp=(TIMESTAMP_CREATE_TIME, ts))


class Producer:
    """Records what is produced; ``interrupt_at``/``fail_at``: the n-th record finds the queue
    full and a stop arrives meanwhile, or is refused and fails the run (abort on send failure);
    ``reject_at``: the n-th record is rejected locally (too large)."""

    def __init__(self, state, events, interrupt_at=None, fail_at=None, flush_ok=True, reject_at=None, sync=False):
        self.state, self.events, self.sync = state, events, sync
        self.sent, self.interrupt_at, self.fail_at, self.flush_ok = [], interrupt_at, fail_at, flush_ok
        self.reject_at = reject_at
        self.others_flushing = False
        self.flush_deadlines = []
        self.produced = 0
        self.callbacks = []
        self.errors = None

    def produce(self, topic, value, key, partition, callback, on_delivery, timestamp, headers):
        from confluent_kafka import KafkaException

        n = len(self.sent)
        if n == self.interrupt_at:
            raise BufferError
        if n in (self.reject_at, self.fail_at):
            if n == self.reject_at:
                self.reject_at = None
            raise KafkaException(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE, "Message size too large"))
        self.sent.append((topic, value, key, partition, timestamp, headers))
        self.callbacks.append(callback)  # confluent-kafka: an explicit callback=None means the default

    def refused(self, exc, topic, value, key, partition, timestamp, headers, src_topic, src_partition, src_offset,
                on_delivery=None):
        if isinstance(exc, BufferError):
            raise SendInterrupted(f"{src_topic}-{src_partition} offset {src_offset}")
        if len(self.sent) == self.fail_at:
            self.fail_at = None
            self.state.fail(SendFailed("refused"))
            return
        if on_delivery is not None:
            on_delivery(exc.args[0], None)
        else:
            self.events.append(("send failed", src_topic, src_partition, src_offset))

    def send(self, topic, value, key, partition, timestamp, headers, src_topic, src_partition, src_offset):
        partition, timestamp = -1 if partition is None else partition, 0 if timestamp is None else timestamp
        try:
            self.produce(topic, value, key, partition, None, None, timestamp, headers)
        except (BufferError, Exception) as exc:
            if isinstance(exc, SendInterrupted):
                raise
            self.refused(exc, topic, value, key, partition, timestamp, headers, src_topic, src_partition, src_offset)
        if self.sync:  # producer.type=sync: each record acknowledged before the next
            self.flush()

    def count_produced(self, records):
        self.produced += records

    def serve(self):
        pass

    def flush(self, deadline=None, for_commit=False):
        self.events.append("flush")
        self.flush_deadlines.append(deadline)
        return self.flush_ok

    def commit_flush_waiting(self):
        """Another stream's commit waits for the shared queue to empty (``others_flushing``)."""
        return self.others_flushing


class Committer:
    makes_visible = False

    def __init__(self, events):
        self.events = events

    def commit(self, offsets, deadline=None):
        self.events.append(("commit", dict(offsets)))
        return dict(offsets)

    def close(self, deadline):
        self.events.append("committer closed")


class Consumer:
    """What a stream asks of its consumer: batches to consume (``batches``, then nothing),
    committed offsets and watermarks, how it assigns and seeks, its positions."""

    def __init__(self, committed=None, watermarks=(0, 50), batches=(), positions=None):
        self._committed, self._watermarks = committed or {}, watermarks
        self.batches = list(batches)
        self.positions = positions or {}
        self.assigned_with = None
        self.calls = []

    def consume(self, num_messages, timeout):
        return self.batches.pop(0) if self.batches else []

    def committed(self, partitions, timeout):
        return [KafkaTopicPartition(p.topic, p.partition, self._committed.get(p.partition, -1001))
                for p in partitions]

    def get_watermark_offsets(self, tp, timeout=None, cached=False):
        self.calls.append(("watermarks", tp.partition, cached))
        return self._watermarks

    def position(self, partitions):
        return [KafkaTopicPartition(p.topic, p.partition, self.positions.get(p.partition, -1001)) for p in partitions]

    def assign(self, partitions):
        self.assigned_with = ("assign", [(p.partition, p.offset) for p in partitions])

    def incremental_assign(self, partitions):
        self.assigned_with = ("incremental_assign", [(p.partition, p.offset) for p in partitions])

    def incremental_unassign(self, partitions):
        self.calls.append(("incremental_unassign", [p.partition for p in partitions]))

    def seek(self, partition):
        self.calls.append(("seek", partition.partition, partition.offset))

    def subscribe(self, topics, **callbacks):
        self.calls.append(("subscribe", topics))


class Listener:
    def __init__(self, events):
        self.events = events

    def on_partitions_assigned(self, tps):
        self.events.append(("assigned", sorted(tps)))

    def on_partitions_revoked(self, tps):
        self.events.append(("revoked", sorted(tps)))

    def on_partitions_lost(self, tps):
        self.events.append(("lost", sorted(tps)))


class TargetTopics:
    def __init__(self, remote=str):
        self.ensured = []
        self.remote = remote  # the replication policy's names
        self.max_message_bytes = {}

    def ensure(self, mapping):
        self.ensured.append(mapping)

    def require_partitions(self, mapping, grow, why):
        self.required = (mapping, grow, why)


class Subscription:
    version = 0

    def current(self):
        return 0, ["t"]

    def partitions(self):
        return 0, {"t": 2}


class Handler:
    """A user handler: drops values starting with b"skip", fans b"two" out to two topics."""

    def handle(self, record):
        if record.value.startswith(b"skip"):
            return []
        out = [ProducerRecord("out", record.value, record.key, None, record.timestamp, record.headers)]
        if record.value == b"two":
            out.append(ProducerRecord("out2", record.value))
        return out


def config(**consumer):
    return MirrorMakerConfig(consumer={"group.id": "g", "bootstrap.servers": "h:1", **consumer},
                             producer={"bootstrap.servers": "h:2"}, include=re.compile("t"))


def stream(handler=None, assigned=(T0, T1), producer_kwargs=None, conf=None, listener=True, consumer=None,
           remote=str, committer=None, starts=None):
    """A record-mode stream wired to recorders; returns (stream, producer, events)."""
    events: List = []
    conf = conf or config()
    state = RunState(shutdown_timeout_s=5)
    producer = Producer(state, events, **(producer_kwargs or {}))
    metrics = MirrorMetrics()
    shared = Shared(conf, producer, handler or DefaultMessageHandler(), Listener(events) if listener else None, state,
                    Subscription(), TargetTopics(remote), metrics)
    worker = Stream(0, None, shared)
    consumer = consumer or Consumer()
    membership = GroupMembership(worker, consumer, shared.subscription, conf.incremental_rebalance, conf.batch_size,
                                 "group.instance.id" in conf.consumer)
    copier = RecordCopier(shared.handler, producer, remote, state, metrics, conf.sync_send,
                          on_error=worker.consume_error)
    source = RecordSource(worker, consumer, copier, membership, conf.batch_size, 0.05)
    from mirror_maker.engine.positions import committed_in_group, watermarks_of
    from mirror_maker.clients.retry import commit_retrying

    starts = starts or StartPositions(ResetPolicy(conf.consumer.get("auto.offset.reset")),
                                      committed_in_group(consumer, commit_retrying), watermarks_of(consumer),
                                      conf.replication.refresh_topics, deferrable=True)
    worker.attach(Parts(membership, source, SharedSink(producer), committer or Committer(events), starts))
    worker.assigned.update(assigned)
    return worker, producer, events


def mirror(worker, messages):
    """One round of the stream's source over ``messages`` (as the loop's read would take them)."""
    worker.parts.source._consumer.batches.append(list(messages))
    return worker.parts.source.read()
