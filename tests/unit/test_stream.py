"""The one stream loop's commit rules and rebalance handling, with stand-ins for the clients
(``stream_parts``): what becomes pending, what a commit and a revoke commit, where a partition
starts and goes on, and when a partition is at its end."""

import logging
import time

import pytest
from confluent_kafka import KafkaError
from confluent_kafka import TopicPartition as KafkaTopicPartition

from mirror_maker.engine.stream import REVOKE_SHARE_OF_POLL_INTERVAL
from mirror_maker.errors import NoOffsetForPartition, SendFailed
from mirror_maker.handlers import PartitionPreservingHandler

from .stream_parts import T0, T1, Consumer, Handler, Msg, config, mirror, stream
from .test_polling import BatchConsumer


def test_default_handler_sends_each_record_unchanged_and_pending_is_the_next_offset_per_partition():
    worker, producer, _ = stream()
    mirror(worker, [Msg("t", 0, 5, b"a", headers=[("h", b"1")]), Msg("t", 0, 6, b"b"), Msg("t", 1, 9, b"c", key=None)])
    assert producer.sent == [("t", b"a", b"k", -1, 1000, [("h", b"1")]),  # -1: the partitioner chooses
                             ("t", b"b", b"k", -1, 1000, None),
                             ("t", b"c", None, -1, 1000, None)]
    assert worker.checkpoint.pending == {T0: 7, T1: 10} and worker.positions == {T0: 7, T1: 10}
    assert worker._metrics.totals()["records"] == 3 and worker._metrics.totals()["bytes"] == 3
    assert producer.produced == 3


def test_partition_preserving_handler_keeps_the_source_partition():
    worker, producer, _ = stream(PartitionPreservingHandler())
    mirror(worker, [Msg("t", 1, 0)])
    assert producer.sent[0][3] == 1


def test_a_missing_timestamp_is_sent_as_0_so_the_producer_stamps_it():
    worker, producer, _ = stream()
    mirror(worker, [Msg("t", 0, 0, ts=-1)])
    assert producer.sent[0][4] == 0


def test_user_handler_sees_our_records_and_a_filtered_record_is_counted_and_still_committed():
    worker, producer, _ = stream(Handler())
    mirror(worker, [Msg("t", 0, 0, b"one"), Msg("t", 0, 1, b"skip-me"), Msg("t", 0, 2, b"two")])
    assert [(s[0], s[1]) for s in producer.sent] == [("out", b"one"), ("out", b"two"), ("out2", b"two")]
    assert worker._metrics.totals()["filtered"] == 1
    assert worker.checkpoint.pending == {T0: 3}  # the filtered record's offset advances too
    assert worker._metrics.totals()["bytes"] == len(b"one") + len(b"skip-me") + len(b"two")
    assert producer.produced == 3


def test_the_replication_policy_names_every_record_s_target_whichever_copy_takes_it():
    """The inline copy, a user's handler, and a tracked copy (exactly-once after a refusal)."""
    for handler in (None, Handler()):
        worker, producer, _ = stream(handler, remote=lambda topic: f"src.{topic}")
        mirror(worker, [Msg("t", 0, 0, b"one")])
        assert producer.sent[0][0] in ("src.t", "src.out")
    worker, producer, _ = stream(remote=lambda topic: f"src.{topic}")
    from mirror_maker.engine.copier import Tracker

    worker.parts.source._tracker = lambda: Tracker(lambda *refused: None)
    mirror(worker, [Msg("t", 0, 0, b"one")])
    assert producer.sent[0][0] == "src.t" and producer.callbacks[0] is not None


def test_records_of_a_partition_no_longer_assigned_never_become_pending():
    worker, _, _ = stream(assigned=(T0,))
    mirror(worker, [Msg("t", 0, 3), Msg("t", 1, 40)])
    assert worker.checkpoint.pending == {T0: 4}


