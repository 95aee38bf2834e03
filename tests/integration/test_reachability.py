"""The target's reachability, named as the source's is: within seconds of start-up and of losing
it, with the status line saying how long it has been away and one line when it is back. Before,
an idle mirror served its producer's events only at shutdown, so nothing said the target was
away until then."""

import signal

import pytest

from mirror_maker.embedded import free_port

from .harness import Cluster, MirrorProcess, mirror_args, mirror_files, wait_until

STATUS_EVERY_MS = "1000"


@pytest.mark.parametrize("mode", [[], ["--use.raw.bytes"]], ids=["records", "raw"])
def test_a_target_away_at_start_is_named_within_seconds(tmp_path, source, mode):
    dead = f"127.0.0.1:{free_port()}"
    files = mirror_files(tmp_path, source, Cluster("dead", dead))
    mirror = MirrorProcess(mirror_args(files, source.create_topic("away"), "--status.interval.ms", STATUS_EVERY_MS,
                                       *mode), tmp_path / "m.log")
    try:
        mirror.wait_for_log(f"Cannot reach the target cluster at {dead}", 15)
        mirror.wait_for_log("the target cluster unreachable for", 15)
        assert mirror.stop(signal.SIGTERM, timeout_s=40) == 143, mirror.log()
    finally:
        mirror.kill()
    assert "Traceback" not in mirror.log()


@pytest.mark.needs_own_brokers("cuts the target off through a proxy")
def test_an_idle_mirror_names_a_lost_target_and_its_return(tmp_path, source, target):
    proxy, proxied = target.proxy(tmp_path, "target-proxy")
    topic = source.create_topic("idle")
    files = mirror_files(tmp_path, source, proxied)
    mirror = MirrorProcess(mirror_args(files, topic, "--status.interval.ms", STATUS_EVERY_MS), tmp_path / "m.log")
    try:
        mirror.wait_for_log(f"Resetting offset for partition {topic}-0", 60)
        assert "Cannot reach the target" not in mirror.log()
        proxy.cut()  # nothing flows: only the served producer events can tell
        mirror.wait_for_log(f"Cannot reach the target cluster at {proxied.bootstrap}", 15)
        mirror.wait_for_log("the target cluster unreachable for", 15)
        proxy.restore()
        mirror.wait_for_log(f"The target cluster at {proxied.bootstrap} is reachable again", 20)
        lines = mirror.log().splitlines()
        back = max(i for i, line in enumerate(lines) if "is reachable again" in line)
        wait_until(lambda: any("Status:" in line and "unreachable" not in line
                               for line in mirror.log().splitlines()[back + 1:]), 10, "a status line without it")
        assert mirror.stop(signal.SIGTERM, timeout_s=40) == 143, mirror.log()
    finally:
        mirror.kill()
        proxy.stop()
