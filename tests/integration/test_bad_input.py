"""The bad-input matrix, through the real command line: one clear line, the right exit code,
no traceback, nothing lost (no offset committed, nothing written)."""

import signal
from pathlib import Path

import pytest

from mirror_maker.embedded import free_port

from .harness import Cluster, MirrorProcess, mirror_args, mirror_files, write_properties

PLUGINS = {"PYTHONPATH": str(Path(__file__).parent)}


def run_bad(tmp_path, args, env=None):
    mirror = MirrorProcess(args, tmp_path / "bad.log", env=env)
    status = mirror.wait(60)
    log = mirror.log()
    problems = [line for line in log.splitlines()
                if " ERROR " in line or (line and not line.startswith("["))]
    return status, log, problems


def assert_one_clear_line(status, log, problems, expected_status, text):
    assert status == expected_status, log
    assert "Traceback" not in log
    assert len(problems) >= 1 and text in problems[0], log


@pytest.fixture
def good(tmp_path, source, target):
    return mirror_files(tmp_path, source, target)


def args_with(good, consumer=None, producer=None, *extra, include="t"):
    return ["--consumer.config", str(consumer or good.consumer), "--producer.config",
            str(producer or good.producer), "--include", include, *extra]


def test_missing_file(tmp_path, good):
    status, log, problems = run_bad(tmp_path, args_with(good, consumer=tmp_path / "nope.properties"))
    assert_one_clear_line(status, log, problems, 1, "file not found")


def test_malformed_properties_line(tmp_path, good):
    bad = tmp_path / "bad.properties"
    bad.write_text("bootstrap.servers=x:1\n=orphan-value\n")
    status, log, problems = run_bad(tmp_path, args_with(good, producer=bad))
    assert_one_clear_line(status, log, problems, 1, "malformed properties")


def test_unknown_option(tmp_path, good):
    status, log, problems = run_bad(tmp_path, args_with(good) + ["--blacklist", "x"])
    assert_one_clear_line(status, log, problems, 1, "No such option")


def test_option_without_its_value(tmp_path, good):
    status, log, problems = run_bad(tmp_path, args_with(good) + ["--num.streams"])
    assert_one_clear_line(status, log, problems, 1, "requires an argument")


def test_invalid_regex(tmp_path, good):
    status, log, problems = run_bad(tmp_path, args_with(good, include="orders("))
    assert_one_clear_line(status, log, problems, 1, "invalid regex")


def test_handler_path_not_found(tmp_path, good):
    status, log, problems = run_bad(tmp_path, args_with(good) + ["--message.handler", "nowhere.Handler"])
    assert_one_clear_line(status, log, problems, 1, "cannot load 'nowhere.Handler'")


def test_handler_class_without_handle(tmp_path, good):
    status, log, problems = run_bad(tmp_path, args_with(good) + ["--message.handler",
                                                                "raising_plugins:RebalanceListener"], PLUGINS)
    assert_one_clear_line(status, log, problems, 1, "has no handle(record) method")


@pytest.mark.parametrize("streams", ["0", "-1"])
def test_zero_or_negative_num_streams(tmp_path, good, streams):
    status, log, problems = run_bad(tmp_path, args_with(good) + ["--num.streams", streams])
    assert_one_clear_line(status, log, problems, 1, "--num.streams")


def test_group_id_missing(tmp_path, good, source):
    consumer = write_properties(tmp_path / "nogroup.properties", {"bootstrap.servers": source.bootstrap})
    status, log, problems = run_bad(tmp_path, args_with(good, consumer=consumer))
    assert_one_clear_line(status, log, problems, 1, "group.id is missing")


@pytest.mark.parametrize("mode", [[], ["--use.raw.bytes"]], ids=["records", "raw"])
def test_unreachable_bootstrap_keeps_retrying_names_the_address_and_stops_on_sigterm(tmp_path, target, mode):
    dead = f"127.0.0.1:{free_port()}"
    files = mirror_files(tmp_path, Cluster("dead", dead), target)
    mirror = MirrorProcess(mirror_args(files, "t", *mode), tmp_path / "m.log")
    mirror.wait_for_log(f"Cannot reach the source cluster at {dead}", 15)  # named within 15 s
    assert mirror.process.poll() is None, "it keeps retrying"
    assert mirror.stop(signal.SIGTERM, timeout_s=20) == 143, mirror.log()  # the shutdown deadline is 30 s
    assert "did not stop in time" not in mirror.log() and "Traceback" not in mirror.log()


def test_a_stop_during_an_assignment_s_target_check_with_the_target_away_is_prompt(tmp_path, source):
    """An assignment checks the target topics; with the target away, librdkafka's metadata wait
    (which nothing interrupts) held a SIGTERM up to 10 s. It is asked in slices now."""
    dead = f"127.0.0.1:{free_port()}"
    topic = source.create_topic("away-check", partitions=2)
    files = mirror_files(tmp_path, source, Cluster("dead", dead))
    mirror = MirrorProcess(mirror_args(files, topic), tmp_path / "m.log")
    try:
        mirror.wait_for_log(f"Assigned {topic}-0", 30)  # the check follows at once
        assert mirror.stop(signal.SIGTERM, timeout_s=5) == 143, mirror.log()  # before the 10 s wait's end
    finally:
        mirror.kill()
    assert "Cannot check the target topics" not in mirror.log()  # a stop, not a retry to announce
    assert "did not stop in time" not in mirror.log() and "Traceback" not in mirror.log()


@pytest.mark.needs_own_brokers("a TLS listener with the test's certificates")
@pytest.mark.parametrize("mode", [[], ["--use.raw.bytes"]], ids=["records", "raw"])
def test_authentication_failure_names_the_cluster_side(tmp_path, source, target, mode):
    from ..tls_material import make_tls_files
    from .tls import tls_target as reach_over_tls

    (tmp_path / "served").mkdir()
    (tmp_path / "other").mkdir()
    other = make_tls_files(tmp_path / "other")  # a CA the broker's certificate does not chain to
    with reach_over_tls(tmp_path / "served", target) as (tls_target, _tls, _front):
        files = mirror_files(tmp_path, source, tls_target, producer={
            "security.protocol": "SSL", "ssl.truststore.location": other.truststore_jks,
            "ssl.truststore.password": other.store_password})
        topic = source.create_topic("auth")
        mirror = MirrorProcess(mirror_args(files, topic, *mode), tmp_path / "m.log")
        assert mirror.wait(60) == 255, mirror.log()
        errors = [line for line in mirror.log().splitlines() if " ERROR " in line]
        assert any(f"authentication failed with the target cluster ({tls_target.bootstrap})" in e
                   for e in errors), errors
        assert "Traceback" not in mirror.log()
        assert source.committed(files.group, topic) == {}
