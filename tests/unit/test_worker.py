"""One mirror thread's hot path and rebalance callbacks, with stand-ins for the clients.

The thread is built as the runner builds it; its consumer, producer and checkpoint are
replaced by recorders, so these tests see exactly what is sent, what becomes pending and what
is committed, and when.
"""

import logging
import re
import time

import pytest
from confluent_kafka import TIMESTAMP_CREATE_TIME, KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from mirror_maker.clients.producer import SendInterrupted
from mirror_maker.config.mirror_config import MirrorMakerConfig
from mirror_maker.engine.state import RunState
from mirror_maker.engine.worker import REVOKE_SHARE_OF_POLL_INTERVAL, MirrorThread
from mirror_maker.errors import SendFailed
from mirror_maker.handlers import DefaultMessageHandler, PartitionPreservingHandler
from mirror_maker.offsets.checkpoint import Checkpoint
from mirror_maker.ops.metrics import MirrorMetrics
from mirror_maker.records import ProducerRecord, TopicPartition

from .test_polling import BatchConsumer

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)


class Msg:
    """The accessors a confluent Message has, nothing else."""

    def __init__(self, topic, partition, offset, value=b"v", key=b"k", ts=1000, headers=None, error=None):
        self._t, self._p, self._o, self._v, self._k = topic, partition, offset, value, key
        self._ts, self._h, self._e = ts, headers, error

    def error(self):
        return self._e

    def topic(self):
        return self._t

    def partition(self):
        return self._p

    def offset(self):
        return self._o

    def timestamp(self):
        return (TIMESTAMP_CREATE_TIME, self._ts)

    def value(self):
        return self._v

    def key(self):
        return self._k

    def headers(self):
        return self._h


class Producer:
    """Records what is produced; ``interrupt_at``/``fail_at``: the n-th record finds the queue
    full and a stop arrives meanwhile, or fails the run (as an abort on a refused record does)."""

    def __init__(self, state, events, interrupt_at=None, fail_at=None, flush_ok=True):
        self.state, self.events = state, events
        self.sent, self.interrupt_at, self.fail_at, self.flush_ok = [], interrupt_at, fail_at, flush_ok
        self.flush_deadlines = []
        self.produced = 0

    def produce(self, topic, value, key, partition, callback, on_delivery, timestamp, headers):
        n = len(self.sent)
        if n == self.interrupt_at:
            raise BufferError
        self.sent.append((topic, value, key, partition, timestamp, headers))
        if n == self.fail_at:
            self.state.fail(SendFailed("refused"))

    def refused(self, exc, topic, value, key, partition, timestamp, headers, src_topic, src_partition, src_offset):
        assert isinstance(exc, BufferError)
        raise SendInterrupted(f"{src_topic}-{src_partition} offset {src_offset}")

    def send(self, topic, value, key, partition, timestamp, headers, src_topic, src_partition, src_offset):
        partition, timestamp = -1 if partition is None else partition, 0 if timestamp is None else timestamp
        try:
            self.produce(topic, value, key, partition, None, None, timestamp, headers)
        except BufferError as exc:
            self.refused(exc, topic, value, key, partition, timestamp, headers, src_topic, src_partition, src_offset)

    def count_produced(self, records):
        self.produced += records

    def serve(self):
        pass

    def flush(self, deadline=None):
        self.events.append("flush")
        self.flush_deadlines.append(deadline)
        return self.flush_ok


class Committer:
    def __init__(self, events):
        self.events = events

    def commit(self, offsets, deadline=None):
        self.events.append(("commit", dict(offsets)))
        return dict(offsets)


