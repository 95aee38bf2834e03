"""Exactly-once commit rules, with stand-ins for the clients: what a transaction commits and
where, what aborts it, what a rollback goes back to, what counts as mirrored, which stream owns a
partition, and when a bounded run may call itself caught up."""

import logging
import threading
import time

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from mirror_maker.engine.exactly_once import TransactionalProducer, TransactionalSink
from mirror_maker.engine.state import RunState
from mirror_maker.errors import ClientFailed
from mirror_maker.ops.metrics import MirrorMetrics
from mirror_maker.offsets.transactional import (ProducerUnusable, TransactionAborted, TransactionalCommitter,
                                                TransactionStuck, bounded, close_unused, shard_number, shard_of,
                                                shard_partitions)
from mirror_maker.records import TopicPartition

from .stream_parts import Consumer, Msg, mirror, stream

T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)
UNREACHABLE = {"bootstrap.servers": "127.0.0.1:1", "log_level": 0, "transactional.id": "g.eos.0"}


# -- which stream owns a partition --------------------------------------------------------

def test_every_partition_has_exactly_one_shard_and_each_shard_its_share_of_every_topic():
    topics = {"orders": 6, "payments": 12, "audit": 3}
    shards = [shard_partitions(topics, n, 3) for n in range(3)]
    everything = [tp for shard in shards for tp in shard]
    assert sorted(everything) == sorted(TopicPartition(t, p) for t, n in topics.items() for p in range(n))
    for topic, count in topics.items():
        assert [sum(tp.topic == topic for tp in shard) for shard in shards] == [count // 3] * 3


def test_the_shard_of_a_partition_is_stable_and_ignores_other_topics():
    assert shard_of("orders", 4, 3) == shard_of("orders", 4, 3)
    alone = shard_partitions({"orders": 6}, 1, 3)
    assert [tp for tp in shard_partitions({"orders": 6, "new": 9}, 1, 3) if tp.topic == "orders"] == alone


def test_shard_number_reads_only_this_groups_transactional_ids():
    assert shard_number("g", "g.eos.2") == 2
    assert shard_number("g", "other.eos.2") is None
    assert shard_number("g", "g.eos.x") is None and shard_number("g", "g.eos.") is None


# -- the committer --------------------------------------------------------------------------

class TxnProducer:
    """Records the transactional calls; ``fail`` maps a call name to the KafkaError it raises."""

    def __init__(self, fail=None):
        self.calls, self.fail = [], fail or {}

    def _call(self, name, *args):
        self.calls.append((name,) + args)
        if name in self.fail:
            raise KafkaException(self.fail.pop(name))

    def send_offsets_to_transaction(self, offsets, metadata, timeout):
        self._call("send_offsets", [(tp.topic, tp.partition, tp.offset, tp.metadata) for tp in offsets], metadata)

    def commit_transaction(self, timeout):
        self._call("commit")

    def abort_transaction(self, timeout):
        self._call("abort")

    def begin_transaction(self):
        self._call("begin")


class Target:
    """The target's offsets group: offsets kept under the target topic (here the source's name)."""

    group = "g"

    def __init__(self, target_of=lambda topic: topic):
        self._target_of = target_of

    def group_metadata(self):
        return "memberless-group-metadata"

    def key(self, tp):
        return TopicPartition(self._target_of(tp.topic), tp.partition)


class Sink:
    """What the committer tells the sink, and the refusals it reads."""

    def __init__(self, refusals=(), fatal=None, fatal_when_served=None):
        self.refusals, self.ended, self.fatal = list(refusals), [], fatal
        self._fatal_when_served = fatal_when_served

    def transaction_ended(self, committed):
        self.ended.append(committed)

    def serve(self):
        """The producer's poll: a fatal error librdkafka holds surfaces here."""
        if self._fatal_when_served is not None:
            self.fatal = self._fatal_when_served


class Source:
    def __init__(self, fail=False):
        self.commits, self.fail = [], fail

    def commit(self, offsets, asynchronous):
        assert asynchronous  # best effort: never waits
        if self.fail:
            raise KafkaException(KafkaError(KafkaError._TRANSPORT))
        self.commits.append([(tp.topic, tp.partition, tp.offset) for tp in offsets])


def test_a_commit_sends_the_offsets_into_the_transaction_naming_the_writer_then_commits_and_begins_the_next():
    producer, source, sink = TxnProducer(), Source(), Sink()
    committer = TransactionalCommitter(producer, Target(), source, "g.eos.0", sink)
    assert committer.commit({T0: 7, T1: 3}) == {T0: 7, T1: 3}
    assert producer.calls == [("send_offsets", [("t", 0, 7, "g.eos.0"), ("t", 1, 3, "g.eos.0")],
                               "memberless-group-metadata"), ("commit",), ("begin",)]
    assert source.commits == [[("t", 0, 7), ("t", 1, 3)]]  # after the transaction, for lag monitoring
    assert sink.ended == [True]


def test_offsets_are_kept_under_the_target_topic_because_a_group_may_only_name_its_cluster_s_topics():
    """Kafka 4's group coordinator refuses offsets of a topic the target does not have
    (UNKNOWN_TOPIC_OR_PARTITION): with a replication policy, the source topic's name."""
    producer, source = TxnProducer(), Source()
    committer = TransactionalCommitter(producer, Target(lambda topic: f"src.{topic}"), source, "g.eos.0", Sink())
    committer.commit({T0: 7})
    assert producer.calls[0] == ("send_offsets", [("src.t", 0, 7, "g.eos.0")], "memberless-group-metadata")
    assert source.commits == [[("t", 0, 7)]]  # the source group keeps the source's names


def test_two_source_topics_going_to_one_target_topic_cannot_share_its_offsets():
    from mirror_maker.offsets.transactional import TargetOffsets

    offsets = TargetOffsets({"bootstrap.servers": "127.0.0.1:1", "log_level": 0}, "g", "c", lambda topic: "merged")
    try:
        assert offsets.key(T0) == TopicPartition("merged", 0)
        with pytest.raises(ClientFailed, match="t and u both go to merged"):
            offsets.key(TopicPartition("u", 0))
    finally:
        offsets.close()


def test_a_target_offset_that_could_not_be_read_is_never_taken_for_none():
    """librdkafka answers a partition it could not read with an error and offset -1001, as one
    with no offset: taken for none, a shard started at the source group's offset or where
    auto.offset.reset says (the end, with latest), past records never mirrored."""
    from types import SimpleNamespace

    from mirror_maker.offsets.transactional import Committed, TargetOffsets

    def answer(offset, error=None, writer=None):
        return [SimpleNamespace(topic="t", partition=0, offset=offset, error=error, metadata=writer)]

    offsets = TargetOffsets({"bootstrap.servers": "127.0.0.1:1", "log_level": 0}, "g", "c", lambda topic: topic)
    real, answers = offsets._consumer, [answer(-1001, KafkaError(KafkaError.COORDINATOR_LOAD_IN_PROGRESS)),
                                        answer(12, writer="g.eos.1"),
                                        answer(-1001, KafkaError(KafkaError.UNSTABLE_OFFSET_COMMIT))]
    offsets._consumer = SimpleNamespace(committed=lambda tps, timeout: answers.pop(0))
    try:
        assert offsets.committed([T0]) == {T0: Committed(12, "g.eos.1")}  # read again once it loaded
        with pytest.raises(KafkaException, match="UNSTABLE_OFFSET_COMMIT|unstable"):
            offsets.committed([T0])
    finally:
        offsets._consumer = real
        offsets.close()


def test_the_source_commit_is_best_effort():
    committer = TransactionalCommitter(TxnProducer(), Target(), Source(fail=True), "g.eos.0", Sink())
    assert committer.commit({T0: 7}) == {T0: 7}


def test_a_commit_that_fails_aborts_the_transaction():
    producer, sink = TxnProducer(fail={"commit": KafkaError(KafkaError._TIMED_OUT, txn_requires_abort=True)}), Sink()
    committer = TransactionalCommitter(producer, Target(), Source(), "g.eos.0", sink)
    with pytest.raises(TransactionAborted):
        committer.commit({T0: 7})
    assert [c[0] for c in producer.calls] == ["send_offsets", "commit", "abort", "begin"]
    assert sink.ended == [False]


def test_a_commit_not_confirmed_by_its_deadline_is_in_doubt_not_aborted(monkeypatch):
    """A retriable error (a timeout) leaves librdkafka committing in the background: the commit is
    resumed, and one still unconfirmed at the deadline may have gone through, so nothing aborts it;
    the stream reads back what the target holds."""
    import time

    from mirror_maker.offsets import transactional

    class Unconfirmed(TxnProducer):
        def commit_transaction(self, timeout):
            self.calls.append(("commit",))
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT, "Transaction commit timed out", retriable=True))

    monkeypatch.setattr(transactional, "COMMIT_RESUME_S", 0.01)
    producer = Unconfirmed()
    committer = TransactionalCommitter(producer, Target(), Source(), "g.eos.0", Sink())
    with pytest.raises(ProducerUnusable, match="not confirmed in time"):
        committer.commit({T0: 7}, deadline=time.monotonic() + 0.1)
    assert ("abort",) not in producer.calls


