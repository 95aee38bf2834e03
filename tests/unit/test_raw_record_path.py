"""Raw mode's record path: a range raw mode cannot forward goes through the consumer and the
record producer, exactly that range, and the raw path goes on from the batch after it.

The stream is built as the runner builds it; its consumer, producers and source are stand-ins
(a scripted source broker feeds the real fetcher), so these tests see what is sent, what becomes
pending, and what the raw path does next.
"""

import dataclasses
import time

import pytest

from mirror_maker.engine.copier import RecordCopier
from mirror_maker.engine.membership import GroupMembership
from mirror_maker.engine.modes import consumer_conf
from mirror_maker.engine.parts import Parts, Shared
from mirror_maker.engine.positions import ResetPolicy, StartPositions
from mirror_maker.engine.state import RunState
from mirror_maker.engine.stream import Stream
from mirror_maker.errors import HandlerFailed
from mirror_maker.handlers import RawBatchHandler
from mirror_maker.ops.metrics import MirrorMetrics
from mirror_maker.records import TopicPartition
from mirror_maker.shallow import raw_source as shallow_worker
from mirror_maker.shallow.fetcher import BUFFER_BATCHES, RawFetcher
from mirror_maker.shallow.raw_source import RawSink, RawSource

from .stream_parts import Committer, Msg, Producer, Subscription, TargetTopics, config
from .test_raw_batches import batch
from .test_raw_fetcher import ScriptedSource

TP = TopicPartition("src", 0)


class SourceConsumer:
    """The partition's records as the consumer gives them once resumed and seeked (librdkafka
    hands back what follows too, the next batch's records included)."""

    def __init__(self, offsets):
        self.offsets, self.position, self.calls = list(offsets), None, []
        self.during_consume = None  # e.g. a rebalance callback that consume serves

    def resume(self, partitions):
        self.calls.append(("resume", [(p.partition, p.offset) for p in partitions]))

    def seek(self, partition):
        self.calls.append(("seek", partition.offset))
        self.position = partition.offset

    def get_watermark_offsets(self, partition, timeout=None, cached=False):
        self.calls.append(("watermarks", cached))
        return 0, self.offsets[-1] + 1

    def pause(self, partitions):
        self.calls.append(("pause", [p.partition for p in partitions]))
        self.position = None

    def consume(self, num_messages, timeout):
        if self.during_consume is not None:
            self.during_consume()
        if self.position is None:
            return []
        ready = [o for o in self.offsets if o >= self.position][:num_messages]
        if ready:
            self.position = ready[-1] + 1
        return [Msg("src", 0, o, b"v%d" % o) for o in ready]


class RawProducer:
    queued_bytes = queued_batches = 0

    def __init__(self):
        self.flushed_for, self.sent = [], []

    def flush(self, deadline=None, partitions=None):
        self.flushed_for.append(partitions)
        return True

    def send(self, target, partition, batch, source):
        self.sent.append((target, partition, batch.base_offset, batch.last_offset))

    def pending(self):
        return 0

    def pump(self):
        pass

    def drop_source(self, tp):
        pass


class ScriptedNet:
    """The stream's network poll: answers the source's next fetch with the next planned answer."""

    def __init__(self, source):
        self.source, self.planned, self.answered = source, [], 1  # the test answers the first fetch

    def poll(self, timeout_ms):
        if self.planned and len(self.source.fetches) > self.answered:
            self.source.answer(self.answered, **self.planned.pop(0))
            self.answered += 1


@pytest.fixture(autouse=True)
def no_next_answer_wait(monkeypatch):
    """A range's end does not wait for a next answer unless a test plans one."""
    monkeypatch.setattr(shallow_worker, "NEXT_RANGE_WAIT_S", 0.0)


