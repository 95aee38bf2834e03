"""Edge paths of the one copy loop found by reviewing it against librdkafka's and Kafka's own
behaviour (issue 34): a pause that outlives a rebalance, a reset met in the middle of a batch, a
transaction whose commit librdkafka could not confirm, a reset whose start cannot be read yet,
raw mode's deferred starts and fetch errors, and the stall report between two transactions.

Each test names the behaviour of the real client it stands in for."""

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from mirror_maker.engine.positions import ResetPolicy, StartPositions
from mirror_maker.offsets.transactional import ProducerUnusable, TransactionalCommitter
from mirror_maker.records import TopicPartition

from .stream_parts import T0, T1, Consumer, Msg, config, mirror, stream
from .test_exactly_once import Sink, Source, Target, TxnProducer, eos_stream

RESET = KafkaError(KafkaError._AUTO_OFFSET_RESET, "fetch failed due to requested offset not available on the broker")


# -- a wait for the target, and a rebalance it serves ---------------------------------------------

class LibrdkafkaPauses(Consumer):
    """librdkafka keeps the application's pause flag on the partition, not on its assignment: a
    partition paused, revoked and assigned again stays paused until resumed (librdkafka #1849;
    tried on Apache Kafka 4.4 with librdkafka 2.16 and the range assignor: after three
    reassignments the paused partition was never read again). ``during_consume``: the rebalance
    callbacks the next consume call serves."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.paused, self.during_consume = set(), []

    def pause(self, partitions):
        self.paused.update(p.partition for p in partitions)

    def resume(self, partitions):
        self.paused.difference_update(p.partition for p in partitions)

    def consume(self, num_messages, timeout):
        while self.during_consume:
            self.during_consume.pop(0)()
        return super().consume(num_messages, timeout)


def test_a_partition_revoked_while_a_wait_paused_it_is_read_again_when_the_group_gives_it_back():
    """A wait for the target pauses the partitions and serves the group; the group revokes them
    then (another member joins), the wait ends before the new assignment comes, and the loop's
    own poll serves it: the partitions were never resumed, and nothing of them was mirrored again
    (their lag showed 0: the cached watermarks of a partition never fetched do not move)."""
    consumer = LibrdkafkaPauses()
    worker, _, _ = stream(consumer=consumer)
    ktps = [KafkaTopicPartition("t", 0), KafkaTopicPartition("t", 1)]
    consumer.during_consume = [lambda: worker.parts.membership._on_revoke(consumer, ktps)]
    worker.last_progress -= 60  # a long flush
    worker.keep_alive()  # inside it: pauses t-0 and t-1, then the revoke is served
    assert worker.assigned == set()
    consumer.during_consume = [lambda: worker.parts.membership._on_assign(consumer, ktps)]
    mirror(worker, [])  # the flush ended; the loop reads again and its poll serves the assignment
    assert worker.assigned == {T0, T1}
    assert consumer.paused == set(), "the partitions given back stay paused in librdkafka: never read again"


class Topics:
    """The runner's topic subscription, changed by the test."""

    def __init__(self, topics):
        self.version, self.topics = 0, list(topics)

    def current(self):
        return self.version, list(self.topics)

    def change(self, topics):
        self.version, self.topics = self.version + 1, list(topics)


def test_a_stream_whose_topics_are_all_gone_commits_nothing_for_them_once_they_come_back():
    """librdkafka serves the revoke of an unsubscribe at the next consume call; the loop made none
    while nothing matched (follow() False), so the partitions stayed assigned with their pending
    offsets, and once the topic was created again the stale revoke (or the next commit) committed
    the old topic's offset to the new one: its first records were never mirrored."""
    consumer = LibrdkafkaPauses()
    worker, _, events = stream(assigned=(T0,), consumer=consumer, conf=config(**{"auto.offset.reset": "earliest"}))
    membership, topics = worker.parts.membership, Topics(["t"])
    membership._subscription = topics
    ktp = [KafkaTopicPartition("t", 0)]
    consumer.unsubscribe = lambda: consumer.during_consume.append(lambda: membership._on_revoke(consumer, ktp))
    assert membership.follow()
    worker.checkpoint.pending[T0] = 5000  # mirrored up to 4999, not committed yet
    topics.change([])  # t deleted on the source
    assert not membership.follow()
    topics.change(["t"])  # and created again, empty
    assert membership.follow()
    since = len(events)
    consumer.during_consume.append(lambda: membership._on_assign(consumer, ktp))
    mirror(worker, [])
    worker.commit()
    assert ("commit", {T0: 5000}) not in events[since:], "the deleted topic's offset committed to the new one"