def test_a_fenced_producer_is_one_line_naming_its_transactional_id():
    producer = TxnProducer(fail={"send_offsets": KafkaError(KafkaError.PRODUCER_FENCED, fatal=True)})
    committer = TransactionalCommitter(producer, Target(), Source(), "g.eos.3", Sink())
    with pytest.raises(ClientFailed, match="fenced: another mirror with the same group took over "
                                           "transactional.id g.eos.3"):
        committer.commit({T0: 7})
    assert ("abort",) not in producer.calls  # a fenced producer cannot abort either


def test_a_refused_record_aborts_instead_of_committing():
    producer = TxnProducer()
    committer = TransactionalCommitter(producer, Target(), Source(), "g.eos.0",
                                       Sink(["Error when sending message ...: Broker: Message size too large"]))
    with pytest.raises(TransactionAborted, match="Message size too large"):
        committer.commit({T0: 7})
    assert producer.calls == [("abort",), ("begin",)]


@pytest.mark.parametrize("state, unusable", [("CompleteAbort", True), ("PrepareAbort", True), ("Empty", False),
                                             ("Ongoing", False), (None, False)])
def test_a_fence_is_the_coordinator_s_own_abort_only_if_it_shows_an_abort_as_the_last_thing(state, unusable,
                                                                                            monkeypatch):
    """The coordinator aborts a transaction open past transaction.timeout.ms (through a target
    outage) and bumps the epoch; librdkafka reports that as a fence too. Only a new owner of the
    transactional.id leaves it Empty or Ongoing: that one is a fence, and stops the run."""
    from mirror_maker.offsets import transactional
    from mirror_maker.offsets.transactional import ProducerUnusable

    monkeypatch.setattr(transactional, "DESCRIBE_RETRY_S", 0.0)
    monkeypatch.setattr(transactional, "ABORT_SETTLE_S", 0.0)
    monkeypatch.setattr(transactional, "ABORT_WAIT_S", 0.0)  # still aborting: the coordinator's own

    fenced = KafkaError(KafkaError._FENCED, "Producer attempted an operation with an old epoch", fatal=True)
    committer = TransactionalCommitter(TxnProducer(), Target(), Source(), "g.eos.0", Sink(fatal=fenced),
                                       states=lambda transactional_id: state)
    with pytest.raises(ProducerUnusable if unusable else ClientFailed) as raised:
        committer.commit({T0: 7})
    if not unusable:
        assert "fenced: another mirror with the same group took over transactional.id g.eos.0" in str(raised.value)


