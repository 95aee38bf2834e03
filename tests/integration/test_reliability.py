"""Bad days: Kafka's own MirrorMaker system test replayed, broker outages, a rebalance storm.

Every acked source value must be on the target; duplicates are allowed (at-least-once) and
reported at the end of the run.
"""

import signal
import time
from collections import Counter

import pytest

from .harness import (
    MODE_IDS,
    MODES,
    RAW,
    RECORDS,
    BackgroundProducer,
    Cluster,
    MirrorProcess,
    mirror_args,
    mirror_files,
    on_tansu,
    raw_queue_problem,
    unique,
    values,
    wait_settled,
    wait_until,
)

pytestmark = pytest.mark.slow


def duplicates(rows) -> int:
    return sum(count - 1 for count in Counter(values(rows)).values() if count > 1)


class TargetCounter:
    """Like the system test's ConsoleConsumer: reads the target from the start, all along."""

    def __init__(self, cluster: Cluster, topic: str) -> None:
        self.consumer = cluster.consumer(group=unique("console"))
        self.consumer.subscribe([topic])
        self.values = []

    def poll(self) -> int:
        for msg in self.consumer.consume(10000, 0.2):
            if msg.error() is None:
                self.values.append(msg.value())
        return len(self.values)

    def close(self) -> None:
        self.consumer.close()


@pytest.mark.smoke
@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
@pytest.mark.parametrize("clean", [True, False], ids=["clean-bounce", "hard-bounce"])
def test_kafka_mirror_maker_system_test_bounce(tmp_path, source, target, report, clean, mode):
    """tests/kafkatest/tests/core/mirror_maker_test.py::test_bounce, against our CLI, in every
    mode (in exactly-once, read with read_committed: every acked record once)."""
    topic = unique("topic")
    source.create_topic(name=topic)
    target.create_topic(name=topic)
    group = unique("test-consumer-group")
    # The system test's consumer.properties has no auto.offset.reset: Kafka's default, latest.
    files = mirror_files(tmp_path, source, target, group=group, consumer={"auto.offset.reset": "latest"})
    args = ["--consumer.config", str(files.consumer), "--producer.config", str(files.producer),
            "--offset.commit.interval.ms", "1000", "--num.streams", "1", f'--whitelist="{topic}"', *mode.args]
    counter = TargetCounter(target, topic)
    mirror = MirrorProcess(args, tmp_path / "mm0.log")
    mirror.wait_for_log("Resetting offset for partition", 30)
    stream = BackgroundProducer(source, topic, rate=1000, prefix="").start()
    try:
        wait_until(lambda: len(stream.acked) > 5, 20, "the producer's first acks")
        wait_until(lambda: counter.poll() >= 1, 60, "a first message on the target")
        if not clean:  # KAFKA-2759: at least one commit before a hard kill
            wait_until(lambda: mode.committed(source, target, group, topic), 30, "a first commit")
        for bounce in range(3):
            if clean:
                assert mirror.stop(signal.SIGTERM, timeout_s=30) == 143, mirror.log()
            else:
                mirror.kill()
            consumed = counter.poll()
            mirror = MirrorProcess(args, tmp_path / f"mm{bounce + 1}.log")
            wait_until(lambda: counter.poll() > consumed + 100, 60,
                       f"more than 100 new messages after bounce {bounce + 1}")
    finally:
        acked = stream.stop()
    try:
        deadline = time.monotonic() + 60
        while set(acked) - set(counter.values) and time.monotonic() < deadline:
            counter.poll()
        missing = set(acked) - set(counter.values)
        assert not missing, f"{len(missing)} acked values missing, e.g. {sorted(missing)[:5]}"
        dups = sum(c - 1 for c in Counter(counter.values).values() if c > 1)
        report(f"system test bounce ({'clean' if clean else 'hard'}, {mode.name}): {len(acked)} acked, "
               f"{len(counter.values)} on the target, {dups} duplicates")
        if mode.exactly_once:
            assert dups == 0
    finally:
        counter.close()
        assert mirror.stop(signal.SIGTERM) == 143, mirror.log()