def test_a_stop_during_a_send_ends_the_batch_and_only_queued_records_become_pending(caplog):
    worker, producer, _ = stream(producer_kwargs={"interrupt_at": 2})
    caplog.set_level(logging.INFO)
    mirror(worker, [Msg("t", 0, 0), Msg("t", 0, 1), Msg("t", 0, 2), Msg("t", 0, 3)])
    assert len(producer.sent) == 2
    assert worker.checkpoint.pending == {T0: 2}  # offsets 2 and 3 were never queued
    assert producer.produced == 2
    assert "not committed" in caplog.text


def test_a_refusal_that_fails_the_run_stops_the_batch_without_recording_the_refused_record():
    worker, producer, _ = stream(producer_kwargs={"fail_at": 1})
    mirror(worker, [Msg("t", 0, 0), Msg("t", 0, 1), Msg("t", 0, 2), Msg("t", 1, 0)])
    assert len(producer.sent) == 1
    assert worker.checkpoint.pending == {T0: 1}
    assert producer.produced == 2  # the refused record was handed over (and counted as failed)


def test_a_failure_another_thread_sets_during_the_batch_lets_nothing_be_committed():
    """The shared producer serves another stream's failed delivery meanwhile: this batch may go
    on to its partition's end, but the run has failed, so no offset of it is committed."""
    worker, producer, events = stream()
    produce = producer.produce

    def failing_meanwhile(*args):
        produce(*args)
        if len(producer.sent) == 2:
            worker._state.fail(SendFailed("another stream's record was refused"))

    producer.produce = failing_meanwhile
    mirror(worker, [Msg("t", 0, 0), Msg("t", 0, 1), Msg("t", 0, 2), Msg("t", 1, 0)])
    assert len(producer.sent) == 3  # not the next partition's
    assert worker.commit() is False
    assert not [event for event in events if event[0] == "commit"]


def test_a_fatal_consumer_error_mid_run_counts_only_the_records_produced_before_it():
    """The producer counts what was handed over (a flush waits for as many acknowledgements)."""
    from mirror_maker.errors import ClientFailed

    worker, producer, _ = stream()
    fatal = KafkaError(KafkaError._FATAL, "fenced", fatal=True)
    with pytest.raises(ClientFailed):
        mirror(worker, [Msg("t", 0, 0), Msg("t", 0, 1, error=fatal), Msg("t", 0, 2)])
    assert len(producer.sent) == 1 and producer.produced == 1


def test_a_run_cut_at_an_error_is_cut_at_that_error_not_at_an_equal_one_before_it():
    """confluent Messages compare equal by their fields: the second of two equal errors raising
    must keep the record produced between them."""
    worker, producer, _ = stream()
    copier = worker.parts.source._copier
    seen = []

    def second_raises(msg):
        seen.append(msg)
        if len(seen) == 2:
            raise RuntimeError("the second error ends the run")

    copier._on_error = second_raises
    error = KafkaError(KafkaError._TRANSPORT, "down")
    with pytest.raises(RuntimeError):
        mirror(worker, [Msg("t", 0, 0), Msg("t", 0, 5, error=error), Msg("t", 0, 1), Msg("t", 0, 5, error=error),
                        Msg("t", 0, 2)])
    assert len(producer.sent) == 2 and producer.produced == 2


def test_consume_errors_are_skipped_and_partition_eof_is_silent(caplog):
    worker, producer, _ = stream()
    mirror(worker, [Msg("t", 0, 0, error=KafkaError(KafkaError._PARTITION_EOF)),
                    Msg("t", 0, 0, error=KafkaError(KafkaError._TRANSPORT)), Msg("t", 0, 1)])
    assert len(producer.sent) == 1 and worker.checkpoint.pending == {T0: 2}
    assert caplog.text.count("Consumer error") == 1


def test_a_user_handler_with_a_stop_mid_batch_keeps_what_was_sent():
    worker, producer, _ = stream(Handler(), producer_kwargs={"interrupt_at": 1})
    mirror(worker, [Msg("t", 0, 0, b"one"), Msg("t", 0, 1, b"two"), Msg("t", 0, 2, b"three")])
    assert worker.checkpoint.pending == {T0: 1} and producer.produced == 1


