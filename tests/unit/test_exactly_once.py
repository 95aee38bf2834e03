"""Exactly-once commit rules, with stand-ins for the clients: what a transaction commits and
where, what aborts it, what counts as mirrored, which stream owns a partition, and when a
bounded run may call itself caught up."""

import re

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from mirror_maker.config.mirror_config import MirrorMakerConfig
from mirror_maker.engine.exactly_once import ExactlyOnceThread, TransactionalProducer, _FailureAware
from mirror_maker.engine.state import RunState
from mirror_maker.errors import ClientFailed
from mirror_maker.handlers import DefaultMessageHandler
from mirror_maker.offsets.checkpoint import Checkpoint
from mirror_maker.offsets.transactional import (TransactionAborted, TransactionalCommitter, shard_number,
                                                shard_of, shard_partitions)
from mirror_maker.ops.metrics import MirrorMetrics
from mirror_maker.records import TopicPartition

from .test_worker import Committer, Msg, Producer, TargetTopics

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
    group = "g"

    def group_metadata(self):
        return "memberless-group-metadata"


class Source:
    def __init__(self, fail=False):
        self.commits, self.fail = [], fail

    def commit(self, offsets, asynchronous):
        assert asynchronous  # best effort: never waits
        if self.fail:
            raise KafkaException(KafkaError(KafkaError._TRANSPORT))
        self.commits.append([(tp.topic, tp.partition, tp.offset) for tp in offsets])


def test_a_commit_sends_the_offsets_into_the_transaction_naming_the_writer_then_commits_and_begins_the_next():
    producer, source = TxnProducer(), Source()
    committer = TransactionalCommitter(producer, Target(), source, "g.eos.0")
    assert committer.commit({T0: 7, T1: 3}) == {T0: 7, T1: 3}
    assert producer.calls == [("send_offsets", [("t", 0, 7, "g.eos.0"), ("t", 1, 3, "g.eos.0")],
                               "memberless-group-metadata"), ("commit",), ("begin",)]
    assert source.commits == [[("t", 0, 7), ("t", 1, 3)]]  # after the transaction, for lag monitoring


def test_the_source_commit_is_best_effort():
    committer = TransactionalCommitter(TxnProducer(), Target(), Source(fail=True), "g.eos.0")
    assert committer.commit({T0: 7}) == {T0: 7}


@pytest.mark.parametrize("error", [KafkaError(KafkaError._TIMED_OUT, txn_requires_abort=True),
                                   KafkaError(KafkaError.COORDINATOR_NOT_AVAILABLE, retriable=True)])
def test_a_commit_that_fails_aborts_the_transaction(error):
    producer = TxnProducer(fail={"commit": error})
    committer = TransactionalCommitter(producer, Target(), Source(), "g.eos.0")
    with pytest.raises(TransactionAborted):
        committer.commit({T0: 7})
    assert [c[0] for c in producer.calls] == ["send_offsets", "commit", "abort"]


def test_a_fenced_producer_is_one_line_naming_its_transactional_id():
    producer = TxnProducer(fail={"send_offsets": KafkaError(KafkaError.PRODUCER_FENCED, fatal=True)})
    committer = TransactionalCommitter(producer, Target(), Source(), "g.eos.3")
    with pytest.raises(ClientFailed, match="fenced: another mirror with the same group took over "
                                           "transactional.id g.eos.3"):
        committer.commit({T0: 7})
    assert ("abort",) not in producer.calls  # a fenced producer cannot abort either


def test_a_refused_record_aborts_instead_of_committing():
    producer = TxnProducer()

    class Refused:
        failures = ["Error when sending message ...: Broker: Message size too large"]

    with pytest.raises(TransactionAborted, match="Message size too large"):
        _FailureAware(TransactionalCommitter(producer, Target(), Source(), "g.eos.0"), Refused()).commit({T0: 7})
    assert producer.calls == [("abort",)]


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


# -- caught up means committed ----------------------------------------------------------------

class Positions:
    """The consumer's position and the last fetch's high watermark, per partition."""

    def __init__(self, positions, high):
        self._positions, self._high = positions, high

    def position(self, partitions):
        return [KafkaTopicPartition(p.topic, p.partition, self._positions[p.partition]) for p in partitions]

    def get_watermark_offsets(self, tp, timeout=None, cached=False):
        return 0, self._high


def eos_thread(exit_when_caught_up=True):
    events = []
    state = RunState(shutdown_timeout_s=5)
    producer = Producer(state, events)
    config = MirrorMakerConfig(consumer={"group.id": "g", "bootstrap.servers": "h:1"},
                               producer={"bootstrap.servers": "h:2"}, include=re.compile("t"),
                               exactly_once=True, exit_when_caught_up=exit_when_caught_up)
    worker = ExactlyOnceThread(0, config, producer, DefaultMessageHandler(), None, state, None, TargetTopics(),
                               MirrorMetrics())
    worker.assigned.update([T0, T1])
    worker._checkpoint = Checkpoint(producer, Committer(events), state, 60000, owned=worker.assigned.__contains__)
    worker._consumer = Positions({0: 10, 1: 4}, 10)
    return worker


def test_a_partition_read_to_its_end_is_not_at_its_end_until_its_transaction_committed():
    worker = eos_thread()
    worker._mirror([Msg("t", 0, 9)])
    worker._consumer = Positions({0: 10, 1: 10}, 10)
    worker.update_lag()
    assert worker.at_end == {T1}  # T0's last record is in the open transaction
    assert worker._commit_now  # every partition was read to its end: commit without waiting
    worker._checkpoint.pending.clear()  # committed
    worker.update_lag()
    assert worker.at_end == {T0, T1}


def test_without_exit_when_caught_up_the_commit_interval_decides():
    worker = eos_thread(exit_when_caught_up=False)
    worker._mirror([Msg("t", 0, 9)])
    worker._consumer = Positions({0: 10, 1: 10}, 10)
    worker.update_lag()
    assert not worker._commit_now


class LastBatch(Positions):
    """Serves one batch that reads every partition to its end, then the run stops."""

    def __init__(self, events, state, batch):
        super().__init__({0: 4, 1: 4}, 10)
        self.events, self.state, self.batch = events, state, batch

    def consume(self, num_messages, timeout):
        self.events.append("consume")
        if not self.batch:
            self.state.request_stop()
            return []
        batch, self.batch = self.batch, []
        self._positions = {0: 10, 1: 10}
        return batch


class Transactions:
    failures = ()

    def serve(self):
        pass

    def transaction_ended(self, committed):
        pass


def test_a_bounded_run_commits_in_the_round_whose_short_batch_read_everything():
    """Not after the lag timer and another consume: the records are visible only once committed."""
    worker = eos_thread()
    events = worker._checkpoint._committer.events
    worker._consumer = LastBatch(events, worker._state, [Msg("t", 0, 9), Msg("t", 1, 9)])
    worker._follow_shard = lambda: None
    worker._txp = Transactions()
    worker._next_lag_update = float("inf")  # the timer would not look at the lag in this round
    worker._loop()
    commit = events.index(("commit", {T0: 10, T1: 10}))
    assert events[:commit].count("consume") == 1, events