# -- a reset met in the middle of a batch ------------------------------------------------------------

def test_records_before_a_reset_in_the_same_batch_do_not_take_the_partition_back_to_the_lost_offset(caplog):
    """librdkafka queues the out-of-range error behind the records of the fetch before it, so one
    consume call returns both. The records' run was recorded after the reset: the pending offset
    and the position went back to the offset that is out of range, which was committed, the lag
    counted the deleted records again, and a restart met the same reset (and counted the loss) again."""
    consumer = Consumer(watermarks=(1800, 2000))
    worker, producer, events = stream(assigned=(T0,), conf=config(**{"auto.offset.reset": "earliest"}),
                                      consumer=consumer)
    worker.positions[T0] = 98
    mirror(worker, [Msg("t", 0, 98), Msg("t", 0, 99), Msg("t", 0, 100, error=RESET)])
    assert len(producer.sent) == 2  # the two records that were there are mirrored
    assert worker.positions[T0] == 1800 and worker.checkpoint.pending == {T0: 1800}
    worker.update_lag()
    assert worker._metrics.totals()["lag"] == 200


# -- a reset whose start cannot be read now ------------------------------------------------------------

def test_a_reset_whose_start_cannot_be_read_now_is_asked_for_again():
    """A partition assigned before its committed offset could be read starts at librdkafka's
    INVALID offset; librdkafka then finds none and, with auto.offset.reset=error, reports it and
    stops fetching the partition (fetch state NONE: it is not reported again, and only a new
    assignment starts it). When the stream cannot resolve it either (the coordinator or the
    leader away for a moment), nothing ever asked again: the partition sat unread, without lag."""
    consumer = Consumer(watermarks=(0, 50))
    worker, _, _ = stream(consumer=consumer)
    worker.positions.clear()  # assigned at INVALID: resolved by librdkafka at the first fetch

    def unreadable(tps):
        raise KafkaException(KafkaError(KafkaError.COORDINATOR_NOT_AVAILABLE, retriable=True))

    worker.parts.starts._committed = unreadable
    mirror(worker, [Msg("t", 0, -1001, error=RESET)])
    assert consumer.assigned_with is not None and (0, -1001) in consumer.assigned_with[1], \
        "t-0 is left in librdkafka's fetch state NONE: never fetched again"


# -- exactly-once: a commit librdkafka could not confirm -------------------------------------------------

class ResumableCommit(TxnProducer):
    """librdkafka's commit_transaction: a timeout is retriable and "the commit continues in the
    background"; calling commit_transaction again resumes it, and abort_transaction meanwhile is
    refused (_CONFLICT: "Conflicting commit_transaction API call is already in progress")."""

    def __init__(self):
        super().__init__()
        self.committing = False

    def commit_transaction(self, timeout):
        self.calls.append(("commit",))
        if not self.committing:
            self.committing = True
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "Transaction commit timed out", retriable=True))
        self.committing = False

    def abort_transaction(self, timeout):
        self.calls.append(("abort",))
        if self.committing:
            raise KafkaException(KafkaError(KafkaError._CONFLICT, "Conflicting commit_transaction API call is "
                                                                  "already in progress", retriable=True))