def stream(records_at, handler=None, conf=None, **producer_kwargs):
    """A raw stream assigned src-0, fed by a scripted source; returns (raw source, scripted source,
    record producer). The stream is ``raw._stream``."""
    events = []
    conf = conf or config()
    state = RunState(shutdown_timeout_s=5)
    producer = Producer(state, events, **producer_kwargs)
    metrics = MirrorMetrics()
    handler = handler or RawBatchHandler()
    shared = Shared(conf, producer, handler, None, state, Subscription(), TargetTopics(), metrics)
    worker = Stream(0, None, shared)
    consumer = SourceConsumer(records_at)
    membership = GroupMembership(worker, consumer, shared.subscription, False, 500, False)
    copier = RecordCopier(handler, producer, str, state, metrics, conf.sync_send, on_error=worker.consume_error)
    source = ScriptedSource()
    fetcher = RawFetcher(source, state, 1)
    fetcher.assign(TP, 0)
    raw_producer = RawProducer()
    raw = RawSource(worker, consumer, membership, copier, fetcher, raw_producer, ScriptedNet(source), state, metrics,
                    handler, str, worker.targets_of, shared.target_topics.max_message_bytes, conf.sync_send)
    starts = StartPositions(ResetPolicy("earliest"), lambda tps: {}, lambda tp: (0, 0), False, True)
    worker.attach(Parts(membership, raw, RawSink(raw_producer, producer), Committer(events), starts))
    worker.assigned.add(TP)
    return raw, source, producer


def test_a_compacted_range_is_mirrored_exactly_and_the_raw_path_takes_the_next_batch_as_it_is():
    # Offsets 0..9 compacted to 0, 3 and 8 (three batches with holes), then 10..11 as they are.
    worker, source, producer = stream([0, 3, 8, 10, 11])
    worker._fetcher.fetch(0)
    source.answer(0, batch(0, 1, last_delta=2) + batch(3, 1, last_delta=4) + batch(8, 1, last_delta=1)
                  + batch(10, 2), high=12)
    sent_raw = []
    worker._forward = lambda tp, item: sent_raw.append((item.first, item.last))
    worker._hand_over()  # the range
    assert [value for _t, value, *_rest in producer.sent] == [b"v0", b"v3", b"v8"]  # not 10, 11
    assert producer.produced == 3 and worker._stream._metrics.fallbacks == {"offset holes (compaction)": 3}
    assert worker._consumer.calls == [("resume", [(0, 0)]), ("seek", 0), ("watermarks", False), ("pause", [0])]
    assert worker._raw.flushed_for == [[("src", 0)]]  # the raw producer drained for the partition first
    assert worker._stream.checkpoint.pending[TP] == 10
    worker._hand_over()  # the batch after it, once the range's records are acknowledged
    assert producer.events == ["flush"]  # the record producer's, before the raw batch: order kept
    assert sent_raw == [(10, 11)] and len(source.fetches) == 1  # what was fetched after it, as it is
    assert worker._stream.checkpoint.pending[TP] == 12 and worker._fetcher.positions[TP] == 12


def test_ranges_in_a_row_stream_without_waiting_for_acknowledgements_and_a_batch_waits_for_them():
    worker, source, producer = stream([0, 3, 8, 10, 11])
    worker._fetcher.fetch(0)
    source.answer(0, batch(0, 1, last_delta=2), high=12)
    worker._hand_over()
    worker._fetcher.fetch(0)
    source.answer(1, batch(3, 1, last_delta=6), high=12)  # the next answer: a range again
    worker._hand_over()
    assert [value for _t, value, *_rest in producer.sent] == [b"v0", b"v3", b"v8"]
    assert producer.events == []  # nothing waited for the target between the ranges
    producer.flush_ok = False  # the target does not acknowledge them in time
    worker._fetcher.fetch(0)
    source.answer(2, batch(10, 2), high=12)
    sent_raw = []
    worker._forward = lambda tp, item: sent_raw.append((item.first, item.last))
    worker._hand_over()
    assert sent_raw == [] and producer.events == ["flush"]  # the batch waits: order before progress
    assert worker._stream.checkpoint.pending[TP] == 10
    producer.flush_ok = True
    worker._hand_over()
    assert sent_raw == [(10, 11)] and worker._stream.checkpoint.pending[TP] == 12


