"""Target topic creation (the source's partition count, once, a clear error when refused) and
the topics' max.message.bytes, with a stand-in AdminClient; test_security.py refuses a creation
with a real ACL on Apache Kafka."""

from concurrent.futures import Future
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, KafkaException

from mirror_maker.clients import admin as admin_module
from mirror_maker.clients.admin import list_topic_partitions
from mirror_maker.clients.target_topics import TargetTopics
from mirror_maker.errors import ClientFailed


class FakeAdmin:
    def __init__(self, topics, create_error=None, limits=None):
        self.topics = dict(topics)
        self.create_error = create_error
        self.limits = limits or {}
        self.created = []
        self.unreachable = False

    def list_topics(self, topic=None, timeout=None):
        if self.unreachable:
            raise KafkaException(KafkaError(KafkaError._TRANSPORT))
        return SimpleNamespace(topics={
            name: SimpleNamespace(error=None, partitions=dict.fromkeys(range(n)))
            for name, n in self.topics.items()})

    def create_topics(self, new_topics, operation_timeout=None, request_timeout=None):
        futures = {}
        for new in new_topics:
            future = Future()
            if self.create_error is not None:
                future.set_exception(KafkaException(KafkaError(self.create_error)))
            else:
                self.created.append((new.topic, new.num_partitions))
                self.topics[new.topic] = new.num_partitions
                future.set_result(None)
            futures[new.topic] = future
        return futures

    def create_partitions(self, new_partitions, request_timeout=None):
        futures = {}
        for new in new_partitions:
            future = Future()
            if self.create_error is not None:
                future.set_exception(KafkaException(KafkaError(self.create_error)))
            else:
                self.topics[new.topic] = max(self.topics[new.topic], new.new_total_count)
                future.set_result(None)
            futures[new.topic] = future
        return futures

    def describe_configs(self, resources, request_timeout=None):
        futures = {}
        for resource in resources:
            future = Future()
            limit = self.limits.get(resource.name)
            future.set_result({} if limit is None else
                              {"max.message.bytes": SimpleNamespace(value=str(limit))})
            futures[resource] = future
        return futures


def test_missing_target_topic_gets_the_source_partition_count_once():
    source, target = FakeAdmin({"orders": 12}), FakeAdmin({})
    topics = TargetTopics(source, target)
    topics.ensure({"orders": ["orders"]})
    topics.ensure({"orders": ["orders"]})
    assert target.created == [("orders", 12)]


def test_renamed_target_topic():
    source, target = FakeAdmin({"orders": 3}), FakeAdmin({})
    TargetTopics(source, target).ensure({"orders": ["dc1.orders"]})
    assert target.created == [("dc1.orders", 3)]


def test_existing_topic_is_left_alone():
    source, target = FakeAdmin({"orders": 3}), FakeAdmin({"orders": 1})
    TargetTopics(source, target).ensure({"orders": ["orders"]})
    assert target.created == []


def test_topic_that_cannot_be_created_is_a_clear_fatal_error():
    source = FakeAdmin({"orders": 3})
    target = FakeAdmin({}, create_error=KafkaError.TOPIC_AUTHORIZATION_FAILED)
    with pytest.raises(ClientFailed) as info:
        TargetTopics(source, target).ensure({"orders": ["orders"]})
    assert str(info.value).startswith("target topic orders is missing and cannot be created: ")


def test_already_exists_race_is_fine():
    source = FakeAdmin({"orders": 3})
    target = FakeAdmin({}, create_error=KafkaError.TOPIC_ALREADY_EXISTS)
    TargetTopics(source, target).ensure({"orders": ["orders"]})


def test_unreachable_target_is_checked_again_later_not_fatal(caplog):
    source, target = FakeAdmin({"orders": 4}), FakeAdmin({})
    target.unreachable = True
    topics = TargetTopics(source, target)
    topics.ensure({"orders": ["orders"]})
    assert target.created == [] and "will try again" in caplog.text
    topics.retry_pending()          # still away: still pending, no error
    target.unreachable = False
    topics.retry_pending()
    assert target.created == [("orders", 4)]
    topics.retry_pending()
    assert target.created == [("orders", 4)]


def test_a_target_topic_taking_smaller_batches_than_the_producer_makes_gets_a_warning(caplog):
    source, target = FakeAdmin({"orders": 1, "small": 1}), FakeAdmin({"orders": 1, "small": 1},
                                                                     limits={"orders": 2000000, "small": 10000})
    topics = TargetTopics(source, target, batch_bytes=1000000)
    topics.ensure({"orders": ["orders"], "small": ["small"]})
    assert topics.max_message_bytes == {"orders": 2000000, "small": 10000}
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warnings) == 1 and "small" in warnings[0] and "set batch.size to at most 10000" in warnings[0]


class Run:
    """The run's state as a metadata wait sees it: a stop after ``stop_after`` waits; waits are
    recorded, not slept."""

    def __init__(self, stop_after=None):
        self.stopping, self.waits, self.stop_after = False, [], stop_after

    def wait(self, timeout_s):
        self.waits.append(round(timeout_s, 2))
        if self.stop_after is not None and len(self.waits) >= self.stop_after:
            self.stopping = True
        return self.stopping


class AwayAdmin(FakeAdmin):
    """A cluster that is away for the first ``away`` requests: each fails at once, its timeout kept."""

    def __init__(self, topics, away):
        super().__init__(topics)
        self.away, self.timeouts = away, []

    def list_topics(self, topic=None, timeout=None):
        self.timeouts.append(round(timeout, 2))
        if len(self.timeouts) <= self.away:
            raise KafkaException(KafkaError(KafkaError._TRANSPORT))
        return super().list_topics(topic, timeout)


