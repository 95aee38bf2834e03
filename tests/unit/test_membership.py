"""Who owns which partitions: the group's close (the last revoke served before close, so that
close has nothing left to revoke), a restart after a reset, and exactly-once's static shards."""

import time

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from mirror_maker.engine.membership import ShardMembership
from mirror_maker.engine.state import RunState
from mirror_maker.offsets.transactional import shard_partitions

from .stream_parts import T0, T1, Consumer, config, stream


class ClosingConsumer:
    """The group side of a consumer at a stop, as librdkafka behaves: ``unsubscribe`` queues the
    revoke of what is assigned (unless ``revokes`` is False: it never comes), ``consume`` serves
    what is queued through the stream's callback, and ``close`` records what it still had to
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
            self.worker.parts.membership._on_revoke(self, self.queued.pop(0))
        return []

    def close(self):
        self.events.append(("close", sorted(self.worker.assigned)))


def closing(shutdown_timeout_s=5.0, subscribed=True, conf=None, **consumer):
    worker, _, events = stream(conf=conf)
    worker._state = RunState(shutdown_timeout_s=shutdown_timeout_s)
    worker.checkpoint._state = worker._state
    membership = worker.parts.membership
    membership._consumer = ClosingConsumer(worker, events, **consumer)
    membership._subscribed = subscribed
    worker.checkpoint.pending.update({T0: 7, T1: 10})
    worker._state.request_stop()
    return worker, events


def test_a_stop_serves_the_final_revoke_from_consume_so_close_has_nothing_left_to_revoke():
    worker, events = closing()
    worker.parts.membership.close()
    assert events == ["unsubscribe", "consume", "flush", ("commit", {T0: 7, T1: 10}), ("revoked", [T0, T1]),
                      ("close", [])]


def test_a_revoke_that_does_not_come_is_waited_for_until_the_stop_s_deadline_then_close_revokes():
    worker, events = closing(shutdown_timeout_s=0.2, revokes=False)
    worker.parts.membership.close()
    assert time.monotonic() >= worker._state.deadline  # waited for it until then, no longer (the loop's bound)
    assert events[0] == "unsubscribe" and events.count("consume") > 1
    assert events[-1] == ("close", [T0, T1])


@pytest.mark.parametrize("consumer", [{"subscribed": False}, {"unsubscribe_fails": True},
                                      {"conf": config(**{"group.instance.id": "mm-1"})}],
                         ids=["never subscribed", "unsubscribe fails", "static member: close does not leave"])
def test_a_consumer_without_a_revoke_to_serve_first_is_closed_at_once(consumer):
    worker, events = closing(**consumer)
    worker.parts.membership.close()
    assert events[-1] == ("close", [T0, T1]) and "consume" not in events
    assert ("unsubscribe" in events) == bool(consumer.get("unsubscribe_fails"))


def test_incremental_rebalance_is_read_from_the_settings_not_a_substring():
    assert not config(**{"partition.assignment.strategy": "range"}).incremental_rebalance
    assert not config(**{"partition.assignment.strategy": "roundrobin,range"}).incremental_rebalance
    assert config(**{"partition.assignment.strategy": "cooperative-sticky"}).incremental_rebalance
    assert config(**{"group.protocol": "CONSUMER"}).incremental_rebalance
    assert not config(**{"group.protocol": "classic"}).incremental_rebalance


def test_a_restart_with_a_cooperative_protocol_moves_only_that_partition():
    consumer = Consumer()
    worker, _, _ = stream(conf=config(**{"partition.assignment.strategy": "cooperative-sticky"}), consumer=consumer)
    worker.parts.membership.restart({T1: 77})
    assert consumer.calls == [("incremental_unassign", [1])]
    assert consumer.assigned_with == ("incremental_assign", [(1, 77)])


class Shards:
    """The matching topics' partitions, as the subscription gives them."""

    def __init__(self, partitions):
        self.version, self._partitions = 1, partitions

    def partitions(self):
        return self.version, dict(self._partitions)


def test_a_shard_takes_its_partitions_as_topics_come_and_go_committing_before_it_lets_one_go():
    consumer = Consumer(committed={}, watermarks=(0, 0))
    worker, _, events = stream(assigned=(), consumer=consumer, conf=config(**{"auto.offset.reset": "earliest"}))
    shards = Shards({"t": 4})
    membership = ShardMembership(worker, consumer, shards, 2)
    mine = set(shard_partitions({"t": 4}, 0, 2))
    assert membership.follow() and worker.assigned == mine
    assert consumer.assigned_with[0] == "incremental_assign"
    worker.checkpoint.pending.update({tp: 5 for tp in mine})
    shards.version, shards._partitions = 2, {}
    events.clear()
    assert not membership.follow() and worker.assigned == set()
    assert events[:2] == ["flush", ("commit", {tp: 5 for tp in mine})]  # committed, then let go
    assert consumer.calls[-1] == ("incremental_unassign", sorted(tp.partition for tp in mine))
