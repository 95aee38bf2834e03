"""The raw producer's commit rules: sequences, order and retries, and what a refused batch does,
against a scripted target (the requests it gets, the answers we give it). Kafka itself checks
them in tests/integration/test_raw_mode.py; here every path is taken on purpose."""

import time
from types import SimpleNamespace

import pytest
from kafka.future import Future

from mirror_maker.engine.state import RunState
from mirror_maker.errors import SendFailed
from mirror_maker.ops.metrics import MirrorMetrics
from mirror_maker.records import TopicPartition
from mirror_maker.shallow.batches import HEADER, split
from mirror_maker.shallow.producer import RawProducer

from .scripted_broker import ScriptedBroker
from .test_raw_batches import batch

SOURCE = TopicPartition("src", 0)


class ScriptedTarget(ScriptedBroker):
    """Produce requests wait until the test answers them."""

    def __init__(self) -> None:
        super().__init__()
        self.requests = []  # [(what it carried, future)], in the order sent
        self.producer_ids = []  # of each request's first batch

    def send(self, node, request):
        def header(records):  # the batch's two pieces (see produce_request.Parts), or joined
            return HEADER.unpack_from(records if isinstance(records, bytes) else records.joined())

        carried = [(topic.name, part.index, header(part.records)[11], header(part.records)[12])
                   for topic in request.topic_data
                   for part in topic.partition_data]  # (topic, partition, base sequence, records)
        self.producer_ids.append(header(request.topic_data[0].partition_data[0].records)[9])
        future = Future()
        self.requests.append((carried, future))
        return future

    def answer(self, index: int, **codes) -> None:
        """Answer request ``index``: every partition succeeds unless ``codes`` names it
        (``p<partition>=code``)."""
        carried, future = self.requests[index]
        future.success(SimpleNamespace(responses=[SimpleNamespace(name=topic, partition_responses=[
            SimpleNamespace(index=partition, error_code=codes.get(f"p{partition}", 0), error_message=None)])
            for topic, partition, _seq, _count in carried]))

    def carried(self, index: int):
        return [(partition, sequence, count) for _t, partition, sequence, count in self.requests[index][0]]


class IdleNetwork:
    def poll(self, timeout_ms=None, future=None) -> None:
        pass


def fetched(data: bytes):
    """A batch as the fetcher hands it over: its CRC checked."""
    return split(data)[0].checked()


def producer(abort=True):
    state, target, metrics = RunState(), ScriptedTarget(), MirrorMetrics()
    raw = RawProducer([target], IdleNetwork(), state, abort, metrics)
    raw.producer_id, raw.producer_epoch = 7, 0
    return raw, target, state, metrics


class IdTarget:
    """The target as the renewal sees it (its InitProducerId requests): each answer is the
    next of ``answers`` (a producer id, or an exception: a failed request), at once unless
    ``held``."""

    def __init__(self, *answers, held=False):
        self.answers, self.held, self.futures = list(answers), held, []
        self.client = SimpleNamespace(least_loaded_node=lambda bootstrap_fallback: 1)
        self.bootstrap = "target:9092"

    def ready(self, node):
        return True

    def send(self, node, request):
        future = Future()
        self.futures.append(future)
        if not self.held:
            self.answer()
        return future

    def answer(self):
        future, answer = next(f for f in self.futures if not f.is_done), self.answers.pop(0)
        if isinstance(answer, Exception):
            future.failure(answer)
        else:
            future.success(SimpleNamespace(error_code=0, producer_id=answer, producer_epoch=0))


def renewing(raw, producer_id=8):
    """The target gives the next InitProducerId ``producer_id``; returns the ids given."""
    renewed = []
    ids = IdTarget(producer_id)
    raw._cluster = ids
    original = ids.send

    def send(node, request):
        renewed.append(producer_id)
        return original(node, request)
    ids.send = send
    return renewed