def test_a_metadata_wait_a_stop_may_end_asks_in_slices_that_grow_to_a_second():
    """librdkafka's list_topics cannot be interrupted: short slices let a stop end the wait, and
    slices that grow let a distant cluster's answer come in one."""
    admin = AwayAdmin({"orders": 3}, away=4)
    assert list_topic_partitions(admin, state=Run()) == {"orders": 3}
    assert admin.timeouts == [0.25, 0.5, 1.0, 1.0, 1.0]


def test_a_stop_ends_a_metadata_wait_with_the_last_error_and_no_warning(caplog, monkeypatch):
    monkeypatch.setattr(admin_module, "time", SimpleNamespace(monotonic=lambda: 0.0))  # waits exact on a slow machine
    run = Run(stop_after=2)
    target = AwayAdmin({}, away=100)
    with pytest.raises(KafkaException):
        list_topic_partitions(target, state=run)
    assert target.timeouts == [0.25, 0.5, 1.0] and run.waits == [0.25, 0.5]  # the request under way, then out
    topics = TargetTopics(FakeAdmin({"orders": 3}), AwayAdmin({}, away=100), state=Run(stop_after=1))
    topics.ensure({"orders": ["orders"]})
    assert "Cannot check the target topics" not in caplog.text  # a stop, not a retry to announce


class HeldAdmin(AwayAdmin):
    """A cluster that is away holds each request for its whole timeout, on the metadata wait's
    clock (``admin_module.time``, replaced by ``held``)."""

    def __init__(self, topics, away, clock):
        super().__init__(topics, away)
        self.clock = clock

    def list_topics(self, topic=None, timeout=None):
        self.clock[0] += timeout
        return super().list_topics(topic, timeout)


def held(monkeypatch, topics, away):
    """A HeldAdmin and the fake clock the metadata wait reads (seconds, from 0)."""
    clock = [0.0]
    monkeypatch.setattr(admin_module, "time", SimpleNamespace(monotonic=lambda: clock[0]))
    return HeldAdmin(topics, away, clock), clock


def test_a_metadata_wait_gives_up_at_its_timeout(monkeypatch):
    admin, clock = held(monkeypatch, {}, away=1000)
    with pytest.raises(KafkaException):
        list_topic_partitions(admin, timeout_s=3.0, state=Run())
    assert admin.timeouts == [0.25, 0.5, 1.0, 1.0, 0.25] and clock[0] == 3.0


class HoldingAdmin(FakeAdmin):
    """A target that holds CreateTopics (as Kafka does for its operation timeout while the
    controller is busy): its futures are answered only by ``answer()``."""

    def __init__(self, topics):
        super().__init__(topics)
        self.held = {}

    def create_topics(self, new_topics, operation_timeout=None, request_timeout=None):
        self.held = {new.topic: Future() for new in new_topics}
        return dict(self.held)

    def answer(self):
        for name, future in self.held.items():
            self.topics[name] = 1
            future.set_result(None)


def test_a_stop_ends_the_wait_for_a_held_topic_creation_and_the_topic_stays_pending(caplog):
    import threading

    from mirror_maker.engine.state import RunState

    state, target = RunState(), HoldingAdmin({})
    topics = TargetTopics(FakeAdmin({"orders": 3}), target, state=state)
    threading.Timer(0.3, state.request_stop).start()
    waiting = threading.Thread(target=topics.ensure, args=({"orders": ["orders"]},))
    waiting.start()
    waiting.join(1.0)  # the stop's slice, not the request's 30 s (nothing ever answers it)
    assert not waiting.is_alive(), "the stop did not end the wait"
    assert topics._pending == {("orders", "orders")}  # checked again if the run went on
    assert "Cannot check the target topics" not in caplog.text  # a stop, not a retry to announce


def test_a_held_topic_creation_is_waited_for_until_it_is_answered():
    import threading

    from mirror_maker.engine.state import RunState

    target = HoldingAdmin({})
    topics = TargetTopics(FakeAdmin({"orders": 3}), target, state=RunState())
    threading.Timer(0.6, target.answer).start()  # after two of the stop's slices
    topics.ensure({"orders": ["orders"]})
    assert topics._pending == set() and target.topics == {"orders": 1}


def test_a_short_target_topic_grows_before_a_partition_kept_record_goes_there_or_is_one_clear_line(caplog):
    """A source topic that gained a partition: where records keep their partition number, the
    target topic grows to the source's count when the mirror keeps partitions in line (MirrorMaker
    2's dedicated mode, --refresh.topics.enabled), else one line saying what to do; never a send
    to a partition the target lacks."""
    source, target = FakeAdmin({"orders": 4}), FakeAdmin({"A.orders": 3})
    topics = TargetTopics(source, target)
    topics.require_partitions({"orders": ["A.orders"]}, grow=True, why="the message handler")
    assert target.topics["A.orders"] == 4
    assert "Target topic A.orders grew from 3 to 4 partitions (as its source topic)" in caplog.text
    target.topics["A.orders"] = 3
    with pytest.raises(ClientFailed, match="the message handler keeps partition numbers: target topic A.orders "
                                           "has 3 partitions, fewer than the 4 of source topic orders; add "
                                           "partitions to the target topic"):
        topics.require_partitions({"orders": ["A.orders"]}, grow=False, why="the message handler")
    assert target.topics["A.orders"] == 3
    target.create_error = KafkaError.TOPIC_AUTHORIZATION_FAILED  # no ALTER on the target topic
    with pytest.raises(ClientFailed, match="--use.raw.bytes keeps partition numbers, and target topic A.orders "
                                           "cannot grow to the 4 partitions of source topic orders: "):
        topics.require_partitions({"orders": ["A.orders"]}, grow=True, why="--use.raw.bytes")
