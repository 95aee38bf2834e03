"""At-least-once delivery: SIGKILL, SIGTERM, a cut target, and abort on send failure."""

import signal

import pytest

from .harness import (
    BackgroundProducer,
    MirrorProcess,
    on_tansu,
    mirror_args,
    mirror_files,
    wait_settled,
    wait_until,
)


def test_sigkill_mid_stream_then_restart_loses_nothing(tmp_path, source, target, files):
    topic = source.create_topic("kill", partitions=3)
    stream = BackgroundProducer(source, topic, rate=500).start()
    args = mirror_args(files, topic, "--offset.commit.interval.ms", "500")
    mirror = MirrorProcess(args, tmp_path / "first.log")
    try:
        wait_until(lambda: sum(source.committed(files.group, topic).values()) > 200, 60,
                   "a first commit after some records")
        mirror.kill()  # SIGKILL: nothing flushed, nothing committed
        mirror = MirrorProcess(args, tmp_path / "second.log")
        mirror.wait_for_log("Assigned", 30)
    finally:
        acked = stream.stop()
    try:
        target.read_values(topic, acked, timeout_s=90)
    finally:
        assert mirror.stop(signal.SIGTERM) == 143, mirror.log()


def test_sigterm_exits_143_and_a_second_instance_takes_every_partition(tmp_path, source, target, files):
    topic = source.create_topic("term", partitions=4)
    stream = BackgroundProducer(source, topic, rate=300).start()
    args = mirror_args(files, topic, "--offset.commit.interval.ms", "1000")
    first = MirrorProcess(args, tmp_path / "first.log")
    second = None
    try:
        first.wait_for_log("Assigned", 30)
        second = MirrorProcess(args, tmp_path / "second.log")
        second.wait_for_log("Assigned", 30)
        wait_settled(first, second)
        assert first.stop(signal.SIGTERM, timeout_s=30) == 143, first.log()
        # The first one left the group on close: the second gets all 4 partitions quickly.
        wait_until(lambda: all(f"{topic}-{p}" in second.log().split("Revoked")[-1] for p in range(4))
                   and "Assigned" in second.log().split("Revoked")[-1], 15,
                   "the second instance to own every partition")
        assert "Flushing producer and committing consumer offsets." in first.log()
    finally:
        acked = stream.stop()
    try:
        target.read_values(topic, acked, timeout_s=90)
    finally:
        if second is not None:
            assert second.stop(signal.SIGINT) == 130, second.log()


def test_two_instances_started_and_stopped_during_a_stream(tmp_path, source, target, files):
    topic = source.create_topic("pair", partitions=6)
    stream = BackgroundProducer(source, topic, rate=400).start()
    # Tansu 0.6 keeps a member that sent LeaveGroup while the group was already rebalancing as the
    # leader of every later generation, so the group never forms again (librdkafka debug=cgrp:
    # LeaveGroup answered, then JoinGroup responses name the departed member as leader for 90 s+).
    # An instance with two streams sends two LeaveGroups, the second during the rebalance the first
    # started; on Tansu each instance runs one stream, on Apache Kafka two.
    streams = "1" if on_tansu() else "2"
    args = mirror_args(files, topic, "--offset.commit.interval.ms", "500", "--num.streams", streams)
    a = MirrorProcess(args, tmp_path / "a1.log")
    b = None
    try:
        a.wait_for_log("Assigned", 30)
        b = MirrorProcess(args, tmp_path / "b.log")
        b.wait_for_log("Assigned", 30)
        a.wait_for_log("Revoked", 30)
        wait_settled(a, b)
        assert a.stop(signal.SIGTERM) == 143, a.log()
        a = MirrorProcess(args, tmp_path / "a2.log")
        a.wait_for_log("Assigned", 30)
        wait_settled(a, b)
        assert b.stop(signal.SIGTERM) == 143, b.log()
        b = None
    finally:
        acked = stream.stop()
    try:
        target.read_values(topic, acked, timeout_s=90)
        wait_until(lambda: sum(source.committed(files.group, topic).values()) >= len(acked), 30,
                   "every record committed")
    finally:
        assert a.stop(signal.SIGTERM) == 143, a.log()
        if b is not None:
            b.kill()


@pytest.mark.needs_own_brokers("cuts the target off through a proxy")
def test_commit_never_passes_what_the_target_has_not_acknowledged(tmp_path, source, target):
    proxy, proxied = target.proxy(tmp_path, "target-proxy")
    topic = source.create_topic("cut", partitions=1)
    files = mirror_files(tmp_path, source, proxied)
    stream = BackgroundProducer(source, topic, rate=200).start()
    mirror = MirrorProcess(mirror_args(files, topic, "--offset.commit.interval.ms", "500"),
                           tmp_path / "mirror.log")
    try:
        wait_until(lambda: sum(source.committed(files.group, topic).values()) > 100, 60,
                   "commits before the cut")
        proxy.cut()
        mirror.wait_for_log("waiting for the target to acknowledge", 40)
        committed_during_cut = source.committed(files.group, topic).get(0, 0)
        on_target = target.count(topic)
        assert committed_during_cut <= on_target, "an offset was committed past the target's records"
        stuck = mirror.log().count("waiting for the target to acknowledge")
        wait_until(lambda: mirror.log().count("waiting for the target to acknowledge") > stuck, 30,
                   "the mirror to keep waiting for the target")
        assert source.committed(files.group, topic).get(0, 0) == committed_during_cut
        proxy.restore()
    finally:
        acked = stream.stop()
    try:
        target.read_values(topic, acked, timeout_s=120)
        assert mirror.process.poll() is None, "the mirror must keep running through the outage"
    finally:
        assert mirror.stop(signal.SIGTERM) == 143, mirror.log()
        proxy.stop()