def queue(raw, *counts, partition=0):
    offset = 0
    for count in counts:
        raw.send("dst", partition, fetched(batch(offset, count)), SOURCE)
        offset += count


def test_one_batch_until_the_first_acknowledgement_then_pipelined_with_growing_sequences():
    raw, target, _state, _metrics = producer()
    queue(raw, 3, 2, 4)
    assert raw.unacknowledged_records() == 9
    raw.pump()
    assert [target.carried(i) for i in range(len(target.requests))] == [[(0, 0, 3)]]
    target.answer(0)
    raw.pump()  # the target knows our sequence now: the rest may go at once
    assert [target.carried(i) for i in range(1, len(target.requests))] == [[(0, 3, 2)], [(0, 5, 4)]]
    target.answer(2)  # the last first: acknowledged, but behind one that is not
    assert raw.acked_records == 3 and raw.unacknowledged_records() == 2
    target.answer(1)
    assert raw.acked_records == 9 and raw.pending() == 0 and raw.queued_bytes == 0
    assert raw.unacknowledged_records() == 0
    assert raw.flush(None) is True


def test_after_a_retriable_error_the_unacknowledged_batches_go_again_in_order_with_their_sequences():
    raw, target, _state, _metrics = producer()
    queue(raw, 3, 2, 4)
    raw.pump()
    target.answer(0)
    raw.pump()
    target.answer(1, p0=6)  # NOT_LEADER_OR_FOLLOWER
    assert target.refreshes == 1
    raw.pump()
    assert len(target.requests) == 3  # nothing again while a batch of the partition is in flight
    target.answer(2, p0=45)  # OUT_OF_ORDER_SEQUENCE_NUMBER: behind the failed one
    raw.pump()
    assert [target.carried(i) for i in range(3, len(target.requests))] == [[(0, 3, 2)]]  # one, carefully
    target.answer(3)
    raw.pump()
    assert target.carried(4) == [(0, 5, 4)]
    target.answer(4)
    assert raw.acked_records == 9 and raw.pending() == 0


def test_a_duplicate_sequence_means_an_earlier_attempt_was_written():
    raw, target, _state, _metrics = producer()
    queue(raw, 3)
    raw.pump()
    target.answer(0, p0=46)  # DUPLICATE_SEQUENCE_NUMBER
    assert raw.acked_records == 3 and raw.pending() == 0


def test_a_refused_batch_with_abort_fails_the_run_naming_its_source_offsets_and_nothing_is_flushed():
    raw, target, state, _metrics = producer(abort=True)
    queue(raw, 3, 2)
    raw.pump()
    target.answer(0, p0=87)  # INVALID_RECORD
    assert isinstance(state.failure, SendFailed)
    assert "src-0 offsets 0..2" in str(state.failure) and "INVALID_RECORD" in str(state.failure)
    raw.pump()
    assert len(target.requests) == 1  # nothing more goes out after a failure
    assert raw.flush(None) is False and raw.acked_records == 0


def test_a_refused_batch_without_abort_is_dropped_and_the_batches_behind_it_take_its_sequences():
    raw, target, state, metrics = producer(abort=False)
    queue(raw, 3, 2, 4)
    raw.pump()
    target.answer(0)
    raw.pump()
    target.answer(1, p0=87)  # the 2-record batch, sequence 3: refused
    target.answer(2, p0=45)  # the one behind it was out of order, so not appended either
    assert state.failure is None
    raw.pump()
    assert target.carried(3) == [(0, 3, 4)]  # the 4-record batch, at the refused one's sequence
    assert target.producer_ids[3] == 7  # the same producer id: nothing to renew
    target.answer(3)
    assert raw.acked_records == 7 and raw.pending() == 0 and raw.queued_bytes == 0
    assert metrics.dropped == 2


