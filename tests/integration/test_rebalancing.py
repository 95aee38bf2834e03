"""Rebalances on Apache Kafka that Tansu cannot show: cooperative-sticky's incremental revokes
under load with several threads per instance, and Kafka 4's consumer group protocol (KIP-848)."""

import re
import signal

import pytest

from .harness import (BackgroundProducer, MirrorProcess, make_records, mirror_args, mirror_files, unique,
                      wait_settled, wait_until, write_properties)


def events(mirror, kind, since: int = 0):
    """The 'Assigned'/'Revoked' lines of a mirror's log from line ``since`` on, as (thread,
    set of partition names)."""
    out = []
    for line in mirror.log().splitlines()[since:]:
        match = re.search(rf"\[(mirrormaker-thread-\d+)\] {kind} (.*) \(mirror_maker", line)
        if match and match.group(2) != "no partitions":
            out.append((match.group(1), set(match.group(2).split(", "))))
    return out


def owned(mirror, since: int = 0) -> dict:
    """What each thread owns after the events from line ``since`` on (assignments add, revokes
    take away, in log order)."""
    ownership = {}
    for line in mirror.log().splitlines()[since:]:
        match = re.search(r"\[(mirrormaker-thread-\d+)\] (Assigned|Revoked) (.*) \(mirror_maker", line)
        if match and match.group(3) != "no partitions":
            partitions = set(match.group(3).split(", "))
            thread = ownership.setdefault(match.group(1), set())
            thread |= partitions if match.group(2) == "Assigned" else set()
            thread -= partitions if match.group(2) == "Revoked" else set()
    return ownership


@pytest.mark.needs_kafka_feature("a group that re-forms while members with several threads come and go")
def test_cooperative_sticky_moves_only_the_partitions_that_change_owner(tmp_path, source, target):
    topic = source.create_topic("coop", partitions=8)
    files = mirror_files(tmp_path, source, target, consumer={
        "partition.assignment.strategy": "org.apache.kafka.clients.consumer.CooperativeStickyAssignor"})
    args = mirror_args(files, topic, "--num.streams", "2", "--offset.commit.interval.ms", "500")
    stream = BackgroundProducer(source, topic, rate=400).start()
    first = MirrorProcess(args, tmp_path / "first.log")
    second = None
    try:
        wait_until(lambda: sum(len(p) for p in owned(first).values()) == 8 and len(owned(first)) == 2, 60,
                   "the first instance's two threads to own all 8 partitions")
        wait_settled(first)
        before, mark = owned(first), len(first.log().splitlines())
        second = MirrorProcess(args, tmp_path / "second.log")
        wait_until(lambda: len(events(second, "Assigned")) >= 2, 60, "the second instance's threads")
        wait_settled(first, second)
        revoked = events(first, "Revoked", since=mark)
        assert revoked, "handing partitions to the second instance revokes some of the first's"
        for thread, partitions in revoked:  # incremental: a revoke names only what moves
            assert partitions < before[thread], (thread, partitions, before[thread])
        after = owned(first)
        assert all(after[t] and after[t] <= before[t] for t in before), (before, after)  # each kept some
        assert second.stop(signal.SIGTERM) == 143, second.log()
        second = None
        wait_until(lambda: sum(len(p) for p in owned(first).values()) == 8, 60,
                   "the first instance to take back the second's partitions")
        acked = stream.stop()
        target.read_values(topic, acked, timeout_s=90)
        assert first.stop(signal.SIGTERM) == 143, first.log()
    finally:
        stream.stop()
        for mirror in (first, second):
            if mirror is not None:
                mirror.kill()  # after a failure: nothing left running


@pytest.mark.needs_kafka_feature("the consumer group protocol of KIP-848 (Kafka 4)")
def test_the_consumer_group_protocol_of_kafka_4(tmp_path, source, target):
    if getattr(source.broker, "version", "4").startswith("3."):
        pytest.skip("KIP-848's protocol is not enabled on Kafka 3.9")
    topic = source.create_topic("kip848", partitions=4)
    records = make_records(1000)
    source.seed(topic, records)
    group = unique("kip848")
    # No session.timeout.ms, heartbeat.interval.ms or assignor: with this protocol the broker
    # owns them, and the client refuses them (so does Java's).
    consumer = write_properties(tmp_path / "consumer.properties", {
        "bootstrap.servers": source.bootstrap, "group.id": group, "group.protocol": "consumer",
        "auto.offset.reset": "earliest", "metadata.max.age.ms": 2000})
    producer = write_properties(tmp_path / "producer.properties", {"bootstrap.servers": target.bootstrap})
    args = ["--consumer.config", str(consumer), "--producer.config", str(producer), "--include", topic,
            "--offset.commit.interval.ms", "500"]
    first = MirrorProcess(args, tmp_path / "first.log")
    second = None
    try:
        target.read_values(topic, [r.value for r in records], timeout_s=60)
        second = MirrorProcess(args, tmp_path / "second.log")
        wait_until(lambda: events(second, "Assigned"), 60, "the broker to give the second instance partitions")
        revoked = events(first, "Revoked")
        assert revoked and all(len(p) < 4 for _t, p in revoked), revoked  # incremental, not all 4
        more = make_records(200, "after-join")
        source.seed(topic, more)
        target.read_values(topic, [r.value for r in more], timeout_s=60)
        wait_until(lambda: sum(source.committed(group, topic).values()) == 1200, 30, "every offset committed")
    finally:
        if second is not None:
            assert second.stop(signal.SIGTERM) == 143, second.log()
        assert first.stop(signal.SIGTERM) == 143, first.log()


@pytest.mark.needs_kafka_feature("static group membership (KIP-345)")
@pytest.mark.parametrize("instance_id", [None, "mm-static"], ids=["dynamic member", "static member"])
def test_a_stop_leaves_the_group_unless_the_member_is_static(tmp_path, source, target, instance_id):
    """A stop serves its last revoke before the consumer closes (a revoke left to close() can hang
    in librdkafka); that must not make a static member leave: close() does not send its
    LeaveGroup, so a restart within the session timeout keeps its partitions (KIP-345)."""
    topic = source.create_topic("leave", partitions=2)
    source.seed(topic, make_records(20))
    static = {"group.instance.id": instance_id} if instance_id else {}
    files = mirror_files(tmp_path, source, target, consumer={
        **static, "session.timeout.ms": "30000", "heartbeat.interval.ms": "1000", "max.poll.interval.ms": "60000"})
    mirror = MirrorProcess(mirror_args(files, topic, "--offset.commit.interval.ms", "500"), tmp_path / "m.log")
    try:
        target.read_all(topic, expected=20, timeout_s=60)
        wait_until(lambda: sum(source.committed(files.group, topic).values()) == 20, 30, "the offsets committed")
    finally:
        assert mirror.stop(signal.SIGTERM) == 143, mirror.log()
    assert "Revoked leave" in mirror.log()  # the last revoke was served, and committed nothing new
    group = source.admin().describe_consumer_groups([files.group])[files.group].result(timeout=30)
    # The session (30 s) is far from over: a member still listed did not leave.
    assert [m.group_instance_id for m in group.members] == ([f"{instance_id}-0"] if instance_id else [])
