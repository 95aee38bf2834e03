"""Bounded shutdown, the second signal, and failures in user plugins."""

import contextlib
import signal
from pathlib import Path

import pytest

from .harness import MirrorProcess, make_records, mirror_args, mirror_files

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
def mirror_with_target_cut(tmp_path, source, target, shutdown_timeout_ms: str):
    """A mirror whose target is cut off (through a proxy) right after it got its partitions,
    with records consumed that it cannot deliver."""
    proxy, proxied = target.proxy(tmp_path)
    topic = source.create_topic("cut")
    files = mirror_files(tmp_path, source, proxied)
    mirror = MirrorProcess(mirror_args(files, topic, "--shutdown.timeout.ms", shutdown_timeout_ms,
                                       "--status.interval.ms", "200"), tmp_path / "m.log")
    try:
        mirror.wait_for_log("Resetting offset for partition", 30)  # target topic checked
        proxy.cut()
        source.seed(topic, make_records(20))
        mirror.wait_for_log("20 waiting for the target", 30)  # consumed, but not deliverable
        yield mirror, files, topic
    finally:
        proxy.stop()


@pytest.mark.needs_own_brokers("cuts the target off through a proxy")
def test_shutdown_is_bounded_while_the_target_is_away(tmp_path, source, target):
    with mirror_with_target_cut(tmp_path, source, target, "2000") as (mirror, files, topic):
        assert mirror.stop(signal.SIGTERM, timeout_s=30) == 143, mirror.log()
        assert "not acknowledged by the target before the deadline" in mirror.log()
        assert source.committed(files.group, topic) == {}


@pytest.mark.needs_own_brokers("cuts the target off through a proxy")
def test_a_second_signal_exits_at_once(tmp_path, source, target):
    with mirror_with_target_cut(tmp_path, source, target, "600000") as (mirror, files, topic):
        mirror.process.send_signal(signal.SIGTERM)
        mirror.wait_for_log("Start clean shutdown.", 10)
        mirror.process.send_signal(signal.SIGINT)
        assert mirror.wait(15) == 130, mirror.log()
        assert "Second signal" in mirror.log()
        assert source.committed(files.group, topic) == {}
