"""The shared producer's rules, on a real librdkafka producer whose target is not there (a port
nobody listens on): records stay queued, time out, or are rejected locally, as they would."""

import threading
import time

import pytest

from mirror_maker.clients.producer import MirrorProducer, SendInterrupted
from mirror_maker.engine.state import RunState
from mirror_maker.errors import SendFailed
from mirror_maker.ops.metrics import MirrorMetrics

from ..integration.harness import wait_until

UNREACHABLE = {"bootstrap.servers": "127.0.0.1:1", "log_level": 0, "reconnect.backoff.max.ms": 1000}


def producer(state, abort=True, metrics=None, **conf):
    return MirrorProducer({**UNREACHABLE, **conf}, state, abort_on_send_failure=abort, metrics=metrics)


def send(p, n, value=b"v"):
    """As the copier hands a record over: sent, then counted."""
    p.send("t", value, b"k", None, None, None, "src", 0, n)
    p.count_produced(1)


def test_flush_gives_up_at_the_deadline_and_says_nothing_is_committed(caplog):
    state = RunState()
    p = producer(state)
    try:
        send(p, 0)
        started = time.monotonic()
        assert p.flush(time.monotonic() + 0.5) is False
        assert 0.4 <= time.monotonic() - started < 3
        assert "not acknowledged by the target before the deadline" in caplog.text
    finally:
        state.fail(SendFailed("test over"))
        p.close(time.monotonic())


def test_at_the_deadline_events_waiting_for_a_poll_are_not_records_left_unacknowledged(caplog):
    """librdkafka's queue length counts events (statistics, errors) as well as records: a stop
    whose deadline passed while a thread never served the idle producer (raw mode's start-up)
    said "273 records not acknowledged" when none had been sent."""
    state = RunState()
    # One connection attempt and one statistics event a second: no burst of events that could
    # land between the flush's poll and its reading of the queue.
    p = producer(state, **{"statistics.interval.ms": 1000, "reconnect.backoff.ms": 60000,
                           "reconnect.backoff.max.ms": 60000})
    try:
        wait_until(lambda: len(p._producer) > 0, 10, "the refused connection's events")
        wait_until(lambda: p.serve() or len(p._producer) == 0, 10, "those events served")
        wait_until(lambda: len(p._producer) > 0, 10, "a statistics event waiting for a poll")
        assert p.flush(time.monotonic() - 1) is True
        assert "not acknowledged" not in caplog.text
    finally:
        p.close(time.monotonic())


def test_at_the_deadline_an_event_arriving_after_the_poll_is_not_a_record_left_unacknowledged(caplog):
    """The race of the test above, made certain: librdkafka's queue still holds an event after the
    flush's last poll, and nothing was handed over."""
    class OneEventQueued:
        def __len__(self):
            return 1

        def poll(self, timeout):
            return 0

        def flush(self, timeout):
            return 1

    state = RunState()
    p = producer(state)
    real, p._producer = p._producer, OneEventQueued()
    try:
        assert p.flush(time.monotonic() - 1) is True
        assert p.unacknowledged() == 0
        assert "not acknowledged" not in caplog.text
    finally:
        p._producer = real
        p.close(time.monotonic())


def test_a_send_waiting_for_room_in_a_full_queue_notices_a_stop():
    state = RunState(shutdown_timeout_s=1)
    p = producer(state, **{"queue.buffering.max.messages": 1})
    try:
        send(p, 0)  # fills the queue: the target never takes it
        threading.Timer(0.3, state.request_stop).start()
        started = time.monotonic()
        with pytest.raises(SendInterrupted, match="src-0 offset 1"):
            send(p, 1)
        assert time.monotonic() - started < 3
    finally:
        state.fail(SendFailed("test over"))
        p.close(time.monotonic())


def test_a_record_for_a_partition_just_learnt_waits_for_room_when_the_queue_filled_meanwhile():
    """The target topic grew: the partition is learnt, and the second produce finding the queue
    full is back-pressure as the first would be, not an error that ends the stream."""
    from confluent_kafka import KafkaError, KafkaException

    state = RunState()
    p = producer(state)
    calls = []

    def produce(*args):
        calls.append(args)
        if len(calls) == 1:
            raise BufferError("Local: Queue full")

    p.produce = produce
    p._learn_partition = lambda topic, partition: True
    p.refused(KafkaException(KafkaError(KafkaError._UNKNOWN_PARTITION)), "t", b"v", None, 3, 0, None, "s", 3, 10)
    assert len(calls) == 2 and not state.failed
    p.close(time.monotonic() + 1)