def test_ages_are_taken_once_per_run_from_its_first_and_last_record():
    worker, _, _ = stream()
    now_ms = time.time() * 1000
    mirror(worker, [Msg("t", 0, 0, ts=int(now_ms) - 9000), Msg("t", 0, 1, ts=int(now_ms) - 5000),
                    Msg("t", 0, 2, ts=int(now_ms) - 1000)])
    low, high, avg = worker._metrics.partitions[T0].age.values(time.time())
    assert 900 <= low <= 1200 and 8900 <= high <= 9200 and 4900 <= avg <= 5200


# -- revokes and losses ----------------------------------------------------------------------

def test_revoke_flushes_and_commits_only_the_revoked_partitions_then_calls_the_listener():
    worker, _, events = stream()
    worker.checkpoint.pending.update({T0: 7, T1: 10})
    worker.partitions_revoked([T1])
    assert events == ["flush", ("commit", {T1: 10}), ("revoked", [T1])]
    assert worker.checkpoint.pending == {T0: 7} and worker.assigned == {T0}


def test_revoke_with_nothing_pending_does_not_wait_for_other_streams_records():
    worker, _, events = stream()
    worker.partitions_revoked([T0])
    assert events == [("revoked", [T0])]


def test_revoke_flush_is_bounded_by_a_share_of_max_poll_interval():
    worker, producer, _ = stream(conf=config(**{"max.poll.interval.ms": "10000"}))
    worker.checkpoint.pending[T0] = 1
    before = time.monotonic()
    worker.partitions_revoked([T0])
    (deadline,) = producer.flush_deadlines
    assert before + 10 * REVOKE_SHARE_OF_POLL_INTERVAL <= deadline <= time.monotonic() + 10 * REVOKE_SHARE_OF_POLL_INTERVAL


def test_revoke_while_stopping_is_bounded_by_the_stop_deadline():
    worker, producer, _ = stream()
    worker.checkpoint.pending[T0] = 1
    worker._state.request_stop()
    worker.partitions_revoked([T0])
    assert producer.flush_deadlines == [worker._state.deadline]


def test_revoke_whose_records_are_not_acknowledged_in_time_commits_nothing_but_still_calls_the_listener(caplog):
    worker, _, events = stream(producer_kwargs={"flush_ok": False})
    worker.checkpoint.pending[T0] = 5
    worker.partitions_revoked([T0])
    assert events == ["flush", ("revoked", [T0])]
    assert "not committed, so their next owner mirrors them again" in caplog.text


def test_revoke_after_a_failure_commits_nothing():
    worker, _, events = stream()
    worker.checkpoint.pending[T0] = 5
    worker._state.fail(SendFailed("refused"))
    worker.partitions_revoked([T0])
    assert events == [("revoked", [T0])]


def test_lost_partitions_are_discarded_without_a_commit_and_the_listener_hears_it():
    worker, _, events = stream()
    worker.checkpoint.pending.update({T0: 3, T1: 4})
    worker.partitions_lost([T0])
    assert events == [("lost", [T0])]
    assert worker.checkpoint.pending == {T1: 4} and worker.assigned == {T1}


# -- where a partition starts ------------------------------------------------------------------

@pytest.mark.parametrize("conf, method", [
    ({}, "assign"),
    ({"partition.assignment.strategy": "range,roundrobin"}, "assign"),
    ({"partition.assignment.strategy": "cooperative-sticky"}, "incremental_assign"),
    ({"group.protocol": "consumer"}, "incremental_assign"),
])
def test_assign_resolves_start_offsets_and_assigns_as_the_protocol_requires(conf, method):
    consumer = Consumer(committed={0: 12}, watermarks=(3, 50))
    worker, _, events = stream(assigned=(), conf=config(**{"auto.offset.reset": "earliest", **conf}), consumer=consumer)
    worker.parts.membership._on_assign(consumer, [KafkaTopicPartition("t", 0), KafkaTopicPartition("t", 1)])
    assert consumer.assigned_with == (method, [(0, 12), (1, 3)])  # committed, else earliest
    assert worker.assigned == {T0, T1} and worker.positions == {T0: 12, T1: 3}
    assert worker._shared.target_topics.ensured == [{"t": ["t"]}]
    assert events == [("assigned", [T0, T1])]


