"""Flush before commit, and the commit error policy, with fakes in place of the clients."""

import threading
import time
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException

from mirror_maker.offsets.checkpoint import Checkpoint
from mirror_maker.offsets.committer import OffsetCommitter
from mirror_maker.errors import ClientFailed, SendFailed
from mirror_maker.records import TopicPartition
from mirror_maker.clients.retry import commit_retrying
from mirror_maker.engine.state import RunState

TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)


class FakeProducer:
    """The sink a commit flushes."""

    def __init__(self, events, flush_ok=True):
        self.events, self.flush_ok = events, flush_ok

    def needs_commit(self):
        return False

    def flush(self, deadline=None):
        self.events.append("flush")
        return self.flush_ok


class FakeConsumer:
    def __init__(self, events, errors=(), partition_errors=None):
        self.events, self.errors = events, list(errors)
        self.partition_errors = partition_errors or {}
        self.calls = 0

    def commit(self, offsets, asynchronous):
        assert asynchronous is False
        self.calls += 1
        self.events.append(("commit", sorted((tp.topic, tp.partition, tp.offset) for tp in offsets)))
        if self.errors:
            raise KafkaException(KafkaError(self.errors.pop(0)))
        return [SimpleNamespace(topic=tp.topic, partition=tp.partition, offset=tp.offset,
                                error=(KafkaError(self.partition_errors[tp.partition])
                                       if tp.partition in self.partition_errors else None))
                for tp in offsets]


def no_wait_retrying():
    """The real retry policy (what is retried, how often), without its waits."""
    return commit_retrying().copy(sleep=lambda seconds: None)


def checkpoint(events, flush_ok=True, errors=(), partition_errors=None, state=None):
    consumer = FakeConsumer(events, errors, partition_errors)
    cp = Checkpoint(FakeProducer(events, flush_ok), OffsetCommitter(consumer, no_wait_retrying),
                    state or RunState(), interval_ms=1000, clock=lambda: 0.0)
    cp.pending.update({TP0: 10, TP1: 20})
    return cp, consumer


def test_flush_happens_before_commit_and_pending_is_cleared():
    events = []
    cp, _ = checkpoint(events)
    assert cp.commit() is True
    assert events == ["flush", ("commit", [("t", 0, 10), ("t", 1, 20)])]
    assert cp.pending == {}


def test_no_commit_when_flush_did_not_complete():
    events = []
    cp, _ = checkpoint(events, flush_ok=False)
    assert cp.commit() is False
    assert events == ["flush"]
    assert cp.pending == {TP0: 10, TP1: 20}


def test_no_flush_and_no_commit_after_a_fatal_failure():
    events = []
    state = RunState()
    state.fail(SendFailed("boom"))
    cp, _ = checkpoint(events, state=state)
    assert cp.commit() is False and events == []


def test_commit_of_some_partitions_only():
    events = []
    cp, _ = checkpoint(events)
    cp.commit([TP1])
    assert events[1] == ("commit", [("t", 1, 20)])
    assert cp.pending == {TP0: 10}


def test_retriable_error_is_retried_then_succeeds(caplog):
    events = []
    cp, consumer = checkpoint(events, errors=[KafkaError.REQUEST_TIMED_OUT, KafkaError.NOT_COORDINATOR])
    assert cp.commit() is True
    assert consumer.calls == 3 and cp.pending == {}
    assert sum("Retrying" in r.getMessage() for r in caplog.records) == 2


def test_retries_are_bounded_and_keep_the_offsets(caplog):
    events = []
    cp, consumer = checkpoint(events, errors=[KafkaError.REQUEST_TIMED_OUT] * 10)
    cp.commit()
    assert consumer.calls == 5
    assert cp.pending == {TP0: 10, TP1: 20}
    assert "will try again" in caplog.text