def _outage(tmp_path, source, target, report, side, mode=RECORDS):
    """30 s without one side: the mirror keeps running, commits nothing past what the target
    has, keeps its place in the group while the target is away (no "Unknown member": the source
    still hears its heartbeats; without the source, its session of 2 s ends, and it joins again),
    says it is stalled within a status interval, and mirrors everything once the side is back (in exactly-once, each record once)."""
    behind = source if side == "source" else target
    proxy, proxied = behind.proxy(tmp_path, f"{side}-proxy")
    topic = source.create_topic(f"{side}-outage", partitions=2)
    files = mirror_files(tmp_path, proxied if side == "source" else source,
                         proxied if side == "target" else target)
    stream = BackgroundProducer(source, topic, rate=200).start()
    mirror = MirrorProcess(mirror_args(files, topic, *mode.args, "--offset.commit.interval.ms", "500",
                                       "--status.interval.ms", "5000"), tmp_path / "m.log")

    def committed() -> int:
        return sum(mode.committed(source, target, files.group, topic).values())

    # Every path ends the mirror and the proxy: a proxy left on the cluster's one proxy port
    # would serve the next test's, which then could not cut anything.
    try:
        try:
            wait_until(lambda: committed() > 100, 60, "commits before the outage")
            proxy.cut()
            cut_until = time.monotonic() + 30
            while time.monotonic() < cut_until:  # the outage itself: 30 s, checked every 2 s
                if side == "target":
                    assert committed() <= target.count(topic), "an offset was committed past the target"
                assert mirror.process.poll() is None, mirror.log()
                time.sleep(2)
            if side == "target":  # at the first status line 15 s after its last acknowledgement, outage going on
                wait_until(lambda: "STALLED" in mirror.log(), 20, "a mirror stuck behind its target to say so",
                           evidence=mirror.log_tail)
            if side == "target" and mode is RAW:
                problem = raw_queue_problem(mirror.log())
                assert problem is None, f"{problem}: {mirror.log_tail(6000)}"
            proxy.restore()
        finally:
            acked = stream.stop()
        rows = target.read_values(topic, acked, timeout_s=60)  # mirroring resumes within 60 s of the return
        assert mirror.process.poll() is None, "the mirror keeps running through the outage"
        if side == "target":
            assert "Unknown member" not in mirror.log(), "a stream waiting for the target keeps its group"
        report(f"{side} outage 30 s ({mode.name}): {len(acked)} acked, {len(rows)} on the target, "
               f"{duplicates(rows)} duplicates")
        if mode.exactly_once:
            assert duplicates(rows) == 0
        assert mirror.stop(signal.SIGTERM) == 143, mirror.log()
    finally:
        mirror.kill()
        proxy.stop()


@pytest.mark.needs_own_brokers("cuts the target off through a proxy")
@pytest.mark.parametrize("mode", MODES, ids=MODE_IDS)
def test_target_outage_of_30_seconds(tmp_path, source, target, report, mode):
    _outage(tmp_path, source, target, report, "target", mode)


@pytest.mark.needs_own_brokers("cuts the source off through a proxy")
def test_source_outage_of_30_seconds(tmp_path, source, target, report):
    _outage(tmp_path, source, target, report, "source")


def test_rebalance_storm(tmp_path, source, target, files, report):
    topic = source.create_topic("storm", partitions=6)
    # Two threads per instance: their LeaveGroups land in the middle of each other's rebalance,
    # which stalls Tansu's group (see test_two_instances_started_and_stopped_during_a_stream).
    streams = "1" if on_tansu() else "2"
    args = mirror_args(files, topic, "--offset.commit.interval.ms", "500", "--num.streams", streams)
    stream = BackgroundProducer(source, topic, rate=300).start()
    main = MirrorProcess(args, tmp_path / "main.log")
    try:
        main.wait_for_log("Assigned", 30)
        for round_ in range(5):
            others = [MirrorProcess(args, tmp_path / f"other-{round_}-{i}.log") for i in (2, 3)]
            for other in others:
                other.wait_for_log("Assigned", 30)
            wait_settled(main, *others)
            for other in others:
                assert other.stop(signal.SIGTERM, timeout_s=30) == 143, other.log()
    finally:
        acked = stream.stop()
    try:
        rows = target.read_values(topic, acked, timeout_s=120)
        report(f"rebalance storm (5 rounds of 2 extra instances, {streams} threads each): {len(acked)} acked, "
               f"{len(rows)} on the target, {duplicates(rows)} duplicates")
    finally:
        assert main.stop(signal.SIGTERM) == 143, main.log()