@pytest.mark.parametrize("looks, unusable", [
    (["CompleteAbort", "CompleteAbort", "CompleteAbort"], True),  # nobody after us: the coordinator's own
    (["PrepareAbort", "CompleteAbort", "CompleteAbort"], True),
    (["CompleteAbort", "Empty"], False),  # a new owner's start aborted us on its way: a fence
    (["PrepareAbort", "CompleteAbort", "Ongoing"], False),
    (["PrepareAbort", "PrepareAbort", "CompleteAbort", "Empty"], False),
    # The coordinator stops answering once it showed an abort (an outage): not a fence.
    (["PrepareAbort", None, "CompleteAbort", None, "CompleteAbort"], True),
    ([None, "CompleteAbort", "CompleteAbort"], True),  # loading its log after an outage, then answering
    ([None, None, "Empty"], False),
    ([None], False),  # it never answered (until ABORT_WAIT_S): a fence, as before
])
def test_an_abort_is_the_coordinator_s_own_only_while_nobody_takes_the_id_after_it(looks, unusable, monkeypatch):
    """Two mirrors that each took the other's fence for the coordinator's timeout abort started
    new producers under the id in turn, for ever (seen: epochs 216, 218, ... a second apart)."""
    from mirror_maker.offsets import transactional
    from mirror_maker.offsets.transactional import ProducerUnusable

    monkeypatch.setattr(transactional, "ABORT_SETTLE_S", 0.0)
    monkeypatch.setattr(transactional, "DESCRIBE_RETRY_S", 0.0)
    monkeypatch.setattr(transactional, "ABORT_WAIT_S", 0.2)
    # Each look asks again while the coordinator cannot answer: None is that many answers.
    answers = iter([answer for look in looks for answer in
                    ([None] * transactional.DESCRIBE_ATTEMPTS if look is None else [look])])
    fenced = KafkaError(KafkaError._FENCED, "Producer attempted an operation with an old epoch", fatal=True)
    committer = TransactionalCommitter(TxnProducer(), Target(), Source(), "g.eos.0", Sink(fatal=fenced),
                                       states=lambda transactional_id: next(answers, None))
    with pytest.raises(ProducerUnusable if unusable else ClientFailed):
        committer.commit({T0: 7})


def test_a_fatal_error_the_producer_holds_is_served_before_the_next_transaction_begins():
    """A fence that arrived during the commit: begin_transaction keeps the GIL and may never
    return on a fenced producer (librdkafka#4420), so it is not called; the fence ends the run."""
    fenced = KafkaError(KafkaError._FENCED, "Producer attempted an operation with an old epoch", fatal=True)
    producer = TxnProducer()
    committer = TransactionalCommitter(producer, Target(), Source(), "g.eos.0", Sink(fatal_when_served=fenced),
                                       states=lambda transactional_id: "Ongoing")
    with pytest.raises(ClientFailed, match="fenced"):
        committer.commit({T0: 7})
    assert [call[0] for call in producer.calls] == ["send_offsets", "commit"]


def test_a_transactional_call_that_does_not_return_in_time_makes_the_producer_unusable(monkeypatch):
    """librdkafka's send_offsets_to_transaction waited for ever on a replaced broker handle."""
    import threading

    from mirror_maker.offsets import transactional
    from mirror_maker.offsets.transactional import ProducerUnusable

    monkeypatch.setattr(transactional, "CALL_GRACE_S", 0.1)
    released = threading.Event()
    producer = TxnProducer()
    producer.commit_transaction = lambda timeout: released.wait(10)
    committer = TransactionalCommitter(producer, Target(), Source(), "g.eos.0", Sink())
    try:
        with pytest.raises(ProducerUnusable, match="commit_transaction did not return"):
            committer.commit({T0: 7}, deadline=__import__("time").monotonic() + 0.2)
    finally:
        released.set()


def test_send_offsets_that_waits_on_a_coordinator_gone_from_the_cluster_is_given_up_soon(monkeypatch):
    """librdkafka#5511: a node's controlled shutdown leaves the cached group coordinator
    decommissioned and the call waiting for ever; the stream renews its producer after
    OFFSETS_TIMEOUT_S, not after the whole transaction's timeout."""
    import threading
    import time

    from mirror_maker.offsets import transactional
    from mirror_maker.offsets.transactional import ProducerUnusable

    monkeypatch.setattr(transactional, "CALL_GRACE_S", 0.1)
    monkeypatch.setattr(transactional, "OFFSETS_TIMEOUT_S", 0.2)
    released = threading.Event()
    producer = TxnProducer()
    timeouts = []
    producer.send_offsets_to_transaction = lambda offsets, metadata, timeout: (timeouts.append(timeout),
                                                                               released.wait(10))
    committer = TransactionalCommitter(producer, Target(), Source(), "g.eos.0", Sink())
    started = time.monotonic()
    try:
        with pytest.raises(ProducerUnusable, match="send_offsets_to_transaction did not return"):
            committer.commit({T0: 7})
    finally:
        released.set()
    assert timeouts == [0.2] and time.monotonic() - started < 2