@pytest.mark.parametrize("refresh, mm2, grow", [(False, False, False), (True, False, True), (False, True, True)])
def test_a_kept_partition_needs_its_target_partition_before_any_record_goes_there(refresh, mm2, grow):
    """PartitionPreservingHandler sends a record to its source partition's number: an assignment
    checks (and, where the mirror keeps partitions in line, grows) the target topic first; the
    default handler's records go wherever the partitioner says, so nothing is checked."""
    from dataclasses import replace

    from mirror_maker.handlers import PartitionPreservingHandler

    conf = config(**{"auto.offset.reset": "earliest"})
    conf = replace(conf, replication=replace(conf.replication, refresh_topics=refresh, mirror_maker_2_creation=mm2))
    consumer = Consumer(watermarks=(0, 5))
    worker, _, _ = stream(handler=PartitionPreservingHandler(), assigned=(), conf=conf, consumer=consumer)
    worker.parts.membership._on_assign(consumer, [KafkaTopicPartition("t", 0)])
    assert worker._shared.target_topics.required == ({"t": ["t"]}, grow, "the message handler")
    worker, _, _ = stream(assigned=(), conf=conf, consumer=consumer)
    worker.parts.membership._on_assign(consumer, [KafkaTopicPartition("t", 0)])
    assert not hasattr(worker._shared.target_topics, "required")


def test_a_start_resolved_by_auto_offset_reset_is_committed_at_once_so_a_restart_keeps_it():
    """With the default latest, a crash before the first commit would resolve it again, past what
    arrived meanwhile."""
    consumer = Consumer(committed={0: 12}, watermarks=(3, 50))
    worker, _, events = stream(assigned=(), consumer=consumer)
    worker.parts.membership._on_assign(consumer, [KafkaTopicPartition("t", 0), KafkaTopicPartition("t", 1)])
    assert worker.checkpoint.pending == {T1: 50} and worker._commit_now
    worker.commit()
    assert ("commit", {T1: 50}) in events


def test_no_committed_offset_with_auto_offset_reset_none_is_a_failure_naming_the_partitions():
    consumer = Consumer(committed={0: 12}, watermarks=(3, 50))
    worker, _, _ = stream(assigned=(), conf=config(**{"auto.offset.reset": "error"}), consumer=consumer)
    with pytest.raises(NoOffsetForPartition, match="no committed offset for t-1 and auto.offset.reset=none"):
        worker.parts.membership._on_assign(consumer, [KafkaTopicPartition("t", 0), KafkaTopicPartition("t", 1)])
    assert consumer.assigned_with is None  # nothing assigned, nothing committed


@pytest.mark.parametrize("conf, method", [({}, "assign"), ({"group.protocol": "consumer"}, "incremental_assign")])
def test_an_assignment_served_after_a_stop_neither_checks_target_topics_nor_reads_offsets(conf, method):
    """The consumer's close serves an assignment the group made meanwhile: each of those calls
    can wait 10 s for a cluster that is away, and nothing is mirrored any more."""
    consumer = Consumer()
    consumer.committed = consumer.get_watermark_offsets = None  # not to be called
    worker, _, events = stream(assigned=(), conf=config(**conf), consumer=consumer)
    worker._state.request_stop()
    worker.parts.membership._on_assign(consumer, [KafkaTopicPartition("t", 0, -1001)])
    assert consumer.assigned_with == (method, [(0, -1001)])
    assert worker._shared.target_topics.ensured == []
    assert worker.assigned == {T0} and events == [("assigned", [T0])]


# -- out of range ------------------------------------------------------------------------------