def test_a_record_larger_than_message_max_bytes_is_a_send_failure_naming_the_source_offset():
    state = RunState()
    p = producer(state, **{"message.max.bytes": 1000})
    try:
        p.send("t", b"x" * 5000, None, None, None, None, "orders", 3, 42)
        assert isinstance(state.failure, SendFailed)
        assert "orders-3 offset 42" in str(state.failure) and "5000 bytes" in str(state.failure)
    finally:
        p.close(time.monotonic())


def test_a_record_refused_as_local_fatal_error_fails_the_run_with_the_fatal_error_s_cause():
    """A produce after librdkafka's fatal error (an idempotent producer id the target refused)
    raises "Local: Fatal error", which names no cause; the run's one line is the cause poll() raises."""
    from confluent_kafka import KafkaError, KafkaException

    from mirror_maker.clients.client_errors import ClientErrors
    from mirror_maker.errors import ClientFailed

    class Fatal:
        def produce(self, *args, **kwargs):
            raise KafkaException(KafkaError(KafkaError._FATAL, "Local: Fatal error"))

        def poll(self, timeout=None):
            raise KafkaException(KafkaError(KafkaError.CLUSTER_AUTHORIZATION_FAILED, "Cluster authorization failed",
                                            fatal=True))

        def __len__(self):
            return 0

    state, metrics = RunState(), MirrorMetrics()
    p = MirrorProducer({**UNREACHABLE}, state, abort_on_send_failure=True, metrics=metrics,
                       errors=ClientErrors("target", "127.0.0.1:1", state, "User:bob"))
    real, p._producer = p._producer, Fatal()
    p.produce = p._producer.produce  # the bound method the copier calls
    try:
        send(p, 0)
        assert isinstance(state.failure, ClientFailed) and "not authorized" in str(state.failure), state.failure
        assert "User:bob" in str(state.failure) and metrics.totals()["dropped"] == 0
    finally:
        p._producer = real
        p.close(time.monotonic())


def test_with_abort_the_first_refused_record_fails_the_run_and_later_ones_are_not_counted_as_dropped():
    state, metrics = RunState(), MirrorMetrics()
    p = producer(state, metrics=metrics, **{"message.timeout.ms": 300, "linger.ms": 0})
    try:
        for n in range(5):
            send(p, n)
        wait_until(lambda: p.serve() or state.failed, 10, "the first delivery failure")
        wait_until(lambda: p.serve() or len(p) == 0, 10, "the queue to be purged")
        assert isinstance(state.failure, SendFailed) and "timed out" in str(state.failure).lower()
        assert metrics.totals()["dropped"] == 1  # the rest are read again on restart, not dropped
    finally:
        p.close(time.monotonic())


def test_without_abort_every_refused_record_is_counted_and_the_run_goes_on(caplog):
    state, metrics = RunState(), MirrorMetrics()
    p = producer(state, abort=False, metrics=metrics, **{"message.timeout.ms": 300, "linger.ms": 0})
    try:
        for n in range(3):
            send(p, n)
        wait_until(lambda: p.serve() or metrics.totals()["dropped"] == 3, 10, "three drops")
        assert not state.failed
        assert caplog.text.count("dropped; --abort.on.send.failure is false") == 3
        assert p.flush(time.monotonic() + 5) is True  # nothing left to wait for
    finally:
        p.close(time.monotonic())


def test_the_acknowledged_count_never_drops_while_an_event_waits_in_librdkafkas_queue():
    """librdkafka's queue length counts its statistics events too: a reading taken while one
    waits for the next poll must not lower the count (a counter going down is a restart to
    Prometheus, and the Spark driver's total came out one short)."""
    state = RunState()
    p = producer(state, **{"statistics.interval.ms": 100})
    try:
        p.count_produced(5)  # as if five records were handed over and acknowledged
        # The queue holds no records: a reading right after serving is exact, unless the next
        # statistics event slipped in between (every 100 ms here, on a busy machine).
        wait_until(lambda: p.serve() or p.acknowledged() == 5, 10, "an exact reading")
        wait_until(lambda: len(p._producer) > 0, 10, "a statistics event waiting for a poll")
        assert p.acknowledged() == 5
        assert len(p) == 0  # records waiting for the target (the status line's), not events
        p.serve()
        assert p.acknowledged() == 5
    finally:
        p.close(time.monotonic())


def test_once_closed_only_records_count_as_unacknowledged_not_events_waiting_for_a_poll():
    """A bounded run reports records the target never acknowledged (and exits as incomplete):
    a statistics event queued after the final flush is no such record."""
    state = RunState()
    p = producer(state, **{"statistics.interval.ms": 100})
    p.close(time.monotonic())  # nothing was sent: everything is acknowledged
    wait_until(lambda: len(p._producer) > 0, 10, "a statistics event waiting for a poll")
    assert p.unacknowledged() == 0