def test_each_send_offsets_timeout_doubles_the_next_bound_up_to_the_transaction_s_and_an_answer_resets_it(
        monkeypatch):
    """A target merely slow to answer must not abort every transaction for ever (a 5 s bound, then
    10 s, then the transaction's 15 s), and one answer in time brings the short bound back."""
    import threading

    from mirror_maker.offsets import transactional
    from mirror_maker.offsets.transactional import ProducerUnusable, TransactionAborted

    monkeypatch.setattr(transactional, "CALL_GRACE_S", 0.05)
    monkeypatch.setattr(transactional, "OFFSETS_TIMEOUT_S", 0.1)
    monkeypatch.setattr(transactional, "TRANSACTION_TIMEOUT_S", 0.3)
    released = threading.Event()
    timeouts, answers = [], ["hang", KafkaError(KafkaError._TIMED_OUT, "Timed out", retriable=True), "ok", "ok"]

    def send_offsets(offsets, metadata, timeout):
        timeouts.append(timeout)
        answer = answers.pop(0)
        if isinstance(answer, KafkaError):  # (a KafkaError compared with a str raises)
            raise KafkaException(answer)
        if answer == "hang":
            released.wait(5)

    producer = TxnProducer()
    producer.send_offsets_to_transaction = send_offsets
    committer = TransactionalCommitter(producer, Target(), Source(), "g.eos.0", Sink())
    try:
        with pytest.raises(ProducerUnusable):
            committer.commit({T0: 7})
        with pytest.raises(TransactionAborted):
            committer.commit({T0: 7})
        committer.commit({T0: 7})
        committer.commit({T0: 8})
    finally:
        released.set()
    assert timeouts == [0.1, 0.2, 0.3, 0.1]


def test_a_final_commit_s_transaction_commit_gets_only_what_the_offsets_left_of_the_stop_s_deadline():
    import time

    producer, waits = TxnProducer(), []
    producer.send_offsets_to_transaction = lambda offsets, metadata, timeout: time.sleep(0.4)
    producer.commit_transaction = waits.append
    committer = TransactionalCommitter(producer, Target(), Source(), "g.eos.0", Sink())
    committer.commit({T0: 7}, deadline=time.monotonic() + 1.0)
    assert len(waits) == 1 and waits[0] <= 0.65, waits


def test_an_unusable_producer_is_replaced_retrying_until_the_target_answers(monkeypatch):

    import mirror_maker.engine.exactly_once as eos
    from mirror_maker.offsets.transactional import ProducerUnusable

    monkeypatch.setattr(eos, "RENEW_RETRY_S", 0.01)

    class Old:
        failures, fatal = ["refused before"], None
        abandoned = False

        def abandon(self):
            Old.abandoned = True

        def acknowledged(self):
            return 40

    class New:
        def __init__(self):
            self.carried = None

        def carry_over(self, old):
            self.carried = old.acknowledged()

    attempts, used = [], []

    def start_new():
        attempts.append(1)
        if len(attempts) < 3:
            raise ClientFailed("cannot start its transactional producer g.eos.0: Local: Timed out")
        return New()

    sink = TransactionalSink(Old(), MirrorMetrics(), logging.getLogger("t"), RunState(), start_new, used.append)
    assert sink.rolled_back(ProducerUnusable("the coordinator aborted it")) == []  # no refusal: nothing to track
    assert Old.abandoned and len(attempts) == 3 and used == [sink.producer] and sink.producer.carried == 40


def test_a_new_producer_its_first_transaction_finds_unusable_is_replaced_again(monkeypatch):
    """Its begin failed or the coordinator aborted again: the run went on failing with a bare
    "ProducerUnusable" instead of trying another new producer."""
    import mirror_maker.engine.exactly_once as eos
    from mirror_maker.offsets.transactional import ProducerUnusable

    monkeypatch.setattr(eos, "RENEW_RETRY_S", 0.01)

    class Producer:
        failures, fatal = [], None

        def __init__(self):
            self.abandoned = False

        def abandon(self):
            self.abandoned = True

        def acknowledged(self):
            return 0

        def carry_over(self, old):
            pass

    started = []

    def start_new():
        started.append(Producer())
        return started[-1]

    def on_new(producer):
        if len(started) == 1:
            raise ProducerUnusable("begin_transaction did not return within 12 s")

    sink = TransactionalSink(Producer(), MirrorMetrics(), logging.getLogger("t"), RunState(), start_new, on_new)
    assert sink.rolled_back(ProducerUnusable("the coordinator aborted it")) == []
    assert len(started) == 2 and started[0].abandoned and sink.producer is started[1] and not started[1].abandoned


def test_a_new_producer_fenced_at_its_first_transaction_stops_the_stream_instead_of_starting_another():
    """Another live mirror took the transactional.id: starting yet another producer would fence it
    in turn, for ever."""
    class Old:
        failures, fatal = [], None

        def abandon(self):
            pass

        def acknowledged(self):
            return 0

    class New(Old):
        abandoned = False

        def carry_over(self, old):
            pass

        def abandon(self):
            New.abandoned = True

    started = []

    def start_new():
        started.append(New())
        return started[-1]

    def fenced_at_begin(producer):
        raise ClientFailed("fenced: another mirror with the same group took over transactional.id g.eos.0")

    sink = TransactionalSink(Old(), MirrorMetrics(), logging.getLogger("t"), RunState(), start_new, fenced_at_begin)
    with pytest.raises(ClientFailed, match="fenced"):
        sink.renew("the coordinator aborted it")
    assert len(started) == 1 and New.abandoned