def test_a_committed_offset_the_group_could_not_read_is_never_taken_for_no_offset(caplog):
    """librdkafka's committed() answers a partition it could not read (UNSTABLE_OFFSET_COMMIT
    while a transactional commit is pending, a refused topic) with an error and offset -1001,
    which read as "no offset" put the partition at the end under auto.offset.reset=latest."""
    from types import SimpleNamespace

    from mirror_maker.clients.retry import commit_retrying
    from mirror_maker.engine.positions import committed_in_group

    unstable = SimpleNamespace(topic="t", partition=0, offset=-1001,
                               error=KafkaError(KafkaError.UNSTABLE_OFFSET_COMMIT))
    consumer = SimpleNamespace(committed=lambda tps, timeout: [unstable])
    starts = StartPositions(ResetPolicy("latest"), committed_in_group(consumer, commit_retrying), lambda tp: (0, 100),
                            False, True)
    assert starts.resolve([TopicPartition("t", 0)]) == ({}, set())  # read again at the first fetch
    assert "Cannot read committed offsets" in caplog.text


def test_a_commit_that_timed_out_is_resumed_not_aborted():
    """The target was slow (an outage's end): the commit goes on in the background. Aborting it
    is refused, so the producer was thrown away as unusable, while the commit went through."""
    producer = ResumableCommit()
    committer = TransactionalCommitter(producer, Target(), Source(), "g.eos.0", Sink())
    assert committer.commit({T0: 7}) == {T0: 7}
    assert ("abort",) not in producer.calls


class InDoubt:
    """A commit that ended without an answer (commit_transaction did not return in time, or its
    timeout made the producer unusable): the coordinator completed it meanwhile."""

    makes_visible = True

    def __init__(self, target_holds):
        self.target_holds = target_holds

    def commit(self, offsets, deadline=None):
        self.target_holds.update(offsets)
        raise ProducerUnusable("commit_transaction did not return within 62 s (the target unreachable?)")

    def close(self, deadline):
        pass


def _begin_fails_after_the_commit(target_holds):
    """The real committer: the transaction commits, then the next one cannot begin."""
    producer = TxnProducer(fail={"begin": KafkaError(KafkaError._STATE, "Operation not valid in state Ready")})
    committer = TransactionalCommitter(producer, Target(), Source(), "g.eos.0", Sink())
    commit = committer.commit

    def committed(offsets, deadline=None):
        try:
            return commit(offsets, deadline)
        finally:
            if ("commit",) in producer.calls:
                target_holds.update(offsets)

    committer.commit = committed
    return committer


@pytest.mark.parametrize("committer", [InDoubt, _begin_fails_after_the_commit])
def test_a_producer_replaced_after_a_commit_goes_on_from_what_the_target_holds(committer):
    """The stream rewound to the offsets it had last seen committed, not to what the target holds:
    the transaction that did commit was mirrored again in the next one, twice on the target."""
    consumer = Consumer()
    worker, producer, events, sink = eos_stream(consumer=consumer)
    target_holds = {T0: 0, T1: 0}
    worker.parts.starts = StartPositions(ResetPolicy("latest"), lambda tps: {tp: target_holds[tp] for tp in tps},
                                         lambda tp: (0, 50), False, deferrable=False)
    worker.checkpoint.started(dict(target_holds))
    worker.checkpoint._committer = worker.parts.committer = committer(target_holds)
    sink.renew = lambda reason, settle=None: None  # a new producer under the same transactional.id
    mirror(worker, [Msg("t", 0, 0), Msg("t", 0, 1), Msg("t", 0, 2)])
    assert not worker.commit()
    assert target_holds == {T0: 3, T1: 0}  # committed on the target
    assert worker.positions[T0] == 3 and ("seek", 0, 0) not in consumer.calls, \
        "offsets 0..2 are mirrored again although their transaction committed"