def test_batches_wait_in_the_fetcher_while_the_producer_holds_a_full_buffer_for_the_target():
    # One fetch answer can hold thousands of small batches: the target gets them as it acknowledges.
    worker, source, _producer = stream([0, 1, 2])
    worker._fetcher.fetch(0)
    source.answer(0, batch(0, 1) + batch(1, 1) + batch(2, 1), high=3)
    sent_raw = []
    worker._forward = lambda tp, item: sent_raw.append(item.first)
    worker._raw.queued_batches = BUFFER_BATCHES
    assert worker._hand_over() == 0 and sent_raw == [] and len(worker._fetcher.work[TP]) == 3
    worker._raw.queued_batches = BUFFER_BATCHES - 1
    worker._forward = lambda tp, item: (sent_raw.append(item.first), setattr(worker._raw, "queued_batches", BUFFER_BATCHES))
    worker._hand_over()
    assert sent_raw == [0] and len(worker._fetcher.work[TP]) == 2  # nothing fetched again meanwhile
    assert len(source.fetches) == 1


def test_a_range_whose_last_records_are_gone_ends_at_the_next_record_without_sending_it():
    worker, source, producer = stream([0, 1, 20, 21])  # 2..9 compacted away, 10..19 deleted batches
    worker._fetcher.fetch(0)
    source.answer(0, batch(0, 2, last_delta=9), high=22)
    worker._hand_over()
    assert [value for _t, value, *_rest in producer.sent] == [b"v0", b"v1"]
    assert worker._stream.checkpoint.pending[TP] == 10 and worker._fetcher.positions[TP] == 10
    assert not worker._fetcher.work[TP]


def test_the_consumer_reads_only_for_the_record_path_so_it_does_not_long_poll_unless_told_to():
    worker, _source, _producer = stream([0])
    shared = worker._stream._shared
    assert consumer_conf(worker._stream, shared, **{"fetch.wait.max.ms": "10"})["fetch.wait.max.ms"] == "10"
    told = dataclasses.replace(shared, config=config(**{"fetch.wait.max.ms": "250"}))
    assert consumer_conf(worker._stream, told, **{"fetch.wait.max.ms": "10"})["fetch.wait.max.ms"] == "250"
    # Resets are the stream's: librdkafka only reports them.
    assert consumer_conf(worker._stream, told)["auto.offset.reset"] == "error"


def test_a_stop_while_the_producer_queue_is_full_ends_the_range_undone_and_commits_only_what_was_handed_over(caplog):
    """What the record producer took is committed after a flush, as every record of the path; the
    rest of the range is fetched again (a long range on a slow target moves on at each attempt)."""
    worker, source, producer = stream([0, 1, 2, 3], interrupt_at=2)
    worker._fetcher.fetch(0)
    source.answer(0, batch(0, 4, last_delta=5), high=6)
    worker._hand_over()  # no exception: a stop, not a failure
    assert [value for _t, value, *_rest in producer.sent] == [b"v0", b"v1"] and producer.produced == 2
    assert worker._stream.checkpoint.pending[TP] == 2 and worker._state.failure is None
    assert worker._fetcher.positions[TP] == 2 and not worker._fetcher.work[TP]  # the rest again later
    assert "records from src-0 offset 2 on are not committed" in caplog.text


def test_with_producer_type_sync_each_record_is_acknowledged_before_the_next():
    worker, source, producer = stream([0, 3], conf=dataclasses.replace(config(), sync_send=True), sync=True)
    worker._fetcher.fetch(0)
    source.answer(0, batch(0, 2, last_delta=3), high=4)
    worker._hand_over()
    assert [value for _t, value, *_rest in producer.sent] == [b"v0", b"v3"] and producer.events == ["flush", "flush"]


def test_while_the_next_answer_is_a_range_again_the_consumer_reads_on_without_a_pause(monkeypatch):
    """A LogAppendTime or compacted topic: every answer is a range. The consumer stays resumed
    from one to the next, and what it returned past a range is the next range's."""
    monkeypatch.setattr(shallow_worker, "NEXT_RANGE_WAIT_S", 5.0)  # bounded: the planned answers come at once
    worker, source, producer = stream([0, 3, 8, 10, 11, 12])
    worker._net.planned = [{"records": batch(8, 1, last_delta=1), "high": 14},  # 8..9
                           {"records": batch(10, 2), "high": 14}]  # as it is: the record path ends
    worker._fetcher.fetch(0)
    source.answer(0, batch(0, 1, last_delta=2) + batch(3, 1, last_delta=4), high=14)  # 0..7
    worker._hand_over()
    assert [value for _t, value, *_rest in producer.sent] == [b"v0", b"v3", b"v8"]
    assert worker._consumer.calls == [("resume", [(0, 0)]), ("seek", 0), ("watermarks", False), ("pause", [0])]
    assert worker._stream.checkpoint.pending[TP] == 10 and worker._stream._metrics.fallbacks == {"offset holes (compaction)": 3}
    assert [(w.first, w.last) for w in worker._fetcher.work[TP]] == [(10, 11)]  # next: the raw path's


