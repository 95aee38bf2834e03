"""Bounded shutdown, the second signal, and failures in user plugins."""

import contextlib
import signal
from pathlib import Path

import pytest

from .harness import MirrorProcess, make_records, mirror_args, mirror_files, unique, wait_until

PLUGINS = {"PYTHONPATH": str(Path(__file__).parent)}


def test_handler_raising_on_one_record_stops_the_mirror_without_committing_past_it(tmp_path, source, target, files):
    topic = source.create_topic("hraise", partitions=1)
    records = make_records(50)
    source.seed(topic, records, partition=0)
    mirror = MirrorProcess(mirror_args(files, topic, "--offset.commit.interval.ms", "100",
                                       "--message.handler", "raising_plugins.FailOnValue",
                                       "--message.handler.args", records[30].value.decode()),
                           tmp_path / "m.log", env=PLUGINS)
    assert mirror.wait(60) == 255, mirror.log()
    errors = [line for line in mirror.log().splitlines() if " ERROR " in line]
    assert len(errors) == 1
    assert f"{topic}-0 offset 30" in errors[0] and "ValueError: cannot handle this record" in errors[0]
    assert "Traceback" not in mirror.log()
    assert source.committed(files.group, topic).get(0, 0) <= 30


def test_listener_raising_stops_the_mirror(tmp_path, source, target, files):
    topic = source.create_topic("lraise")
    mirror = MirrorProcess(mirror_args(files, topic, "--consumer.rebalance.listener",
                                       "raising_plugins.FailOnAssign"), tmp_path / "m.log", env=PLUGINS)
    assert mirror.wait(60) == 255, mirror.log()
    assert "on_partitions_assigned raised: RuntimeError: listener is broken" in mirror.log()
    assert "Traceback" not in mirror.log()


@contextlib.contextmanager
def mirror_with_target_cut(tmp_path, source, target, shutdown_timeout_ms: str, *extra: str,
                           before_cut=lambda: None):
    """A mirror whose target is cut off (through a proxy) right after it got its partitions
    (and ``before_cut`` returned), with records consumed that it cannot deliver."""
    proxy, proxied = target.proxy(tmp_path)
    topic = source.create_topic("cut")
    files = mirror_files(tmp_path, source, proxied)
    mirror = MirrorProcess(mirror_args(files, topic, "--shutdown.timeout.ms", shutdown_timeout_ms,
                                       "--status.interval.ms", "200", *extra), tmp_path / "m.log")
    try:
        mirror.wait_for_log("Resetting offset for partition", 30)  # target topic checked
        before_cut()
        proxy.cut()
        source.seed(topic, make_records(20))
        mirror.wait_for_log("20 waiting for the target", 30)  # consumed, but not deliverable
        yield mirror, files, topic
    finally:
        mirror.kill()  # a no-op after the test's own stop
        proxy.stop()


@pytest.mark.needs_own_brokers("cuts the target off through a proxy")
def test_shutdown_is_bounded_while_the_target_is_away(tmp_path, source, target):
    with mirror_with_target_cut(tmp_path, source, target, "2000") as (mirror, files, topic):
        assert mirror.stop(signal.SIGTERM, timeout_s=30) == 143, mirror.log()
        assert "not acknowledged by the target before the deadline" in mirror.log()
        assert source.committed(files.group, topic) == {}


@pytest.mark.needs_own_brokers("cuts the target off through a proxy")
@pytest.mark.needs_kafka_feature("MirrorMaker 2's internal topics created on the target")
def test_shutdown_is_bounded_with_heartbeats_and_checkpoints_waiting_for_the_target(tmp_path, source, target):
    """Heartbeats and checkpoints have their own producer to the target, and offset syncs theirs:
    their last writes are flushed within the same deadline as the mirror's records (each waited
    5 s more after it)."""
    alias = unique("a")  # this mirror's heartbeats, in a topic the tests share

    def heartbeat_on_target() -> bool:
        return target.topic_exists("heartbeats") and any(
            alias.encode() in rec.key for _p, _o, rec in target.read_all("heartbeats", timeout_s=30))

    failover = ("--message.handler", "mirror_maker.handlers.PartitionPreservingHandler",
                "--replication.policy.class", "default", "--source.cluster.alias", alias, "--target.cluster.alias", "b",
                "--emit.offset-syncs.enabled", "true", "--offset-syncs.topic.location", "target",
                "--emit.checkpoints.enabled", "true", "--emit.checkpoints.interval.seconds", "1",
                "--emit.heartbeats.enabled", "true", "--emit.heartbeats.interval.seconds", "1")
    with mirror_with_target_cut(tmp_path, source, target, "2000", *failover,
                                before_cut=lambda: wait_until(heartbeat_on_target, 30, "a heartbeat on the target")
                                ) as (mirror, files, topic):
        # Status lines come every 200 ms: 10 of them during the outage are 2 s, two heartbeats'
        # time, so the heartbeat producer holds records the target never acknowledged.
        wait_until(lambda: mirror.log().count(" 20 waiting for the target") >= 10, 30, "2 s of the outage")
        # Within the 2 s deadline and the exit itself (it took 7 s): a later exit fails the wait.
        assert mirror.stop(signal.SIGTERM, timeout_s=3.5) == 143, mirror.log()
        assert "checkpoints and heartbeats were not written before the stop" in mirror.log()
        # Checkpoints every second make the stream commit every second, so its start position (0)
        # may be committed before the cut: none of the 20 records the target never acknowledged.
        assert source.committed(files.group, topic).get(0, 0) == 0


@pytest.mark.needs_own_brokers("cuts the target off through a proxy")
def test_a_second_signal_exits_at_once(tmp_path, source, target):
    with mirror_with_target_cut(tmp_path, source, target, "600000") as (mirror, files, topic):
        mirror.process.send_signal(signal.SIGTERM)
        mirror.wait_for_log("Start clean shutdown.", 10)
        mirror.process.send_signal(signal.SIGINT)
        assert mirror.wait(15) == 130, mirror.log()
        assert "Second signal" in mirror.log()
        assert source.committed(files.group, topic) == {}