@pytest.mark.parametrize("reset, expected, logged", [
    ("earliest", 1800, "1700 records were deleted by retention before they were mirrored"),
    ("latest", 2000, "1700 records were deleted by retention before they were mirrored, and 200 more are skipped"),
])
def test_an_offset_out_of_range_goes_on_from_the_reset_counts_the_loss_and_is_committed(caplog, reset, expected,
                                                                                       logged):
    consumer = Consumer(watermarks=(1800, 2000))
    worker, _, events = stream(conf=config(**{"auto.offset.reset": reset}), consumer=consumer)
    worker.positions[T0] = 100
    mirror(worker, [Msg("t", 0, 100, error=KafkaError(KafkaError._AUTO_OFFSET_RESET))])
    assert consumer.assigned_with == ("assign", [(0, expected), (1, -1001)])  # eager: the whole assignment again
    assert worker.positions[T0] == expected and worker.checkpoint.pending == {T0: expected}
    assert logged in caplog.text and caplog.text.count("out of range") == 1


def test_an_offset_out_of_range_with_auto_offset_reset_none_fails_the_run():
    consumer = Consumer(watermarks=(1800, 2000))
    worker, _, _ = stream(conf=config(**{"auto.offset.reset": "error"}), consumer=consumer)
    with pytest.raises(NoOffsetForPartition, match="offset 100 of t-0 is out of range"):
        mirror(worker, [Msg("t", 0, 100, error=KafkaError(KafkaError._AUTO_OFFSET_RESET))])


def test_the_lag_after_a_reset_is_measured_from_the_new_position_not_the_old_one():
    consumer = Consumer(watermarks=(1800, 2000), positions={0: 100})
    worker, _, _ = stream(assigned=(T0,), conf=config(**{"auto.offset.reset": "earliest"}), consumer=consumer)
    mirror(worker, [Msg("t", 0, 100, error=KafkaError(KafkaError._AUTO_OFFSET_RESET))])
    consumer._watermarks = (1800, 2000)
    worker.update_lag()
    assert worker._metrics.totals()["lag"] == 200  # the end 2000 minus the new position 1800, not 1900


# -- the loop ------------------------------------------------------------------------------------

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


def test_the_loop_sends_a_short_batch_without_waiting_for_max_poll_records():
    """max.poll.records is the most one poll takes, not a count to wait for: three fetched
    records go out at once, not after the poll timeout (librdkafka's consume(500, 0.2) waits)."""
    worker, producer, _events = stream(assigned=(T0,))
    consumer = TrickleConsumer(worker._state)
    worker.parts.source._consumer = consumer
    worker.parts.membership._consumer = consumer
    worker._loop()
    assert [value for _t, value, *_rest in producer.sent] == [b"v", b"v", b"v"]
    assert worker.checkpoint.pending == {T0: 3}
    assert consumer.now == 0.0


def test_an_idle_partition_s_offset_is_committed_again_before_it_could_expire():
    worker, _, events = stream(assigned=(T0,))
    checkpoint = worker.checkpoint
    now = [1000.0]
    checkpoint._clock = lambda: now[0]
    checkpoint._refresh_s = 3600
    checkpoint.started({T0: 42})
    now[0] += 3600
    assert worker.commit()
    assert events == ["flush", ("commit", {T0: 42})]
    events.clear()
    now[0] += 10
    assert worker.commit() and events == []  # committed just now: nothing to do


# -- waiting for the target --------------------------------------------------------------------