def test_records_the_closing_flush_could_not_deliver_count_as_unacknowledged():
    state = RunState()
    p = producer(state, **{"statistics.interval.ms": 100})
    for offset in range(3):
        send(p, offset)
    p.count_produced(3)
    p.close(time.monotonic() + 0.3)  # the target is not there: the flush gives up
    assert p.unacknowledged() == 3
    state.fail(SendFailed("test over"))
    p.purge()


def test_the_purge_that_does_not_wait_was_read_in_the_pinned_confluent_kafka():
    """confluent-kafka's ``purge(blocking=True)`` is librdkafka's non-blocking purge (its flag is
    inverted) and holds the GIL: a blocking one froze a fenced exactly-once mirror. Read again in
    its Producer.c before the pin (setup.cfg) moves past 2.16."""
    import confluent_kafka

    from mirror_maker.clients.producer import PURGE_WITHOUT_WAITING

    assert confluent_kafka.__version__.startswith("2.16.") and PURGE_WITHOUT_WAITING is True


class SharedQueue:
    """librdkafka's queue as the flush sees it: its length, set by the test, and a flush call
    that waits until the test lets it go (``release``)."""

    def __init__(self, length):
        self.length, self.waiting, self.release = length, threading.Event(), threading.Event()

    def __len__(self):
        return self.length

    def flush(self, timeout):
        self.waiting.set()
        self.release.wait()  # not its timeout: only the test decides when the flush looks again
        return self.length

    def poll(self, timeout):
        return 0


def test_a_commit_s_flush_ends_at_an_empty_queue_another_stream_saw_though_records_came_after_it():
    """librdkafka's flush waits for its whole queue to empty, which it never does while other
    streams produce into it; a record handed over before the flush began is done once the queue
    was empty after that, whichever stream saw it. While a commit's flush waits for that, the
    other streams are asked to join it; a flush that is not a commit's (a sync send) is not."""
    state = RunState()
    p = producer(state)
    real, queue = p._producer, SharedQueue(length=5)
    p._producer = queue
    try:
        p.count_produced(5)
        assert not p.commit_flush_waiting()
        done = []
        waiter = threading.Thread(target=lambda: done.append(p.flush(time.monotonic() + 10, for_commit=True)))
        waiter.start()
        wait_until(queue.waiting.is_set, 5, "the commit's flush waiting")
        assert p.commit_flush_waiting()  # the other streams flush and commit too
        queue.length = 0
        assert p.flush(time.monotonic() + 10)  # a joining stream sees the queue empty
        assert not p.commit_flush_waiting()  # the moment the waiting commit needed has come
        queue.length = 2  # a stream produced again before the waiting flush looked
        queue.release.set()
        waiter.join(5)
        assert done == [True]
    finally:
        p._producer = real
        state.fail(SendFailed("test over"))
        p.close(time.monotonic())


def test_an_empty_queue_seen_before_a_flush_began_does_not_end_it(caplog):
    state = RunState()
    p = producer(state)
    real, queue = p._producer, SharedQueue(length=0)
    queue.release.set()
    p._producer = queue
    try:
        assert p.flush(time.monotonic() + 1, for_commit=True)
        queue.length = 2
        p.count_produced(2)
        assert p.flush(time.monotonic() + 0.3, for_commit=True) is False
        assert "2 records not acknowledged by the target before the deadline" in caplog.text
    finally:
        p._producer = real
        state.fail(SendFailed("test over"))
        p.close(time.monotonic())


def test_another_stream_s_count_during_the_deadline_s_reading_never_makes_a_record_look_acknowledged():
    """The deadline path counts what is left from one reading: another stream counting records
    the target already acknowledged, between two readings, made this stream's pending record
    look acknowledged, and its offset committable."""
    state = RunState()
    p = producer(state)
    real, queue = p._producer, SharedQueue(length=1)  # this stream's one record, never acknowledged
    queue.release.set()
    p._producer = queue
    try:
        p.count_produced(1)
        reads = []

        def counted_meanwhile():  # another stream's thread, if it ran between two lock holds
            if not reads:
                reads.append(p.count_produced(5))
            return MirrorProducer.acknowledged(p)

        p.acknowledged = counted_meanwhile
        assert p.flush(time.monotonic() + 0.2, for_commit=True) is False
    finally:
        p._producer = real
        state.fail(SendFailed("test over"))
        p.close(time.monotonic())