def test_reading_on_from_range_to_range_gives_the_loop_its_turn_after_a_slice(monkeypatch):
    """A partition whose answers are ranges without end (live LogAppendTime traffic) must not
    keep the loop from commits, the group and the other partitions."""
    monkeypatch.setattr(shallow_worker, "NEXT_RANGE_WAIT_S", 5.0)
    monkeypatch.setattr(shallow_worker, "RECORD_PATH_SLICE_S", 0.0)
    worker, source, producer = stream([0, 3, 8])
    worker._net.planned = [{"records": batch(8, 1, last_delta=1), "high": 14}]
    worker._fetcher.fetch(0)
    source.answer(0, batch(0, 1, last_delta=2) + batch(3, 1, last_delta=4), high=14)
    worker._hand_over()
    assert [value for _t, value, *_rest in producer.sent] == [b"v0", b"v3"]  # one range, then the loop's turn
    assert worker._consumer.calls[-1] == ("pause", [0]) and len(source.fetches) == 1


def test_a_partition_revoked_during_its_range_is_left_to_its_next_owner():
    worker, source, producer = stream([0, 3, 8])
    worker._fetcher.fetch(0)
    source.answer(0, batch(0, 1, last_delta=2) + batch(3, 1, last_delta=4) + batch(8, 2), high=10)

    def revoked():  # what the consumer's revoke callback does, served by a consume call
        worker._stream.assigned.discard(TP)
        worker._fetcher.forget(TP)

    worker._consumer.during_consume = revoked
    worker._hand_over()
    assert TP not in worker._stream.checkpoint.pending and worker._fetcher.buffered_bytes == 0
    assert worker._consumer.calls[-1] == ("pause", [0])


def test_a_partition_revoked_and_assigned_back_during_its_range_starts_again_from_the_group_s_offset():
    """A wait for the target serves the group: the range read before belongs to no pending offset
    now, and moving the partition to its end would skip what its new start has not mirrored."""
    worker, source, producer = stream([0, 3, 8, 10])
    worker._fetcher.fetch(0)
    source.answer(0, batch(0, 3, last_delta=9) + batch(10, 1), high=11)
    calls = []

    def revoked_and_assigned_back():
        if not calls:
            calls.append("rebalance")
            worker.forget([TP])
            worker._stream.checkpoint.discard([TP])
            worker._fetcher.assign(TP, 0)  # the group's offset

    worker._consumer.during_consume = revoked_and_assigned_back
    worker._hand_over()
    assert TP not in worker._stream.checkpoint.pending and worker._fetcher.positions[TP] == 0
    assert not worker._fetcher.work[TP]


def test_a_partition_revoked_while_its_range_waits_for_the_raw_batches_before_it_is_not_read():
    worker, source, producer = stream([0, 3, 8])
    worker._fetcher.fetch(0)
    source.answer(0, batch(0, 3, last_delta=9), high=10)

    def flush_serving_a_revoke(deadline=None, partitions=None):
        worker._stream.assigned.discard(TP)
        worker.forget([TP])
        return True

    worker._raw.flush = flush_serving_a_revoke
    worker._hand_over()
    assert worker._consumer.calls == [] and producer.sent == []  # neither resumed nor seeked
    assert TP not in worker._stream.checkpoint.pending