class Consumer:
    """What the assign path asks: committed offsets and watermarks; and how it assigns."""

    def __init__(self, committed=None, watermarks=(0, 50)):
        self._committed, self._watermarks = committed or {}, watermarks
        self.assigned_with = None

    def committed(self, partitions, timeout):
        return [KafkaTopicPartition(p.topic, p.partition, self._committed.get(p.partition, -1001))
                for p in partitions]

    def get_watermark_offsets(self, tp, timeout=None, cached=False):
        return self._watermarks

    def assign(self, partitions):
        self.assigned_with = ("assign", [(p.partition, p.offset) for p in partitions])

    def incremental_assign(self, partitions):
        self.assigned_with = ("incremental_assign", [(p.partition, p.offset) for p in partitions])


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

    def ensure(self, mapping):
        self.ensured.append(mapping)


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


def thread(handler=None, assigned=(T0, T1), producer_kwargs=None, conf=None, listener=True):
    """A mirror thread wired to recorders; returns (thread, producer, events)."""
    events = []
    state = RunState(shutdown_timeout_s=5)
    producer = Producer(state, events, **(producer_kwargs or {}))
    worker = MirrorThread(0, conf or config(), producer, handler or DefaultMessageHandler(),
                          Listener(events) if listener else None, state, None, TargetTopics(), MirrorMetrics())
    worker.assigned.update(assigned)
    worker._checkpoint = Checkpoint(producer, Committer(events), state, 1000,
                                    metrics=worker._metrics, owned=worker.assigned.__contains__)
    return worker, producer, events


def test_default_handler_sends_each_record_unchanged_and_pending_is_the_next_offset_per_partition():
    worker, producer, _ = thread()
    worker._mirror([Msg("t", 0, 5, b"a", headers=[("h", b"1")]), Msg("t", 0, 6, b"b"), Msg("t", 1, 9, b"c", key=None)])
    assert producer.sent == [("t", b"a", b"k", -1, 1000, [("h", b"1")]),  # -1: the partitioner chooses
                             ("t", b"b", b"k", -1, 1000, None),
                             ("t", b"c", None, -1, 1000, None)]
    assert worker._checkpoint.pending == {T0: 7, T1: 10}
    assert worker._metrics.totals()["records"] == 3 and worker._metrics.totals()["bytes"] == 3
    assert producer.produced == 3


def test_partition_preserving_handler_keeps_the_source_partition():
    worker, producer, _ = thread(PartitionPreservingHandler())
    worker._mirror([Msg("t", 1, 0)])
    assert producer.sent[0][3] == 1


def test_a_missing_timestamp_is_sent_as_0_so_the_producer_stamps_it():
    worker, producer, _ = thread()
    worker._mirror([Msg("t", 0, 0, ts=-1)])
    assert producer.sent[0][4] == 0


def test_user_handler_sees_our_records_and_a_filtered_record_is_counted_and_still_committed():
    worker, producer, _ = thread(Handler())
    worker._mirror([Msg("t", 0, 0, b"one"), Msg("t", 0, 1, b"skip-me"), Msg("t", 0, 2, b"two")])
    assert [(s[0], s[1]) for s in producer.sent] == [("out", b"one"), ("out", b"two"), ("out2", b"two")]
    assert worker._metrics.totals()["filtered"] == 1
    assert worker._checkpoint.pending == {T0: 3}  # the filtered record's offset advances too
    assert producer.produced == 3


def test_records_of_a_partition_no_longer_assigned_never_become_pending():
    worker, _, _ = thread(assigned=(T0,))
    worker._mirror([Msg("t", 0, 3), Msg("t", 1, 40)])
    assert worker._checkpoint.pending == {T0: 4}


def test_a_stop_during_a_send_ends_the_batch_and_only_queued_records_become_pending(caplog):
    worker, producer, _ = thread(producer_kwargs={"interrupt_at": 2})
    caplog.set_level(logging.INFO)
    worker._mirror([Msg("t", 0, 0), Msg("t", 0, 1), Msg("t", 0, 2), Msg("t", 0, 3)])
    assert len(producer.sent) == 2
    assert worker._checkpoint.pending == {T0: 2}  # offsets 2 and 3 were never queued
    assert producer.produced == 2
    assert "not committed" in caplog.text