@pytest.mark.parametrize("code", [KafkaError.ILLEGAL_GENERATION, KafkaError.UNKNOWN_MEMBER_ID,
                                  KafkaError.REBALANCE_IN_PROGRESS, KafkaError.STALE_MEMBER_EPOCH])
def test_rebalance_rejection_is_logged_with_a_hint_and_skipped(caplog, code):
    events = []
    cp, consumer = checkpoint(events, errors=[code])
    cp.commit()
    assert consumer.calls == 1
    assert "max.poll.interval.ms" in caplog.text
    assert cp.pending == {TP0: 10, TP1: 20}


def test_offsets_of_a_topic_that_disappeared_are_dropped(caplog):
    events = []
    cp, _ = checkpoint(events, partition_errors={1: KafkaError.UNKNOWN_TOPIC_OR_PART})
    cp.commit()
    assert cp.pending == {}
    assert "no longer exists" in caplog.text


def test_unexpected_commit_error_is_fatal():
    events = []
    cp, _ = checkpoint(events, errors=[KafkaError.GROUP_AUTHORIZATION_FAILED])
    with pytest.raises(ClientFailed, match="offset commit failed"):
        cp.commit()


def test_due_after_the_interval():
    now = [0.0]
    cp = Checkpoint(FakeProducer([]), OffsetCommitter(FakeConsumer([])), RunState(),
                    interval_ms=1000, clock=lambda: now[0])
    now[0] = 1.0
    assert not cp.due()   # strictly greater, as Kafka
    now[0] = 1.001
    assert cp.due()


def test_discard_lost_partitions():
    cp, _ = checkpoint([])
    cp.discard([TP0])
    assert cp.pending == {TP1: 20}


def test_nothing_pending_means_no_flush_which_would_wait_for_other_threads_records():
    events = []
    cp, _ = checkpoint(events)
    cp.pending.clear()
    assert cp.commit() is True and events == []


def test_only_partitions_the_thread_still_owns_are_committed():
    events = []
    cp = Checkpoint(FakeProducer(events), OffsetCommitter(FakeConsumer(events), no_wait_retrying),
                    RunState(), interval_ms=1000, owned={TP0}.__contains__)
    cp.pending.update({TP0: 10, TP1: 20})
    cp.commit()
    assert events == ["flush", ("commit", [("t", 0, 10)])]


def test_a_partition_revoked_and_assigned_back_during_the_flush_is_not_committed_from_before():
    """Raw mode drops a revoked partition's unacknowledged batches: the flush then returns without
    them, and the offset taken before it would pass records the target never had."""
    events = []
    cp, _ = checkpoint(events)

    class RebalancingSink(FakeProducer):
        def flush(self, deadline=None):
            cp.discard([TP0])  # revoked (or lost) while the flush served the group ...
            cp.pending[TP0] = 3  # ... assigned back, and a record handed over since
            return super().flush(deadline)

    cp._sink = RebalancingSink(events)
    assert cp.commit() is True
    assert events == ["flush", ("commit", [("t", 1, 20)])] and cp.pending == {TP0: 3}


def test_commit_retries_end_at_the_deadline():
    events = []
    cp, consumer = checkpoint(events, errors=[KafkaError.REQUEST_TIMED_OUT] * 10)
    cp.commit(deadline=time.monotonic() - 1)  # a stop whose deadline has passed: one attempt only
    assert consumer.calls == 1
    assert cp.pending == {TP0: 10, TP1: 20}


def test_the_stop_deadline_bounds_a_commit_that_was_given_none():
    events, state = [], RunState(shutdown_timeout_s=0)
    cp, consumer = checkpoint(events, errors=[KafkaError.REQUEST_TIMED_OUT] * 10, state=state)
    state.request_stop()
    cp.commit()
    assert consumer.calls == 1