def test_an_abort_that_timed_out_is_finished_on_its_own_producer_before_another_starts():
    """librdkafka goes on with an abort that timed out; one whose records were purged in flight
    bumps the epoch at its end, and the coordinator took that request from the old producer for
    the owner's while the new producer's transaction was open: the new one was fenced, and the
    mirror stopped as if another had taken its transactional.id over."""
    class Closable(TxnProducer):
        closed = False

        def close(self):
            self.closed = True

    timed_out = KafkaError(KafkaError._TIMED_OUT, "Transactional API operation timed out", retriable=True)
    producer = Closable(fail={"abort": timed_out})
    committer = TransactionalCommitter(producer, Target(), Source(), "g.eos.0", Sink(), wait=lambda s: False)
    with pytest.raises(ProducerUnusable) as unusable:
        committer.abort()
    assert unusable.value.settle is not None and not producer.closed
    producer.fail["abort"] = timed_out  # still away at the first resume
    unusable.value.settle()
    assert producer.calls == [("abort",)] * 3 and producer.closed  # resumed until it ended, then closed


def test_a_new_producer_starts_only_once_the_old_one_has_settled():
    order = []

    class Old:
        failures, fatal = [], None

        def abandon(self):
            order.append("abandoned")

        def acknowledged(self):
            return 0

    class New(Old):
        def carry_over(self, old):
            pass

    def start_new():
        order.append("started")
        return New()

    sink = TransactionalSink(Old(), MirrorMetrics(), logging.getLogger("t"), RunState(), start_new, lambda p: None)
    sink.rolled_back(ProducerUnusable("the transaction could not be aborted", settle=lambda: order.append("settled")))
    assert order == ["abandoned", "settled", "started"]


def test_closing_aborts_what_is_still_open_so_read_committed_readers_are_not_held():
    """A stream that fails (or stops before its final commit) left its transaction open: readers
    of the target waited transaction.timeout.ms for it."""
    producer, target = TxnProducer(), Target()
    closed = []
    target.close = lambda: closed.append(True)
    TransactionalCommitter(producer, target, Source(), "g.eos.0", Sink()).close(None)
    assert producer.calls == [("abort",)] and closed == [True]
    fenced = TxnProducer(fail={"abort": KafkaError(KafkaError.PRODUCER_FENCED, fatal=True)})
    TransactionalCommitter(fenced, target, Source(), "g.eos.0", Sink()).close(None)  # no raise: nothing to abort
    assert closed == [True, True]


# -- the stream's producer ------------------------------------------------------------------

class Delivered:
    def topic(self):
        return "t"

    def partition(self):
        return 0

    def key(self):
        return b"k"

    def value(self):
        return b"v"


def test_only_committed_transactions_count_as_mirrored_and_purged_records_do_not_block_commits():
    state = RunState()
    producer = TransactionalProducer(UNREACHABLE, state, False, False, None, MirrorMetrics())
    try:
        producer.count_produced(10)
        producer.transaction_ended(committed=True)
        producer.count_produced(5)
        producer._on_delivery(KafkaError(KafkaError._PURGE_QUEUE), Delivered())  # an aborted transaction's
        producer.transaction_ended(committed=False)
        assert producer.acknowledged() == 10
        assert producer.failures == [] and not producer._purged and not state.failed
        producer._on_delivery(KafkaError(KafkaError.INVALID_RECORD), Delivered())
        assert len(producer.failures) == 1 and producer.failures[0].startswith("Error when sending message")
        assert not state.failed  # the transaction aborts; the run goes on (or stops) from there
    finally:
        producer.close(None)


def test_a_producer_whose_start_timed_out_is_closed_so_that_it_cannot_fence_the_next(monkeypatch):
    """An init_transactions that timed out (the target away) goes on in librdkafka's background
    for as long as the handle lives: left to the garbage collector, it got through after its
    replacement's and bumped the epoch under it, and the mirror stopped as if fenced by another."""
    from types import SimpleNamespace

    from mirror_maker.engine import exactly_once

    made = []

    class Recorded(TransactionalProducer):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            made.append(self)

    monkeypatch.setattr(exactly_once, "TransactionalProducer", Recorded)
    monkeypatch.setattr(exactly_once, "INIT_TRANSACTIONS_TIMEOUT_S", 0.3)
    config = SimpleNamespace(producer={"bootstrap.servers": "127.0.0.1:1", "log_level": "0",
                                       "message.timeout.ms": "300000"},
                             exactly_once_group="g", transaction_timeout_ms=60000, max_block_ms=None)
    with pytest.raises(ClientFailed, match="cannot start its transactional producer g.eos.0"):
        exactly_once.start_producer(config, 0, RunState(), MirrorMetrics(), None)
    with pytest.raises(RuntimeError, match="closed"):  # its handle is gone, and its start with it
        made[0]._producer.poll(0)