def test_a_failure_during_the_batch_stops_it_without_recording_the_failed_record():
    worker, producer, _ = thread(producer_kwargs={"fail_at": 1})
    worker._mirror([Msg("t", 0, 0), Msg("t", 0, 1), Msg("t", 0, 2)])
    assert len(producer.sent) == 2
    assert worker._checkpoint.pending == {T0: 1}


def test_consume_errors_are_skipped_and_partition_eof_is_silent(caplog):
    worker, producer, _ = thread()
    worker._mirror([Msg("t", 0, 0, error=KafkaError(KafkaError._PARTITION_EOF)),
                    Msg("t", 0, 0, error=KafkaError(KafkaError._TRANSPORT)), Msg("t", 0, 1)])
    assert len(producer.sent) == 1 and worker._checkpoint.pending == {T0: 2}
    assert caplog.text.count("Consumer error") == 1


def test_revoke_flushes_and_commits_only_the_revoked_partitions_then_calls_the_listener():
    worker, _, events = thread()
    worker._checkpoint.pending.update({T0: 7, T1: 10})
    worker._on_revoke(None, [KafkaTopicPartition("t", 1)])
    assert events == ["flush", ("commit", {T1: 10}), ("revoked", [T1])]
    assert worker._checkpoint.pending == {T0: 7} and worker.assigned == {T0}


def test_revoke_with_nothing_pending_does_not_wait_for_other_threads_records():
    worker, _, events = thread()
    worker._on_revoke(None, [KafkaTopicPartition("t", 0)])
    assert events == [("revoked", [T0])]


def test_revoke_flush_is_bounded_by_a_share_of_max_poll_interval():
    worker, producer, _ = thread(conf=config(**{"max.poll.interval.ms": "10000"}))
    worker._checkpoint.pending[T0] = 1
    before = time.monotonic()
    worker._on_revoke(None, [KafkaTopicPartition("t", 0)])
    (deadline,) = producer.flush_deadlines
    assert before + 10 * REVOKE_SHARE_OF_POLL_INTERVAL <= deadline <= time.monotonic() + 10 * REVOKE_SHARE_OF_POLL_INTERVAL


def test_revoke_while_stopping_is_bounded_by_the_stop_deadline():
    worker, producer, _ = thread()
    worker._checkpoint.pending[T0] = 1
    worker._state.request_stop()
    worker._on_revoke(None, [KafkaTopicPartition("t", 0)])
    assert producer.flush_deadlines == [worker._state.deadline]


def test_revoke_whose_records_are_not_acknowledged_in_time_commits_nothing_but_still_calls_the_listener(caplog):
    worker, _, events = thread(producer_kwargs={"flush_ok": False})
    worker._checkpoint.pending[T0] = 5
    worker._on_revoke(None, [KafkaTopicPartition("t", 0)])
    assert events == ["flush", ("revoked", [T0])]
    assert "not committed, so their next owner mirrors them again" in caplog.text


def test_revoke_after_a_failure_commits_nothing():
    worker, _, events = thread()
    worker._checkpoint.pending[T0] = 5
    worker._state.fail(SendFailed("refused"))
    worker._on_revoke(None, [KafkaTopicPartition("t", 0)])
    assert events == [("revoked", [T0])]