def test_a_slow_commit_is_told_split_in_its_flush_and_its_commit(caplog, monkeypatch):
    from mirror_maker.offsets import checkpoint as checkpoint_module

    now = [100.0]
    monkeypatch.setattr(checkpoint_module, "time", SimpleNamespace(monotonic=lambda: now[0]))
    events = []
    cp, consumer = checkpoint(events)

    class SlowSink(FakeProducer):
        def flush(self, deadline=None):
            now[0] += 3.0  # three seconds until the target acknowledged everything
            return super().flush(deadline)

    real_commit = consumer.commit

    def slow_commit(offsets, asynchronous):
        now[0] += 0.5
        return real_commit(offsets, asynchronous)

    consumer.commit = slow_commit
    cp._sink = SlowSink(events)
    caplog.set_level("INFO", logger="mirror_maker.checkpoint")
    assert cp.commit() is True
    lines = [r.getMessage() for r in caplog.records if "took 2 s or more" in r.getMessage()]
    assert lines == [f"[{threading.current_thread().name}] 1 commit took 2 s or more since the last such line; "
                     "the slowest 3.5 s: 3.0 s waiting for the target's acknowledgements, 0.5 s committing"]


def test_slow_commits_are_summed_up_in_a_line_at_most_every_30_s(caplog):
    from mirror_maker.offsets.checkpoint import SLOW_COMMIT_LOG_S, SlowCommits

    now = [0.0]
    slow = SlowCommits(clock=lambda: now[0])
    caplog.set_level("INFO", logger="mirror_maker.checkpoint")
    slow.took(0.1, 0.2)  # fast: nothing to tell
    slow.took(2.5, 0.1)  # the first slow one is told at once
    now[0] += 10
    slow.took(0.2, 6.0)
    slow.took(1.0, 1.5)
    now[0] += SLOW_COMMIT_LOG_S
    slow.took(2.0, 0.0)
    lines = [r.getMessage().split("] ", 1)[1] for r in caplog.records]
    assert lines == [
        "1 commit took 2 s or more since the last such line; the slowest 2.6 s: 2.5 s waiting for the target's "
        "acknowledgements, 0.1 s committing",
        "3 commits took 2 s or more since the last such line; the slowest 6.2 s: 0.2 s waiting for the target's "
        "acknowledgements, 6.0 s committing"]


def test_slow_commits_held_back_are_told_at_the_next_commit_once_the_quiet_time_passed(caplog):
    from mirror_maker.offsets.checkpoint import SLOW_COMMIT_LOG_S, SlowCommits

    now = [0.0]
    slow = SlowCommits(clock=lambda: now[0])
    caplog.set_level("INFO", logger="mirror_maker.checkpoint")
    slow.took(3.0, 0.0)
    slow.took(4.0, 0.0)  # held back
    now[0] += SLOW_COMMIT_LOG_S
    slow.took(0.1, 0.1)  # fast, but the held-back one is told now, not with a slow commit hours later
    slow.took(0.1, 0.1)
    assert [r.getMessage().split("] ", 1)[1][:45] for r in caplog.records] == [
        "1 commit took 2 s or more since the last such", "1 commit took 2 s or more since the last such"]
    assert "the slowest 4.0 s" in caplog.records[-1].getMessage()


def test_the_next_commit_is_due_an_interval_after_the_last_one_ended():
    """As MirrorMaker v1 resets its timer after the flush and the commit: a commit slower than the
    interval must not make the next one due at once (one commit per batch after an outage)."""
    now = [0.0]
    events = []
    consumer = FakeConsumer(events)

    class SlowSink(FakeProducer):
        def flush(self, deadline=None):
            now[0] += 3.0  # longer than the 1 s interval
            return super().flush(deadline)

    cp = Checkpoint(SlowSink(events), OffsetCommitter(consumer, no_wait_retrying), RunState(),
                    interval_ms=1000, clock=lambda: now[0])
    cp.pending.update({TP0: 10})
    now[0] = 1.5
    assert cp.due()
    assert cp.commit() is True
    assert not cp.due()  # 3 s after it started, but it ended just now
    now[0] += 1.01
    assert cp.due()