def test_a_record_returned_again_is_counted_once_so_a_range_is_never_done_by_its_count_too_early():
    worker, source, producer = stream([0, 3, 8, 10])
    answers = [[0, 3], [0], [3, 8, 10]]  # 0 and 3 again, as after a seek back
    worker._consumer.consume = lambda num, timeout: [Msg("src", 0, o, b"v%d" % o) for o in
                                                     (answers.pop(0) if answers else [])]
    worker._fetcher.fetch(0)
    source.answer(0, batch(0, 3, last_delta=9) + batch(10, 1), high=11)  # 0..9 holding 0, 3 and 8
    worker._hand_over()
    assert [value for _t, value, *_rest in producer.sent] == [b"v0", b"v3", b"v8"]
    assert worker._stream.checkpoint.pending[TP] == 10


def test_a_revoke_served_while_a_batch_waits_for_the_record_path_s_records_forwards_nothing():
    worker, source, producer = stream([0])
    worker._fetcher.fetch(0)
    source.answer(0, batch(0, 1), high=1)
    worker._records_in_flight.add(TP)
    sent_raw = []
    worker._forward = lambda tp, item: sent_raw.append(item.first)

    def flush_serving_a_revoke(deadline=None):
        worker._stream.assigned.discard(TP)
        worker.forget([TP])
        return True

    worker._records.flush = flush_serving_a_revoke
    assert worker._hand_over() == 0 and sent_raw == []


class RoutingHandler(RawBatchHandler):
    """Drops the batch at offset 3, sends the one at 8 to "moved", the rest where they were."""

    def __init__(self):
        self.seen = []

    def handle_batch(self, batch):
        self.seen.append((batch.base_offset, batch.last_offset, batch.record_count, batch.max_timestamp))
        return None if batch.base_offset == 3 else "moved" if batch.base_offset == 8 else batch.topic

    def target_topics(self, source_topic):
        return [source_topic, "moved"]


def test_the_raw_handler_decides_for_each_batch_of_a_range_as_for_a_batch_forwarded_as_it_is():
    """KIP-712's contract holds where raw mode falls back: a compacted range's batches are
    shown to the handler one by one, and its records go where it says, or nowhere."""
    handler = RoutingHandler()
    worker, source, producer = stream([0, 3, 8, 10, 11], handler)
    worker._fetcher.fetch(0)
    now_ms = int(time.time() * 1000)
    source.answer(0, batch(0, 1, last_delta=2, timestamp=now_ms - 5000) + batch(3, 1, last_delta=4)
                  + batch(8, 1, last_delta=1) + batch(10, 2), high=12)
    worker._hand_over()  # the range 0..9
    assert [(topic, value) for topic, value, *_rest in producer.sent] == [("src", b"v0"), ("moved", b"v8")]
    assert handler.seen == [(0, 2, 1, now_ms - 4998), (3, 7, 1, 1004), (8, 9, 1, 1001)]
    assert worker._raw.flushed_for == [[("moved", 0), ("src", 0)]]  # both targets' raw batches first
    assert worker._stream.checkpoint.pending[TP] == 10  # the dropped batch's offsets are committed too
    assert producer.produced == 2 and worker._stream._metrics.filtered_records == 1
    stats = worker._stream._metrics.partitions[TP]
    assert stats.records == 3  # consumed: the dropped record too, as for a dropped raw batch
    low, high, _avg = stats.age.values(time.time())
    assert 4990 < low <= high  # ages from the batches' times, as the raw path reports them


def test_a_raw_handler_that_raises_on_a_range_s_batch_fails_the_run_with_nothing_sent():
    class Raising(RawBatchHandler):
        def handle_batch(self, batch):
            raise ValueError("no")

    worker, source, producer = stream([0, 3], Raising())
    worker._fetcher.fetch(0)
    source.answer(0, batch(0, 1, last_delta=2) + batch(3, 1), high=4)
    with pytest.raises(HandlerFailed, match="handler raised on the batch of src-0 offsets 0..2: ValueError: no"):
        worker._hand_over()
    assert producer.sent == [] and TP not in worker._stream.checkpoint.pending