class ClosingConsumer:
    """The group side of a consumer at a stop, as librdkafka behaves: ``unsubscribe`` queues the
    revoke of what is assigned (unless ``revokes`` is False: it never comes), ``consume`` serves
    what is queued through the thread's callback, and ``close`` records what it still had to
    revoke itself (the callback that could hang the process)."""

    def __init__(self, worker, events, revokes=True, unsubscribe_fails=False):
        self.worker, self.events, self.revokes, self.unsubscribe_fails = worker, events, revokes, unsubscribe_fails
        self.queued = []

    def unsubscribe(self):
        self.events.append("unsubscribe")
        if self.unsubscribe_fails:
            raise KafkaException(KafkaError(KafkaError._FATAL, "fenced"))
        if self.revokes and self.worker.assigned:
            self.queued.append([KafkaTopicPartition(tp.topic, tp.partition) for tp in sorted(self.worker.assigned)])

    def consume(self, num_messages, timeout):
        self.events.append("consume")
        while self.queued:
            self.worker._on_revoke(self, self.queued.pop(0))
        return []

    def close(self):
        self.events.append(("close", sorted(self.worker.assigned)))


def closing(shutdown_timeout_s=5.0, subscribed=True, conf=None, **consumer):
    worker, _, events = thread(conf=conf)
    worker._state = RunState(shutdown_timeout_s=shutdown_timeout_s)
    worker._checkpoint._state = worker._state
    worker._consumer = ClosingConsumer(worker, events, **consumer)
    worker._has_topics = subscribed
    worker._checkpoint.pending.update({T0: 7, T1: 10})
    worker._state.request_stop()
    return worker, events


def test_a_stop_serves_the_final_revoke_from_consume_so_close_has_nothing_left_to_revoke():
    worker, events = closing()
    worker._close_consumer()
    assert events == ["unsubscribe", "consume", "flush", ("commit", {T0: 7, T1: 10}), ("revoked", [T0, T1]),
                      ("close", [])]


def test_a_revoke_that_does_not_come_is_waited_for_until_the_stop_s_deadline_then_close_revokes():
    worker, events = closing(shutdown_timeout_s=0.2, revokes=False)
    worker._close_consumer()
    assert time.monotonic() >= worker._state.deadline  # waited for it until then, no longer (the loop's bound)
    assert events[0] == "unsubscribe" and events.count("consume") > 1
    assert events[-1] == ("close", [T0, T1])


@pytest.mark.parametrize("consumer", [{"subscribed": False}, {"unsubscribe_fails": True},
                                      {"conf": config(**{"group.instance.id": "mm-1"})}],
                         ids=["never subscribed", "unsubscribe fails", "static member: close does not leave"])
def test_a_consumer_without_a_revoke_to_serve_first_is_closed_at_once(consumer):
    worker, events = closing(**consumer)
    worker._close_consumer()
    assert events[-1] == ("close", [T0, T1]) and "consume" not in events
    assert ("unsubscribe" in events) == bool(consumer.get("unsubscribe_fails"))


def test_lost_partitions_are_discarded_without_a_commit_and_the_listener_hears_it():
    worker, _, events = thread()
    worker._checkpoint.pending.update({T0: 3, T1: 4})
    worker._on_lost(None, [KafkaTopicPartition("t", 0)])
    assert events == [("lost", [T0])]
    assert worker._checkpoint.pending == {T1: 4} and worker.assigned == {T1}


@pytest.mark.parametrize("conf, method", [
    ({}, "assign"),
    ({"partition.assignment.strategy": "range,roundrobin"}, "assign"),
    ({"partition.assignment.strategy": "cooperative-sticky"}, "incremental_assign"),
    ({"group.protocol": "consumer"}, "incremental_assign"),
])
def test_assign_resolves_start_offsets_and_assigns_as_the_protocol_requires(conf, method):
    worker, _, events = thread(assigned=(), conf=config(**{"auto.offset.reset": "earliest", **conf}))
    consumer = Consumer(committed={0: 12}, watermarks=(3, 50))
    worker._on_assign(consumer, [KafkaTopicPartition("t", 0), KafkaTopicPartition("t", 1)])
    assert consumer.assigned_with == (method, [(0, 12), (1, 3)])  # committed, else earliest
    assert worker.assigned == {T0, T1}
    assert worker._target_topics.ensured == [{"t": ["t"]}]
    assert events == [("assigned", [T0, T1])]