def test_a_producer_that_a_hung_call_is_still_inside_is_closed_when_the_call_returns_not_under_it():
    class Client:
        closed = False

        def __init__(self):
            self.release = threading.Event()

        def init_transactions(self):
            self.release.wait(30)

        def close(self):
            self.closed = True

    client = Client()
    with pytest.raises(TransactionStuck):
        bounded(client.init_transactions, (), 0.1, "init_transactions")
    close_unused(client, "g.eos.0")
    assert not client.closed  # a close under the call would free what it still uses
    client.release.set()  # the call returns: its thread closes the client
    deadline = time.monotonic() + 10
    while not client.closed and time.monotonic() < deadline:
        time.sleep(0.01)
    assert client.closed


def test_a_record_produce_refuses_because_the_transaction_failed_is_sent_again_never_counted_as_refused():
    """After the target refused a record, librdkafka refuses the transaction's next records
    locally (_STATE) before that refusal is reported: tracked one by one, they were counted as
    refused and skipped for good, and the records behind a refused one were lost."""
    from mirror_maker.engine.copier import Tracker

    state = RunState()
    producer = TransactionalProducer(UNREACHABLE, state, False, False, None, MirrorMetrics())
    refused = []
    tracker = Tracker(lambda tp, offset, topic, reason: refused.append(offset))
    try:
        for code in (KafkaError._STATE, KafkaError._FATAL):
            producer.refused(KafkaException(KafkaError(code, "Erroneous state")), "t", b"v", b"k", 0, 0, None,
                             "t", 0, 101, on_delivery=tracker.callback(TopicPartition("t", 0), 101, "t"))
        assert refused == [] and not tracker.refused
        assert len(producer.failures) == 2 and "(the transaction failed)" in producer.failures[0]  # it aborts
        producer.refused(KafkaException(KafkaError(KafkaError.MSG_SIZE_TOO_LARGE, "Message size too large")),
                         "t", b"v", b"k", 0, 0, None, "t", 0, 100,
                         on_delivery=tracker.callback(TopicPartition("t", 0), 100, "t"))
        assert refused == [100]  # what the record is: refused, known by its offset
    finally:
        producer.close(None)


# -- the stream with a transaction --------------------------------------------------------------

class Transactional:
    """A committer whose commit is a transaction: it may roll back (``abort_next``)."""

    makes_visible = True

    def __init__(self, events, sink=None):
        self.events, self.abort_next, self.sink = events, None, sink

    def commit(self, offsets, deadline=None):
        if self.sink is not None and self.sink.refusals and not self.abort_next:
            self.abort_next = self.sink.refusals[0]
        if self.abort_next:
            reason, self.abort_next = self.abort_next, None
            self.events.append(("aborted", dict(offsets)))
            raise TransactionAborted(reason)
        self.events.append(("commit", dict(offsets)))
        if self.sink is not None:
            self.sink.transaction_ended(True)
        return dict(offsets)

    def close(self, deadline):
        pass


class TxnRecordingProducer:
    """The stand-in producer with what a transactional sink asks of its producer."""

    def __init__(self, inner):
        self.__dict__["_inner"] = inner
        self.__dict__["failures"] = []
        self.__dict__["fatal"] = None
        self.__dict__["ended"] = []

    def __getattr__(self, name):
        return getattr(self._inner, name)

    def __setattr__(self, name, value):
        setattr(self._inner, name, value)

    # The real lines, into ``failures``.
    transaction_failed = TransactionalProducer.transaction_failed
    _send_failed = TransactionalProducer._send_failed

    def in_transaction(self):
        return 0

    def transaction_ended(self, committed):
        self.ended.append(committed)

    def acknowledged(self):
        return 0

    def __len__(self):
        return 0


def eos_stream(exit_when_caught_up=True, abort=False, consumer=None, remote=str, **producer_kwargs):
    """A stream with exactly-once's commit rules: a transactional committer and sink."""
    from dataclasses import replace

    from .stream_parts import config

    conf = replace(config(**{"auto.offset.reset": "latest"}), exactly_once=True,
                   exit_when_caught_up=exit_when_caught_up, abort_on_send_failure=abort)
    committer = Transactional(None)
    worker, producer, events = stream(conf=conf, consumer=consumer, committer=committer, remote=remote,
                                      producer_kwargs=producer_kwargs)
    sink = TransactionalSink(TxnRecordingProducer(producer), worker._metrics, worker.log, worker._state, None, None,
                             abort)
    committer.events, committer.sink = events, sink
    worker.parts.sink = sink
    worker.parts.source._tracker = lambda: sink.tracker
    worker.checkpoint._sink = sink
    return worker, producer, events, sink


def test_a_rollback_goes_back_to_where_each_partition_started_not_to_auto_offset_reset():
    """A new mirror's first transaction aborts: a partition with no offset on the target went to
    auto.offset.reset again (the end, with latest) and everything before it was never mirrored."""
    consumer = Consumer(committed={0: 12}, watermarks=(3, 50))
    worker, producer, events, sink = eos_stream(consumer=consumer)
    worker.assigned.clear()
    worker.parts.membership._on_assign(consumer, [KafkaTopicPartition("t", 0), KafkaTopicPartition("t", 1)])
    worker.commit()  # T1's start (50) is made durable: a transaction of its own
    consumer._watermarks = (3, 80)  # more arrived meanwhile; a reset would jump to 80
    mirror(worker, [Msg("t", 0, 12), Msg("t", 1, 50), Msg("t", 1, 51)])
    worker.parts.committer.abort_next = "the transaction's commit failed: Broker: Request timed out"
    assert not worker.commit()
    assert ("seek", 0, 12) in consumer.calls and ("seek", 1, 50) in consumer.calls
    assert worker.positions == {T0: 12, T1: 50} and worker.checkpoint.pending == {}