@pytest.mark.parametrize("code", [6, 7, 13])  # not leader, timed out, network: the same batch again
def test_a_retriable_error_on_the_only_batch_in_flight_sends_it_again_unchanged(code):
    raw, target, _state, _metrics = producer()
    queue(raw, 3, 5)
    raw.pump()
    target.answer(0)
    raw.pump()
    target.answer(1, p0=code)
    raw.pump()
    assert target.carried(2) == target.carried(1) == [(0, 3, 5)]


def test_out_of_order_on_the_first_unacknowledged_batch_takes_a_new_producer_id_and_starts_at_sequence_0():
    raw, target, _state, _metrics = producer()
    queue(raw, 3, 5)
    raw.pump()
    target.answer(0)
    raw.pump()
    renewed = renewing(raw)
    target.answer(1, p0=45)  # the broker lost our state (e.g. its log was truncated)
    raw.pump()
    assert renewed == [8]
    assert target.producer_ids[2] == 8 and target.carried(2) == [(0, 0, 5)]


def test_a_lost_source_partition_s_batches_go_wherever_the_handler_sent_them_and_only_theirs():
    """A handler may send a source partition's batches to several target topics, and several
    source topics' to one: losing the partition drops its batches from every target partition,
    the others' stay and go on under a new producer id, renumbered from 0."""
    raw, target, _state, _metrics = producer()
    other = TopicPartition("other", 0)
    raw.send("dst", 0, fetched(batch(0, 3)), SOURCE)
    raw.send("dst", 0, fetched(batch(0, 2)), other)  # another source topic, the same target partition
    raw.send("moved", 0, fetched(batch(3, 4)), SOURCE)  # the handler sent this one elsewhere
    raw.pump()  # each target partition's first batch is in flight
    renewed = renewing(raw)
    raw.drop_source(SOURCE)
    assert raw.unacknowledged_records() == 2 and raw.queued_bytes == len(batch(0, 2))
    for index in range(len(target.requests)):
        target.answer(index)  # answers for dropped batches count for nothing
    assert raw.acked_records == 0
    raw.pump()
    assert renewed == [8] and target.producer_ids[-1] == 8 and target.carried(len(target.requests) - 1) == [(0, 0, 2)]
    target.answer(len(target.requests) - 1)
    assert raw.acked_records == 2 and raw.pending() == 0 and raw.queued_bytes == 0


def test_each_partition_keeps_to_one_of_two_connections_with_up_to_5_requests_in_flight_on_each():
    state, lanes = RunState(), [ScriptedTarget(), ScriptedTarget()]
    raw = RawProducer(lanes, IdleNetwork(), state, True, MirrorMetrics())
    raw.producer_id, raw.producer_epoch = 7, 0
    for partition in range(4):
        queue(raw, *[1] * 7, partition=partition)
    raw.pump()
    for lane in lanes:  # one batch of each partition until its first acknowledgement
        lane.answer(0)
    raw.pump()
    assert [len(lane.requests) for lane in lanes] == [6, 6]  # the first, answered, then 5 in flight on each
    for number, lane in enumerate(lanes):
        carried = [entry for index in range(len(lane.requests)) for entry in lane.carried(index)]
        assert {partition for partition, _seq, _count in carried} == {number, number + 2}
        for partition in (number, number + 2):  # each partition's sequences in order on its connection
            assert [seq for p, seq, _count in carried if p == partition] == list(range(6))
    lanes[1].answer(1)
    raw.pump()
    assert [len(lane.requests) for lane in lanes] == [6, 7]  # only the answered connection sends again
    while any(not future.is_done for lane in lanes for _carried, future in lane.requests):
        for lane in lanes:
            for index, (_carried, future) in enumerate(list(lane.requests)):
                if not future.is_done:
                    lane.answer(index)
        raw.pump()
    assert raw.acked_records == 28 and raw.pending() == 0