@pytest.mark.parametrize("conf, method", [({}, "assign"), ({"group.protocol": "consumer"}, "incremental_assign")])
def test_an_assignment_served_after_a_stop_neither_checks_target_topics_nor_reads_offsets(conf, method):
    """The consumer's close serves an assignment the group made meanwhile: each of those calls
    can wait 10 s for a cluster that is away, and nothing is mirrored any more."""
    worker, _, events = thread(assigned=(), conf=config(**conf))
    consumer = Consumer()
    consumer.committed = consumer.get_watermark_offsets = None  # not to be called
    worker._state.request_stop()
    worker._on_assign(consumer, [KafkaTopicPartition("t", 0, -1001)])
    assert consumer.assigned_with == (method, [(0, -1001)])
    assert worker._target_topics.ensured == []
    assert worker.assigned == {T0} and events == [("assigned", [T0])]


def test_incremental_rebalance_is_read_from_the_settings_not_a_substring():
    assert not config(**{"partition.assignment.strategy": "range"}).incremental_rebalance
    assert not config(**{"partition.assignment.strategy": "roundrobin,range"}).incremental_rebalance
    assert config(**{"partition.assignment.strategy": "cooperative-sticky"}).incremental_rebalance
    assert config(**{"group.protocol": "CONSUMER"}).incremental_rebalance
    assert not config(**{"group.protocol": "classic"}).incremental_rebalance


def test_ages_are_taken_once_per_run_from_its_first_and_last_record():
    worker, _, _ = thread()
    now_ms = time.time() * 1000
    worker._mirror([Msg("t", 0, 0, ts=int(now_ms) - 9000), Msg("t", 0, 1, ts=int(now_ms) - 5000),
                    Msg("t", 0, 2, ts=int(now_ms) - 1000)])
    low, high, avg = worker._metrics.partitions[T0].age.values(time.time())
    assert 900 <= low <= 1200 and 8900 <= high <= 9200 and 4900 <= avg <= 5200


def test_a_user_handler_with_a_stop_mid_batch_keeps_what_was_sent():
    worker, producer, _ = thread(Handler(), producer_kwargs={"interrupt_at": 1})
    worker._mirror([Msg("t", 0, 0, b"one"), Msg("t", 0, 1, b"two"), Msg("t", 0, 2, b"three")])
    assert worker._checkpoint.pending == {T0: 1} and producer.produced == 1


class TrickleConsumer(BatchConsumer):
    """librdkafka's batch consume on a virtual clock (test_polling's stand-in) with what the loop
    also asks of a consumer. Three records are fetched; once they are taken, the run stops."""

    def __init__(self, state):
        super().__init__([(0.0, Msg("t", 0, offset)) for offset in range(3)])
        self.state = state

    def subscribe(self, topics, **callbacks):
        pass

    def consume(self, num_messages, timeout):
        if not self.arrivals:
            self.state.request_stop()
            return []
        return super().consume(num_messages, timeout)

    def position(self, partitions):
        return [KafkaTopicPartition(p.topic, p.partition, 3) for p in partitions]

    def get_watermark_offsets(self, tp, timeout=None, cached=False):
        return 0, 3


class Subscription:
    version = 0

    def current(self):
        return 0, ["t"]


def test_the_loop_sends_a_short_batch_without_waiting_for_max_poll_records():
    """max.poll.records is the most one poll takes, not a count to wait for: three fetched
    records go out at once, not after the poll timeout (librdkafka's consume(500, 0.2) waits)."""
    worker, producer, _events = thread(assigned=(T0,))
    worker._subscription = Subscription()
    consumer = worker._consumer = TrickleConsumer(worker._state)
    worker._loop()
    assert [value for _t, value, *_rest in producer.sent] == [b"v", b"v", b"v"]
    assert worker._checkpoint.pending == {T0: 3}
    assert consumer.now == 0.0