def test_a_fence_is_not_concluded_while_the_coordinator_cannot_say_whose_it_was(monkeypatch):
    """After an outage the target's transaction coordinator is loading its log for a while
    (DescribeTransactions answers COORDINATOR_LOAD_IN_PROGRESS, which kafka-python raises): the
    coordinator's own abort of the transaction that outlived the outage was taken for a fence by
    another mirror, and the run stopped with 255 and a false reason (issue 40's second run)."""
    import mirror_maker.offsets.transactional as transactional

    monkeypatch.setattr(transactional, "DESCRIBE_RETRY_S", 0.0, raising=False)
    monkeypatch.setattr(transactional, "ABORT_SETTLE_S", 0.0)
    # Not known yet, twice; then the coordinator answers, and again a moment later: nobody after us.
    answers = [None, None, "CompleteAbort", "CompleteAbort"]
    fenced = KafkaError(KafkaError._FENCED, "Producer attempted an operation with an old epoch", fatal=True)
    committer = TransactionalCommitter(TxnProducer(), Target(), Source(), "g.eos.0", Sink(fatal=fenced),
                                       states=lambda transactional_id: answers.pop(0) if answers else None)
    with pytest.raises(ProducerUnusable):
        committer.commit({T0: 7})


def test_an_offset_read_at_the_start_is_refreshed_at_the_first_commit_not_a_day_later():
    """Exactly-once keeps its offsets in a group without members, where Kafka expires each one
    offsets.retention.minutes (7 days) after its commit. The refresh clock started at the
    partition's assignment: an idle partition's offset committed 6.5 days before a restart
    expired half a day later, a day before its refresh, and a restart in between found none."""
    worker, _, events = stream(assigned=(T0,))
    checkpoint = worker.checkpoint
    now = [1000.0]
    checkpoint._clock = lambda: now[0]
    checkpoint.started({T0: 42})  # read from the store: when it was committed is not known
    now[0] += 61
    assert worker.commit() and ("commit", {T0: 42}) in events


# -- the stall report --------------------------------------------------------------------------------

def test_an_exactly_once_mirror_between_two_commits_is_not_reported_stalled():
    """Exactly-once counts a record as mirrored when its transaction commits, once per
    --offset.commit.interval.ms (60 s by default), and what the open transaction holds is lag:
    with records flowing and the target acknowledging them, the status line said STALLED, the
    stalled-seconds metric rose and /ready answered 503 for 45 s of every minute."""
    from mirror_maker.ops.metrics import MirrorMetrics
    from mirror_maker.ops.status import StatusReporter, snapshot

    metrics = MirrorMetrics()
    committed = {"records": 0}
    now = [0.0]
    metrics.acknowledged = lambda: committed["records"]
    metrics.delivered = lambda: int(now[0]) * 1000 - 20 if now[0] < 120 else 119000 - 20
    metrics.queue_depth = lambda: 20  # in flight to the target, acknowledged as they go
    reporter = StatusReporter(lambda: snapshot(metrics, []), 10.0, clock=lambda: now[0])
    stalled = []
    for second in range(1, 150):
        now[0] = float(second)
        metrics.consumed(T0, 1000, 1000, 0.0, 0.0, 0.0, 0)
        metrics.set_lag(T0, 1000 * (second % 60) + 20)  # read since the last commit
        if second % 60 == 0:  # the transaction commits
            committed["records"] += 60000
            metrics.committed(0.01)
        reporter.tick()
        if reporter.stalled_s:
            stalled.append(second)
    assert stalled[0] == 135, "a target that stops acknowledging (at 120 s) is a stall 15 s later"


# -- raw mode -----------------------------------------------------------------------------------------

def test_raw_mode_makes_a_deferred_start_at_the_end_durable_at_once():
    """A partition whose start could not be read at its assignment is resolved later by the raw
    source: a start at the end (latest) was neither pending nor committed, so a restart before
    its first record resolved it again, past whatever arrived meanwhile."""
    from .test_raw_record_path import TP, stream as raw_stream

    raw, _source, _producer = raw_stream([0])
    worker = raw._stream
    worker.parts.starts = StartPositions(ResetPolicy("latest"), lambda tps: {}, lambda tp: (0, 40), False, True)
    raw.assigned({}, [TP])  # the committed offset could not be read at the assignment
    raw._resolve_starts()
    assert raw._fetcher.positions[TP] == 40
    assert worker.checkpoint.pending.get(TP) == 40 and worker._commit_now
    assert worker.checkpoint.committed.get(TP) == 40  # where an idle partition's refresh commits