def test_kafka_python_is_not_imported_with_the_mirror():
    """The raw path imports kafka-python in the stream's thread, while the consumer joins the
    group (the import alone takes about 0.15 s); imported with the modules at start-up, it put
    the first record 55 ms later."""
    import subprocess
    import sys

    code = ("import sys, mirror_maker.cli.command, mirror_maker.engine.runner, mirror_maker.engine.modes, mirror_maker.shallow.raw_source; "
            "print(sorted(m for m in sys.modules if m == 'kafka' or m.startswith('kafka.')))")
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout == "[]\n"


def test_a_renewal_waits_for_its_answer_without_blocking_and_asks_again_after_a_failure():
    """A producer id renewed after a revoke or an unknown producer id, with the target slow or
    away: no pump waits for the answer (the loop serves the group, a flush keeps its deadline),
    none asks twice at once, a failed request is sent again, and nothing goes until the new id."""
    from kafka.errors import KafkaConnectionError

    raw, target, _state, _metrics = producer()
    ids = raw._cluster = IdTarget(KafkaConnectionError("target away"), 9, held=True)
    raw._renew = True
    queue(raw, 3)
    raw.pump()
    raw.pump()
    assert len(ids.futures) == 1 and target.requests == []  # asked once, not waited for
    ids.answer()  # the request failed
    raw.pump()
    raw.pump()
    assert len(ids.futures) == 2 and target.requests == [] and raw._renew  # asked again
    assert raw.flush(time.monotonic() + 0.05) is False  # a flush keeps its deadline meanwhile
    ids.answer()
    raw.pump()
    assert not raw._renew and raw.producer_id == 9 and target.carried(0) == [(0, 0, 3)]


def test_a_batch_counts_the_part_of_its_fetch_answer_it_keeps_until_acknowledged():
    """Sent from its fetch answer, a batch keeps the answer in memory: what the answer's last
    forwarded batch carries of it counts as waiting for the target, as the batch does."""
    raw, target, _state, _metrics = producer()
    answer = batch(0, 3) + batch(3, 2)
    first, second = (b.checked() for b in split(answer))
    second.answer_share = 40  # what its answer held besides the two batches
    raw.send("dst", 0, first, SOURCE)
    raw.send("dst", 0, second, SOURCE)
    assert raw.queued_bytes == len(answer) + 40
    raw.pump()
    target.answer(0)
    raw.pump()
    target.answer(1)
    assert raw.acked_records == 5 and raw.queued_bytes == 0


def test_flushes_each_shorter_than_the_first_wait_line_still_say_the_target_is_away(monkeypatch, caplog):
    """Repeated short flushes (a revoke's, the record path's) add up: the line comes once the
    target has acknowledged nothing for FIRST_LOG_S, whichever flush waits then; an answer
    starts the count again."""
    import functools
    import time
    import types

    from mirror_maker.clients import waiting
    from mirror_maker.shallow import producer as producer_module

    now = [1000.0]

    class TickingNetwork:  # each poll takes its whole timeout (at least 1 ms): the target answers nothing
        def poll(self, timeout_ms=None, future=None) -> None:
            now[0] += max(timeout_ms or 0, 1) / 1000

    monkeypatch.setattr(producer_module, "time", types.SimpleNamespace(monotonic=lambda: now[0], time=time.time))
    monkeypatch.setattr(waiting, "WaitLog", functools.partial(waiting.WaitLog, clock=lambda: now[0]))
    state, target = RunState(), ScriptedTarget()
    raw = RawProducer([target], TickingNetwork(), state, True, MirrorMetrics())
    raw.producer_id, raw.producer_epoch = 7, 0
    queue(raw, 3)
    raw.pump()
    for _ in range(3):
        assert raw.flush(now[0] + 4) is False
    assert "waiting for the target to acknowledge 1 batches" in caplog.text
    target.answer(0)
    assert raw.pending() == 0
    caplog.clear()
    queue(raw, 2)
    raw.pump()
    assert raw.flush(now[0] + 4) is False and raw.flush(now[0] + 4) is False
    assert "waiting for the target" not in caplog.text  # 8 s since the last answer