def test_a_refused_record_with_abort_false_is_tracked_named_by_the_policy_counted_and_skipped():
    """After the rollback each record goes with its own callback; the refused one is counted and
    skipped, the rest goes to the policy's topic, bytes counted."""
    worker, producer, events, sink = eos_stream(remote=lambda topic: f"a.{topic}", reject_at=1)
    worker.checkpoint.started({T0: 0, T1: 0})
    sink.refusals.append("Broker: Message size too large")
    worker.commit()  # the transaction with the refusal rolls back; records go one by one now
    assert sink.tracking and worker._metrics.totals()["dropped"] == 0
    mirror(worker, [Msg("t", 0, 0, b"aa"), Msg("t", 0, 1, b"too large"), Msg("t", 0, 2, b"cc")])
    assert [sent[0] for sent in producer.sent] == ["a.t", "a.t"]  # the second one rejected locally, not queued
    assert sink.refusals and (T0, 1) in sink.tracker.refused
    assert worker._metrics.totals()["bytes"] == 2 + 9 + 2
    worker.commit()  # rolled back again, then the same records without the refused one
    producer.sent.clear()
    mirror(worker, [Msg("t", 0, 0, b"aa"), Msg("t", 0, 1, b"too large"), Msg("t", 0, 2, b"cc")])
    assert [sent[1] for sent in producer.sent] == [b"aa", b"cc"]
    assert worker.commit() and events[-1] == ("commit", {T0: 3})
    assert not sink.tracking and worker._metrics.totals()["filtered"] == 0


def test_a_tracked_record_failing_with_its_transaction_is_mirrored_again_not_skipped():
    """Tracking after a refusal, a record whose delivery fails because the transaction did (the
    coordinator bumped the epoch, a timeout) is no refusal: it was skipped for good with abort
    false, and the commit after it passed it."""
    worker, producer, events, sink = eos_stream()
    worker.checkpoint.started({T0: 0})
    sink.refusals.append("Broker: Message size too large")
    worker.commit()
    assert sink.tracking
    mirror(worker, [Msg("t", 0, 0, b"aa"), Msg("t", 0, 1, b"bb"), Msg("t", 0, 2, b"cc")])
    producer.callbacks[1](KafkaError(KafkaError.INVALID_PRODUCER_EPOCH, "Producer attempted an operation with an "
                                     "old epoch"), None)
    assert not sink.tracker.refused and worker._metrics.totals()["dropped"] == 0
    assert sink.refusals[0].startswith("Error when sending message from t-0 offset 1 to topic t: ")
    assert sink.refusals[0].endswith("(the transaction failed)")
    assert not worker.commit()  # it aborts, back to offset 0
    producer.sent.clear()
    mirror(worker, [Msg("t", 0, 0, b"aa"), Msg("t", 0, 1, b"bb"), Msg("t", 0, 2, b"cc")])
    assert [sent[1] for sent in producer.sent] == [b"aa", b"bb", b"cc"]
    assert worker.commit() and events[-1] == ("commit", {T0: 3})


def test_only_errors_about_the_record_make_a_tracked_record_refused():
    from mirror_maker.engine.copier import Tracker
    from mirror_maker.engine.exactly_once import failed_the_transaction

    refused, failed = [], []
    tracker = Tracker(lambda tp, offset, topic, reason: refused.append(offset), failed_the_transaction,
                      lambda tp, offset, topic, err: failed.append((tp, offset, topic, err.code())))
    transaction = (KafkaError.INVALID_PRODUCER_EPOCH, KafkaError.PRODUCER_FENCED, KafkaError._FENCED,
                   KafkaError.INVALID_TXN_STATE, KafkaError.UNKNOWN_PRODUCER_ID, KafkaError._MSG_TIMED_OUT,
                   KafkaError._FATAL, KafkaError._STATE)
    for offset, code in enumerate(transaction):
        tracker.callback(T0, offset, "t")(KafkaError(code), None)
    tracker.callback(T0, 50, "t")(KafkaError(KafkaError._PURGE_INFLIGHT), None)  # an abort's: nothing
    assert refused == [] and failed == [(T0, offset, "t", code) for offset, code in enumerate(transaction)]
    for offset, code in enumerate((KafkaError.MSG_SIZE_TOO_LARGE, KafkaError.INVALID_RECORD,
                                   KafkaError.TOPIC_AUTHORIZATION_FAILED), start=100):
        tracker.callback(T0, offset, "t")(KafkaError(code), None)
    assert refused == [100, 101, 102] and len(failed) == len(transaction)


def test_a_refused_record_with_abort_true_stops_the_run_naming_it_once_tracking_found_it():
    """As in record mode, the one line names the source record: the rollback mirrors the range
    again one record at a time, and the record refused again stops the run, nothing committed."""
    worker, producer, events, sink = eos_stream(abort=True, reject_at=1)
    worker.checkpoint.started({T0: 0})
    sink.refusals.append("Error when sending message from a source partition ...: Broker: Message size too large")
    assert not worker.commit()
    assert not worker._state.failed and sink.tracking
    mirror(worker, [Msg("t", 0, 0, b"aa"), Msg("t", 0, 1, b"too large"), Msg("t", 0, 2, b"cc")])
    assert worker._state.failed
    assert str(worker._state.failure).startswith("Error when sending message from t-0 offset 1 to topic t:")
    assert not worker.commit() and ("commit", {T0: 3}) not in events


# -- caught up means committed ----------------------------------------------------------------