class PausingConsumer(Consumer):
    """Records pauses, resumes and seeks; ``batches`` are what consume returns while paused."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.paused = set()

    def pause(self, partitions):
        self.calls.append(("pause", sorted(p.partition for p in partitions)))
        self.paused.update(p.partition for p in partitions)

    def resume(self, partitions):
        self.calls.append(("resume", sorted(p.partition for p in partitions)))
        self.paused.difference_update(p.partition for p in partitions)

    def consume(self, num_messages, timeout):
        self.calls.append("consume")
        return super().consume(num_messages, timeout)


def test_a_wait_for_the_target_keeps_the_group_with_paused_partitions_and_reading_goes_on_where_it_was():
    """A long flush or a full queue blocked the loop past max.poll.interval.ms: the member was
    thrown out of the group and its partitions mirrored again by the next owner."""
    consumer = PausingConsumer()
    worker, _, _ = stream(consumer=consumer)
    consumer.batches = [[Msg("t", 0, 7)]]  # fetched before the pause took effect: read again later
    worker.last_progress -= 60  # the loop has not polled for a minute
    worker.keep_alive()
    assert consumer.calls[:2] == [("pause", [0, 1]), "consume"]
    assert ("seek", 0, 7) in consumer.calls and worker.checkpoint.pending == {}
    consumer.calls.clear()
    worker.keep_alive()  # the group was served just now: nothing
    assert consumer.calls == []
    mirror(worker, [Msg("t", 0, 7)])
    assert consumer.calls[0] == ("resume", [0, 1]) and worker.checkpoint.pending == {T0: 8}


def test_a_wait_inside_a_rebalance_callback_does_not_serve_the_group_itself():
    """A consume call inside a consumer callback aborts the process in confluent-kafka."""
    from mirror_maker.clients import waiting

    consumer = PausingConsumer()
    worker, producer, _ = stream(consumer=consumer)
    waiting.register(worker.keep_alive)
    try:
        worker.checkpoint.pending[T0] = 5
        worker.last_progress -= 60  # the loop has not polled for a minute
        producer.flush = lambda deadline=None, for_commit=False: waiting.serve() or True  # a flush that waits
        worker.partitions_revoked([T0])
        assert "consume" not in consumer.calls
        worker.keep_alive()
        assert "consume" in consumer.calls  # outside the callback it does
    finally:
        waiting.register(None)


def test_a_partition_whose_end_holds_no_record_to_return_is_at_its_end_by_the_fetch_position():
    """A compacted batch's removed tail (or an aborted transaction and its marker) leaves the
    consumer's position below the end for ever: the lag showed 3 and a bounded run never ended.
    librdkafka's statistics carry the fetch position past them."""
    import json

    consumer = Consumer(watermarks=(0, 10), positions={0: 7})
    worker, _, _ = stream(assigned=(T0,), consumer=consumer)
    source = worker.parts.source
    worker.update_lag()
    assert worker.at_end == set() and worker._metrics.totals()["lag"] == 3
    stats = {"topics": {"t": {"partitions": {"0": {"fetch_state": "active", "next_offset": 10, "ls_offset": 10,
                                                     "fetchq_cnt": 0}}}}}
    source.on_stats(json.dumps(stats))  # taken after the position stood still
    worker.update_lag()
    assert worker.at_end == {T0} and worker._metrics.totals()["lag"] == 0
    consumer.positions = {0: 8}  # it moves again: the fetch view waits for newer statistics
    worker.update_lag()
    assert worker.at_end == set()


def test_a_short_wait_does_not_serve_the_group_and_static_shards_never_do():
    """Serving the group pauses the partitions, which drops what librdkafka fetched ahead: a wait
    shorter than a quarter of max.poll.interval.ms (a commit's flush, a full queue) leaves the
    partitions alone, and exactly-once's shards, in no group, are never paused."""
    consumer = PausingConsumer()
    worker, _, _ = stream(consumer=consumer)
    worker.keep_alive()  # the loop polled just now
    assert consumer.calls == []
    worker.last_progress -= 60
    worker.parts.membership.in_group = False
    worker.keep_alive()
    assert consumer.calls == []


def test_a_stream_joins_another_stream_s_commit_before_its_own_interval_is_due():
    """The shared producer's queue empties only while no stream produces: a stream sees another
    stream's commit waiting for that and flushes and commits too, in the same round."""
    worker, producer, events = stream(assigned=(T0,))
    consumer = TrickleConsumer(worker._state)
    worker.parts.source._consumer = consumer
    worker.parts.membership._consumer = consumer
    producer.others_flushing = True
    assert not worker.checkpoint.due()
    worker._loop()
    assert events[-2:] == ["flush", ("commit", {T0: 3})]


def test_a_revoke_with_nothing_pending_does_not_join_another_stream_s_waiting_commit():
    """Joining is for records this stream keeps producing: a revoke with nothing pending answers
    the group at once, however long another stream's commit waits for the target."""
    worker, producer, events = stream()
    producer.others_flushing = True
    worker.partitions_revoked([T0])
    assert "flush" not in events and not any(e[0] == "commit" for e in events if isinstance(e, tuple))