def test_a_batch_goes_as_it_is_only_where_every_target_topic_of_the_handler_takes_its_size():
    """A handler may send a topic's batches to several target topics (``target_topics``): one
    larger than the smallest of their max.message.bytes takes the record path, where the target
    would refuse it as a batch."""
    class TwoTargets(RawBatchHandler):
        def target_topics(self, source_topic):
            return ["roomy", "tight"]

    worker, source, _producer = stream([0], TwoTargets())
    worker._max_message_bytes.update({"roomy": 100000, "tight": 300})
    worker._consumer.pause = lambda partitions: None
    worker.assigned({TP: 0}, [TP])
    assert worker._fetcher.max_batch_bytes == {"src": 300}
    worker._fetcher.fetch(0)
    source.answer(len(source.fetches) - 1, batch(0, 1) + batch(1, 40), high=41)
    assert [(w.first, w.last, w.reason) for w in worker._fetcher.work[TP]] == [
        (0, 0, ""), (1, 40, "larger than the target's max.message.bytes")]


class OffsetSyncs:
    """What the stream tells the offset syncs (--emit.offset-syncs.enabled): its runs."""

    def __init__(self):
        self.runs = []

    def record(self, tp, first, last, count, exact=True):
        self.runs.append((tp.partition, first, last, count))


def test_offset_syncs_get_each_batch_forwarded_and_each_record_path_run_from_its_first_record():
    """A forwarded batch takes as many target offsets as it has records; a record path run is
    told from its first record (a sync naming an offset before it would map a group there past
    that record on the target), in pieces without gaps."""
    worker, source, producer = stream([2, 3, 8, 10, 11])
    worker._stream.offset_syncs = syncs = OffsetSyncs()
    worker._fetcher.fetch(0)
    # Offsets 0..3 holding 2 and 3, 4..8 holding 8 (compacted: the record path), then 10..11.
    source.answer(0, batch(0, 2, last_delta=3) + batch(4, 1, last_delta=4) + batch(10, 2), high=12)
    worker._hand_over()  # the range 0..8
    worker._hand_over()  # the batch after it, as it is
    assert [value for _t, value, *_rest in producer.sent] == [b"v2", b"v3", b"v8"]
    assert worker._raw.sent == [("src", 0, 10, 11)]
    assert syncs.runs == [(0, 2, 3, 2), (0, 8, 8, 1), (0, 10, 11, 2)]  # cut at the gap: each record placed


def test_a_batch_sent_to_a_topic_the_raw_handler_does_not_name_fails_the_run_with_nothing_sent():
    """Only the topics a handler names are created and their limits read: a batch sent elsewhere
    waited for that topic for ever, with nothing in the log but "waiting for the target"."""
    class Undeclared(RawBatchHandler):
        def handle_batch(self, batch):
            return "elsewhere" if batch.base_offset >= 3 else batch.topic

    worker, source, producer = stream([0, 3], Undeclared())
    worker._fetcher.fetch(0)
    source.answer(0, batch(0, 3) + batch(3, 1), high=4)
    with pytest.raises(HandlerFailed, match=r"sent the batch of src-0 offsets 3..3 to elsewhere, a topic its "
                                            r"target_topics\('src'\) does not name: name it there"):
        worker._hand_over()
    assert worker._raw.sent == [("src", 0, 0, 2)] and worker._stream.checkpoint.pending[TP] == 3  # not past it


def test_a_range_at_the_partition_s_end_whose_last_records_were_compacted_away_is_done_by_its_count():
    """Nothing follows it, so no record past it will ever come: its batches' record counts (which
    compaction keeps true) say it is complete."""
    worker, source, producer = stream([0, 1])  # 2..9 compacted away, and the partition ends at 10
    worker._fetcher.fetch(0)
    source.answer(0, batch(0, 2, last_delta=9), high=10)
    worker._hand_over()
    assert [value for _t, value, *_rest in producer.sent] == [b"v0", b"v1"]
    assert worker._stream.checkpoint.pending[TP] == 10 and not worker._fetcher.work[TP]