class ResettingConsumer:
    """The raw test's consumer, whose first consume also returns librdkafka's reset report for
    another partition (one assigned at INVALID: librdkafka found no committed offset for it)."""

    def __init__(self, inner, other):
        self._inner, self._other, self.reported = inner, other, False
        # The membership's (eager) restart of a partition assigns the consumer again.
        inner.assign = lambda partitions: inner.calls.append(("assign", [(p.partition, p.offset) for p in partitions]))

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def consume(self, num_messages, timeout):
        messages = self._inner.consume(num_messages, timeout)
        if not self.reported:
            self.reported = True
            messages = [Msg(self._other.topic, self._other.partition, -1001, error=RESET)] + messages
        return messages


def test_raw_mode_s_record_path_leaves_other_partitions_resets_to_the_raw_fetcher():
    """The raw path reads every partition but the record path's itself; the consumer's reports
    for the others are stale. The group's serving drops them, but the record path acted on one:
    the other partition was resolved again (latest) and the raw fetcher jumped there, past what
    it had not mirrored yet."""
    from .test_raw_batches import batch
    from .test_raw_record_path import stream as raw_stream

    other = TopicPartition("src", 1)
    raw, source, producer = raw_stream([0, 3])
    worker = raw._stream
    worker.parts.starts = StartPositions(ResetPolicy("latest"), lambda tps: {}, lambda tp: (0, 900), False, True)
    worker.assigned.add(other)
    raw._fetcher.assign(other, 500)
    worker.positions[other] = 500
    raw._consumer = ResettingConsumer(raw._consumer, other)
    raw._fetcher.fetch(0)
    source.answer(0, batch(0, 1, last_delta=2) + batch(3, 1, last_delta=1), high=5)
    raw._hand_over()  # the range 0..4 through the record path
    assert [value for _t, value, *_rest in producer.sent] == [b"v0", b"v3"]
    assert raw._fetcher.positions[other] == 500 and worker.checkpoint.pending.get(other) is None, \
        "src-1 jumped from 500 to the end: 500..899 never mirrored"


def test_raw_mode_s_record_path_goes_on_from_the_reset_not_from_the_range_again(caplog):
    """A range whose records are gone (retention) is reset by the stream; the record path then
    put the raw fetcher back on the range's first offset, so the reset came again from the raw
    fetcher, with a second WARN counting the same lost records."""
    from .test_raw_batches import batch
    from .test_raw_record_path import TP, stream as raw_stream

    raw, source, producer = raw_stream([950])
    worker = raw._stream
    worker.parts.starts = StartPositions(ResetPolicy("earliest"), lambda tps: {}, lambda tp: (300, 900), False, True)
    raw._consumer = ResettingConsumer(raw._consumer, TP)
    raw._fetcher.fetch(0)
    source.answer(0, batch(0, 1, last_delta=2), high=900)  # a range 0..2, deleted before it is read
    raw._hand_over()
    assert worker.positions[TP] == 300 and worker.checkpoint.pending[TP] == 300
    assert raw._fetcher.positions[TP] == 300, "the raw fetcher asks for offset 0 again: out of range again"


def test_a_raw_fetch_refused_for_authorization_fails_the_run_as_record_mode_does():
    """Record mode fails with one line naming the refused topic; raw mode logged a WARN at every
    fetch answer ("will try again"), as fast as the broker refused, and never stopped."""
    from .test_raw_fetcher import TP as SRC, fetcher

    raw, source = fetcher()
    raw.fetch(0)
    source.answer(0, error=29)  # TOPIC_AUTHORIZATION_FAILED
    assert raw._state.failed and SRC.topic in str(raw._state.failure)