def test_a_partition_read_to_its_end_is_not_at_its_end_until_its_transaction_committed():
    consumer = Consumer(watermarks=(0, 10), positions={0: 9, 1: 10})
    worker, producer, events, sink = eos_stream(consumer=consumer)
    mirror(worker, [Msg("t", 0, 9)])
    consumer.positions = {0: 10, 1: 10}
    worker.update_lag()
    assert worker.at_end == {T1}  # T0's last record is in the open transaction
    assert worker._commit_now  # every partition was read to its end: commit without waiting
    worker.commit()
    worker.update_lag()
    assert worker.at_end == {T0, T1}


def test_without_exit_when_caught_up_the_commit_interval_decides():
    consumer = Consumer(watermarks=(0, 10), positions={0: 10, 1: 10})
    worker, producer, events, sink = eos_stream(exit_when_caught_up=False, consumer=consumer)
    mirror(worker, [Msg("t", 0, 9)])
    worker.update_lag()
    assert not worker._commit_now


def test_a_bounded_run_commits_in_the_round_whose_short_batch_read_everything():
    """Not after the lag timer and another consume: the records are visible only once committed."""
    consumer = Consumer(watermarks=(0, 10), positions={0: 4, 1: 4})
    worker, producer, events, sink = eos_stream(consumer=consumer)
    rounds = []

    def consume(num_messages, timeout):
        rounds.append("consume")
        events.append("consume")
        if len(rounds) > 1:
            worker._state.request_stop()
            return []
        consumer.positions = {0: 10, 1: 10}
        return [Msg("t", 0, 9), Msg("t", 1, 9)]

    consumer.consume = consume
    worker.parts.membership.follow = lambda: True
    worker._next_lag_update = float("inf")  # the timer would not look at the lag in this round
    worker._loop()
    assert events[:3] == ["consume", "flush", ("commit", {T0: 10, T1: 10})]  # committed in the first round


def test_a_stop_ends_the_wait_for_the_coordinator_s_answer(monkeypatch):
    """Asked again 2 s apart while it cannot answer: a stop must not wait that out."""
    import time

    from mirror_maker.offsets import transactional

    monkeypatch.setattr(transactional, "DESCRIBE_RETRY_S", 60.0)
    waits = []
    fenced = KafkaError(KafkaError._FENCED, "Producer attempted an operation with an old epoch", fatal=True)
    committer = TransactionalCommitter(TxnProducer(), Target(), Source(), "g.eos.0", Sink(fatal=fenced),
                                       states=lambda transactional_id: None,
                                       wait=lambda seconds: waits.append(seconds) or True)
    started = time.monotonic()
    with pytest.raises(ClientFailed):
        committer.commit({T0: 7})
    assert time.monotonic() - started < 5 and waits[0] == 60.0  # asked once, not again after the stop


def test_a_transaction_the_coordinator_holds_in_another_state_makes_a_new_producer_not_a_stop():
    """Two target nodes of three away: librdkafka's end of a transaction the coordinator had
    aborted meanwhile failed fatally with INVALID_TXN_STATE, and the mirror exited 255."""
    from mirror_maker.offsets.transactional import ProducerUnusable

    invalid = KafkaError(KafkaError.INVALID_TXN_STATE, "Failed to end transaction: Broker: Producer attempted a "
                         "transactional operation in an invalid state", fatal=True)
    committer = TransactionalCommitter(TxnProducer(), Target(), Source(), "g.eos.0", Sink(fatal=invalid),
                                       states=lambda transactional_id: "Ongoing")
    with pytest.raises(ProducerUnusable, match="in another state"):
        committer.commit({T0: 7})


@pytest.mark.parametrize("given, expected", [({}, "20"), ({"retry.backoff.ms": "250"}, "250"), ({"retries": "3"}, None)])
def test_the_transactional_producer_retries_a_busy_coordinator_soon_unless_told_otherwise(given, expected):
    """A transaction's offsets and commit wait while the coordinator writes the step before:
    librdkafka's retry of 100 ms doubling to 1 s made them wait most of a second. A finite
    `retries` keeps librdkafka's backoff, which it would otherwise run out sooner."""
    from dataclasses import replace

    from mirror_maker.engine.exactly_once import transactional_conf

    from .stream_parts import config

    base = config()
    conf = replace(base, exactly_once=True, producer={**base.producer, "message.timeout.ms": "300000", **given})
    produced = transactional_conf(conf, 1)
    assert produced.get("retry.backoff.ms") == expected
    assert produced["transactional.id"].endswith(".eos.1")


def test_a_transactional_call_still_waiting_is_announced_once_and_its_result_kept():
    """A new producer's init_transactions can wait for the coordinator to finish an abort for tens
    of seconds after an outage: the wait is announced while it lasts."""
    announced, answer = [], threading.Event()

    def slow(waited_s):
        announced.append(waited_s)
        answer.set()  # the call answers only once the wait was announced

    assert bounded(lambda: answer.wait(30) and "started", (), 30.0, "init_transactions", 0.05, slow) == "started"
    assert announced == [0.05]
    assert bounded(lambda: "at once", (), 30.0, "init_transactions", 10.0, slow) == "at once"
    assert announced == [0.05]  # an answer in time is not announced


def test_a_transactional_call_that_does_not_return_is_stuck_after_its_announcement():
    announced, never = [], threading.Event()
    with pytest.raises(TransactionStuck, match="init_transactions did not return"):
        bounded(never.wait, (), 0.2, "init_transactions", 0.05, announced.append)
    never.set()
    assert announced == [0.05]