def test_a_range_that_gets_no_records_for_a_while_is_never_taken_as_compacted_away(monkeypatch):
    """What a leader move looks like at a partition's end: no record comes for seconds, and the
    high watermark is at the range's end. The range is read again later; nothing is committed
    past what was mirrored."""
    monkeypatch.setattr(shallow_worker, "RECORD_PATH_TIMEOUT_S", 0.3)
    worker, source, producer = stream([0])  # the consumer gets 0; 1 exists but does not arrive
    worker._fetcher.fetch(0)
    source.answer(0, batch(0, 2, last_delta=2), high=3)  # 0..2 holding 0 and 1 (holes: the record path)
    worker._hand_over()
    assert [value for _t, value, *_rest in producer.sent] == [b"v0"]
    assert worker._stream.checkpoint.pending[TP] == 1  # not done: only what was handed over
    assert worker._fetcher.positions[TP] == 1 and not worker._fetcher.work[TP]  # the rest asked for again
    worker._consumer.offsets = [0, 1]  # the new leader answers
    worker._fetcher.fetch(0)
    source.answer(1, batch(0, 2, last_delta=2), high=3)
    worker._hand_over()
    assert [value for _t, value, *_rest in producer.sent] == [b"v0", b"v1"]
    assert worker._stream.checkpoint.pending[TP] == 3


def test_a_backlog_range_the_consumer_skips_into_is_never_done_and_is_read_again_from_the_gap(caplog):
    """A backlog's offsets follow each other: records past a gap (the consumer jumped ahead) were
    taken for the range's end and its records committed unsent."""
    from mirror_maker.shallow.fetcher import BACKLOG_BATCHES

    count = BACKLOG_BATCHES
    worker, source, producer = stream([0, 1] + list(range(50, count + 5)))  # 2..49 skipped by the consumer
    worker._fetcher.fetch(0)
    source.answer(0, b"".join(batch(offset, 1) for offset in range(count)), high=count)
    worker._hand_over()
    assert [value for _t, value, *_rest in producer.sent] == [b"v0", b"v1"]
    assert worker._stream.checkpoint.pending[TP] == 2  # what was handed over, not the range's end
    assert worker._fetcher.positions[TP] == 2 and "The consumer skipped from src-0 offset 2 to 50" in caplog.text


def test_a_range_starting_inside_a_batch_reads_the_batch_from_its_start_and_mirrors_from_the_position():
    worker, source, producer = stream([0, 2, 3])  # a compacted batch 0..4 holding 0, 2, 3; the position is 2
    worker._fetcher.assign(TP, 2)
    worker._fetcher.fetch(0)
    source.answer(len(source.fetches) - 1, batch(0, 3, last_delta=4), high=5)
    worker._hand_over()
    assert worker._consumer.calls[:2] == [("resume", [(0, 0)]), ("seek", 0)]  # from the batch's start
    assert [value for _t, value, *_rest in producer.sent] == [b"v2", b"v3"]  # 0 is before the position
    assert worker._stream.checkpoint.pending[TP] == 5  # done: the batch's 3 records were seen


def test_while_the_producer_queue_is_full_the_round_waits_on_the_network_instead_of_spinning():
    """Fetched batches waiting for room made every round poll with no wait: the stream's thread
    spun until the target answered (twice raw mode's CPU per GB, 0.75 of its rate)."""
    from mirror_maker.shallow.fetcher import BUFFER_BATCHES, FETCH_WAIT_MS

    worker, source, _producer = stream([0, 1, 2])
    worker._fetcher.fetch(0)
    source.answer(0, batch(0, 3), high=3)
    timeouts = []
    worker._net.poll = lambda timeout_ms: timeouts.append(timeout_ms)
    worker._raw.queued_batches = BUFFER_BATCHES
    worker.read()
    assert timeouts == [FETCH_WAIT_MS] and worker._fetcher.work[TP]  # nothing handed over: no room
    worker._raw.queued_batches = 0  # room again: the batch goes at once
    timeouts.clear()
    worker.read()
    assert timeouts == [0]


def test_a_raw_stream_joins_a_commit_that_waits_for_the_record_producer_it_shares():
    """The record path's records go to the producer every stream shares: a raw stream commits
    when another stream's commit waits for that queue to drain, and never needs to on its own."""
    from mirror_maker.shallow.raw_source import RawSink

    class SharedRecords:
        waiting = True

        def commit_flush_waiting(self):
            return self.waiting

    records = SharedRecords()
    sink = RawSink(raw=None, records=records)
    assert sink.joins_commit() and not sink.needs_commit()
    records.waiting = False
    assert not sink.joins_commit()
