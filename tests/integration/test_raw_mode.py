"""Shallow mirroring (``--use.raw.bytes``): whole batches, the same partitions, nothing decoded.

On Apache Kafka, which validates every batch it is given (CRC, one batch per partition per
request, sequences); on Tansu the target is read with ``check.crcs=true``.
"""

from __future__ import annotations

import re
import signal
from collections import defaultdict
from pathlib import Path
from typing import Dict, List

import pytest

from mirror_maker.embedded import free_port

from .harness import (BackgroundProducer, Cluster, MirrorProcess, assert_order_per_key, make_records,
                      mirror_args, mirror_files, on_tansu, wait_until)

RAW = "--use.raw.bytes"


def raw_batches(cluster, topic: str, partitions: int) -> Dict[int, List[tuple]]:
    """(codec, record count) of every batch of each partition, read raw from the broker."""
    from kafka.net.selector import NetworkSelector
    from kafka.protocol.consumer import FetchRequest

    from mirror_maker.shallow.batches import split
    from mirror_maker.shallow.connections import Cluster as Raw

    net = NetworkSelector()
    raw = Raw(net, {"bootstrap.servers": cluster.bootstrap, **(cluster.client_conf or {})}, "test-reader", "test")
    try:
        raw.connect()
        raw.track([topic])
        out = {}
        for partition in range(partitions):
            position, batches = 0, []
            while True:
                request = FetchRequest(max_wait_ms=0, min_bytes=0, max_bytes=50_000_000, isolation_level=0,
                                       topics=[FetchRequest.FetchTopic(topic=topic, partitions=[
                                           FetchRequest.FetchTopic.FetchPartition(
                                               partition=partition, fetch_offset=position,
                                               partition_max_bytes=10_000_000)])], max_version=12)
                answer = raw.client.send_and_receive(raw.leader(topic, partition), request)
                part = answer.responses[0].partitions[0]
                found = [b for b in split(part.records or b"") if b.last_offset >= position]
                if not found:
                    break
                batches += [(b.codec, b.record_count) for b in found if not b.is_control]
                position = found[-1].next_offset
            out[partition] = batches
        return out
    finally:
        raw.close()
        net.close()


def mirrored_and_committed(source, target, group: str, topic: str, acked: List[bytes]) -> None:
    """Every value the source acknowledged is on the target, and the group committed past all."""
    target.read_values(topic, acked, timeout_s=90)
    wait_until(lambda: sum(source.committed(group, topic).values()) >= len(acked), 30, "all committed")


def per_partition(rows) -> Dict[int, List]:
    out = defaultdict(list)
    for partition, _offset, rec in sorted(rows, key=lambda row: (row[0], row[1])):
        out[partition].append(rec)
    return dict(out)


@pytest.mark.smoke
@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_batches_are_copied_as_they_are(tmp_path, source, target, files, codec):
    topic = source.create_topic(f"raw-{codec}", partitions=3)
    records = make_records(3000)
    source.seed(topic, records, **{"compression.type": codec, "linger.ms": 50, "batch.num.messages": 500})
    mirror = MirrorProcess(mirror_args(files, topic, RAW, "--offset.commit.interval.ms", "300"), tmp_path / "m.log")
    try:
        rows = target.read_all(topic, expected=len(records), timeout_s=90,
                               **({"check.crcs": True} if on_tansu() else {}))
        wait_until(lambda: sum(source.committed(files.group, topic).values()) == len(records), 30, "every offset committed")
    finally:
        assert mirror.stop(signal.SIGTERM) == 143, mirror.log()
    assert per_partition(rows) == per_partition(source.read_all(topic))  # same partitions, order, content
    assert_order_per_key(rows)
    if not on_tansu():
        assert raw_batches(target, topic, 3) == raw_batches(source, topic, 3)  # same codec and boundaries
    assert "Traceback" not in mirror.log()


def test_a_target_away_at_start_is_named_and_a_stop_meanwhile_is_prompt_and_clean(tmp_path, source):
    """The raw path keeps trying a target it cannot reach, as the confluent clients do; a SIGTERM
    then ends the run at once with 143 (it waited out the 30 s shutdown deadline inside
    kafka-python's bootstrap before), and no failure is reported for it."""
    dead = f"127.0.0.1:{free_port()}"
    topic = source.create_topic("raw-away", partitions=2)
    source.seed(topic, make_records(100))
    files = mirror_files(tmp_path, source, Cluster("dead", dead))
    mirror = MirrorProcess(mirror_args(files, topic, RAW), tmp_path / "m.log")
    mirror.wait_for_log(f"Cannot reach the target cluster at {dead} for the raw path: KafkaConnectionError", 30)
    assert mirror.process.poll() is None, "it keeps trying"
    assert mirror.stop(signal.SIGTERM, timeout_s=20) == 143, mirror.log()  # the shutdown deadline is 30 s
    log = mirror.log()
    assert "did not stop in time" not in log and "no producer id" not in log, log
    assert "Traceback" not in log and "Exception ignored" not in log, log
    assert "kafka.net" not in log, "kafka-python's own retry lines are DEBUG"
    assert source.committed(files.group, topic) == {}


@pytest.mark.needs_own_brokers("cuts the target off through a proxy")
def test_a_target_away_at_start_is_mirrored_to_once_it_answers(tmp_path, source, target):
    proxy, proxied = target.proxy(tmp_path, "target-proxy")
    proxy.cut()
    topic = source.create_topic("raw-late", partitions=2)
    records = make_records(2000)
    source.seed(topic, records)
    files = mirror_files(tmp_path, source, proxied)
    mirror = MirrorProcess(mirror_args(files, topic, RAW, "--offset.commit.interval.ms", "500"), tmp_path / "m.log")
    try:
        mirror.wait_for_log(f"Cannot reach the target cluster at {proxied.bootstrap} for the raw path", 30)
        assert source.committed(files.group, topic) == {}
        proxy.restore()
        rows = target.read_all(topic, expected=len(records), timeout_s=90)
        assert per_partition(rows) == per_partition(source.read_all(topic))
        wait_until(lambda: sum(source.committed(files.group, topic).values()) == len(records), 60,
                   "every offset committed")
        assert mirror.stop(signal.SIGTERM) == 143, mirror.log()
    finally:
        mirror.kill()
        proxy.stop()  # on every path: a proxy left on the cluster's proxy port serves the next test's
    assert "Traceback" not in mirror.log()


def _set_max_message_bytes(cluster, topic: str, value: int) -> None:
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[
        ConfigEntry("max.message.bytes", str(value), incremental_operation=AlterConfigOpType.SET)])
    for future in cluster.admin().incremental_alter_configs([resource]).values():
        future.result()


@pytest.mark.needs_kafka_feature("topic configs the broker enforces")
@pytest.mark.parametrize("abort", ["true", "false"])
def test_a_batch_the_target_refuses(tmp_path, source, target, files, abort):
    """The target's limit drops after the mirror read it: the raw producer's own refusal path.
    abort true: 255 and nothing committed past it; false: counted, skipped, the rest goes on."""
    topic = source.create_topic("raw-refuse", partitions=1)
    source.seed(topic, make_records(50, "before"), partition=0)
    mirror = MirrorProcess(mirror_args(files, topic, RAW, "--offset.commit.interval.ms", "200",
                                       "--abort.on.send.failure", abort), tmp_path / "m.log")
    try:
        target.read_all(topic, expected=50, timeout_s=60)
        wait_until(lambda: source.committed(files.group, topic).get(0) == 50, 30, "the first batch committed")
        _set_max_message_bytes(target, topic, 2000)
        source.seed(topic, make_records(1, "big", size=5000), partition=0)
        source.seed(topic, make_records(20, "after"), partition=0)
        if abort == "true":
            assert mirror.wait(60) == 255, mirror.log()
            errors = [line for line in mirror.log().splitlines() if " ERROR " in line]
            assert len(errors) == 1 and "MESSAGE_TOO_LARGE" in errors[0] and f"{topic}-0 offsets 50..50" in errors[0]
            assert source.committed(files.group, topic).get(0) == 50
        else:
            rows = target.read_all(topic, expected=70, timeout_s=60)
            assert not any(rec.value.startswith(b"big") for _p, _o, rec in rows)
            wait_until(lambda: source.committed(files.group, topic).get(0) == 71, 30, "committed past the drop")
            assert "dropped; --abort.on.send.failure is false" in mirror.log()
    finally:
        if mirror.process.poll() is None:
            assert mirror.stop(signal.SIGTERM) == 143, mirror.log()


@pytest.mark.needs_kafka_feature("topic configs the broker enforces")
def test_a_record_too_large_goes_the_record_path_and_stops_there(tmp_path, source, target, files):
    """A batch larger than the target topic's max.message.bytes (known at assignment) takes the
    record path, which refuses the one record that is too large by itself: exit 255."""
    topic = source.create_topic("raw-big", partitions=1)
    source.seed(topic, make_records(20, "before") + make_records(1, "big", size=20000), partition=0,
                **{"linger.ms": 100})
    from confluent_kafka.admin import NewTopic

    target.admin().create_topics([NewTopic(topic, 1, config={"max.message.bytes": "10000"})])[topic].result()
    mirror = MirrorProcess(mirror_args(files, topic, RAW, "--offset.commit.interval.ms", "200"), tmp_path / "m.log")
    assert mirror.wait(60) == 255, mirror.log()
    assert source.committed(files.group, topic).get(0, 0) <= 20
    assert "Traceback" not in mirror.log()


def test_a_batch_too_large_for_one_of_the_handler_s_target_topics_goes_the_record_path(tmp_path, source, target):
    """A handler names two target topics and sends its batches to the one with the smaller
    max.message.bytes: a batch larger than that takes the record path (its records fit one by
    one, with batch.size within the limit, as the mirror's warning says), where the target
    would refuse it as a batch."""
    from confluent_kafka.admin import NewTopic

    topic = source.create_topic("raw-tight", partitions=1)
    records = make_records(20, "r", size=2000)  # one batch of about 40 KB
    source.seed(topic, records, partition=0, **{"linger.ms": 100})
    target.admin().create_topics([NewTopic(f"{topic}.tight", 1, config={"max.message.bytes": "10000"})])[
        f"{topic}.tight"].result()
    files = mirror_files(tmp_path, source, target, producer={"batch.size": "10000"})
    mirror = MirrorProcess(mirror_args(files, topic, RAW, "--exit.when.caught.up", "--log.level", "DEBUG",
                                       "--message.handler", "raw_plugins.ToTheSecondTarget"),
                           tmp_path / "m.log", env={"PYTHONPATH": str(Path(__file__).parent)})
    assert mirror.wait(90) == 0, mirror.log()
    assert [rec.value for _p, _o, rec in target.read_all(f"{topic}.tight", expected=20)] == [
        rec.value for rec in records]
    assert "larger than the target's max.message.bytes" in mirror.log()


@pytest.mark.needs_kafka_feature("a deleted topic gone from the metadata (Tansu's answer for it differs; "
                                 "see test-broker.md)")
def test_a_source_topic_deleted_while_mirrored_is_not_created_again(tmp_path, source, target, files):
    """kafka-python asks brokers to create missing topics it tracks (brokers do so by default,
    with their own partition count); the raw path must not bring back a deleted source topic."""
    topic = source.create_topic("raw-deleted", partitions=2)
    source.seed(topic, make_records(200))
    mirror = MirrorProcess(mirror_args(files, topic, RAW), tmp_path / "m.log")
    try:
        target.read_all(topic, expected=200, timeout_s=60)
        source.delete_topics(topic)
        mirror.wait_for_log(f"Topic {topic} is not in the source cluster's metadata (deleted?)")
        assert not source.topic_exists(topic)
    finally:
        assert mirror.stop(signal.SIGTERM) == 143, mirror.log()
    assert mirror.log().count("is not in the source cluster's metadata") == 1  # once, not per refresh
    assert "not found in cluster metadata" not in mirror.log()


@pytest.mark.needs_kafka_feature("a committed offset set by the admin API")
def test_a_backlog_of_batches_of_one_record_takes_the_record_path_in_order(tmp_path, source, target, files):
    """Forwarded one per produce request, batches of one record caught up slower than a producer
    writes them: a fetch answer with a backlog of them is one record path range."""
    from mirror_maker.shallow.fetcher import BACKLOG_BATCHES, SMALL_BATCHES

    topic = source.create_topic("raw-tiny", partitions=1)
    records = make_records(2 * BACKLOG_BATCHES)
    source.seed(topic, records, partition=0, **{"linger.ms": 0, "batch.num.messages": 1})
    mirror = MirrorProcess(mirror_args(files, topic, RAW, "--exit.when.caught.up", "--log.level", "DEBUG"),
                           tmp_path / "m.log")
    assert mirror.wait(90) == 0, mirror.log()
    rows = target.read_all(topic, expected=len(records))
    assert [rec.value for _p, _o, rec in rows] == [r.value for r in records]
    assert source.committed(files.group, topic) == {0: len(records)}
    assert re.search(rf"record path took {topic}-0 offsets 0\.\.\d+ \({SMALL_BATCHES}, \d+ batches\)", mirror.log())
    if not on_tansu():
        assert len(raw_batches(source, topic, 1)[0]) == len(records)
        assert len(raw_batches(target, topic, 1)[0]) < len(records) / 10  # batched again


def test_a_committed_offset_inside_a_batch(tmp_path, source, target, files):
    from confluent_kafka import TopicPartition as KafkaTopicPartition
    from confluent_kafka import ConsumerGroupTopicPartitions

    topic = source.create_topic("raw-inside", partitions=1)
    records = make_records(1000)
    source.seed(topic, records, partition=0, **{"linger.ms": 200, "batch.num.messages": 1000})
    request = ConsumerGroupTopicPartitions(files.group, [KafkaTopicPartition(topic, 0, 250)])
    source.admin().alter_consumer_group_offsets([request])[files.group].result()
    mirror = MirrorProcess(mirror_args(files, topic, RAW, "--exit.when.caught.up"), tmp_path / "m.log")
    assert mirror.wait(90) == 0, mirror.log()
    rows = target.read_all(topic, expected=750)
    assert [rec.value for _p, _o, rec in rows] == [r.value for r in records[250:]]  # none before, in order
    assert source.committed(files.group, topic) == {0: 1000}


@pytest.mark.needs_kafka_feature("message.timestamp.type=LogAppendTime")
def test_a_log_append_time_source_keeps_the_source_times_through_the_record_path(tmp_path, source, target, files):
    """Every batch of a LogAppendTime topic carries the broker's time, which a target would
    replace: all of them take the record path, as ranges of batches, and the records keep the
    source's times, in order, in the same partitions."""
    topic = source.create_topic("raw-append-time", partitions=2, config={"message.timestamp.type": "LogAppendTime"})
    source.seed(topic, make_records(3000), **{"compression.type": "lz4", "linger.ms": 20, "batch.num.messages": 200})
    kept = source.read_all(topic, expected=3000)
    mirror = MirrorProcess(mirror_args(files, topic, RAW, "--exit.when.caught.up", "--log.level", "DEBUG"),
                           tmp_path / "m.log")
    assert mirror.wait(120) == 0, mirror.log()
    rows = target.read_all(topic, expected=3000)
    assert per_partition(rows) == per_partition(kept)  # the source's append times, not the producer's
    ranges = re.findall(r"record path took .* \(LogAppendTime, (\d+) batches\)", mirror.log())
    assert ranges and any(int(batches) > 1 for batches in ranges)


@pytest.mark.needs_kafka_feature("message.timestamp.type=LogAppendTime")
def test_a_log_append_time_source_with_traffic_is_committed_as_it_flows(tmp_path, source, target, files):
    """Every batch takes the record path while records keep coming: commits move while the
    traffic goes on, and every acknowledged record arrives."""
    topic = source.create_topic("raw-append-live", partitions=2, config={"message.timestamp.type": "LogAppendTime"})
    stream = BackgroundProducer(source, topic, rate=500).start()
    mirror = MirrorProcess(mirror_args(files, topic, RAW, "--offset.commit.interval.ms", "500"), tmp_path / "m.log")
    try:
        wait_until(lambda: sum(source.committed(files.group, topic).values()) >= 1000, 60,
                   "commits while the records flow", step_s=0.5)
    finally:
        acked = stream.stop()
    try:
        mirrored_and_committed(source, target, files.group, topic, acked)
    finally:
        assert mirror.stop(signal.SIGTERM) == 143, mirror.log()


@pytest.mark.needs_own_brokers("the TLS listener and SCRAM users of the test clusters")
@pytest.mark.needs_kafka_feature("SASL and a TLS listener")
def test_over_scram_and_tls(tmp_path, source, target):
    from .test_security import sasl
    from .tls import tls_target as reach_over_tls

    with reach_over_tls(tmp_path, target) as (tls_cluster, tls, _front):
        topic = source.create_topic("raw-sec", partitions=2)
        records = make_records(500)
        source.seed(topic, records, **{"compression.type": "zstd"})
        files = mirror_files(tmp_path, source, tls_cluster, consumer=sasl(source, "admin", "SCRAM-SHA-512"), producer={
            "security.protocol": "SSL", "ssl.truststore.location": tls.truststore_jks,
            "ssl.truststore.password": tls.store_password, "ssl.keystore.location": tls.keystore_jks,
            "ssl.keystore.password": tls.store_password, "ssl.key.password": tls.key_password,
            "ssl.endpoint.identification.algorithm": "https"})
        mirror = MirrorProcess(mirror_args(files, topic, RAW, "--exit.when.caught.up"), tmp_path / "m.log")
        assert mirror.wait(90) == 0, mirror.log()
        assert len(target.read_all(topic, expected=500)) == 500
        for secret in ("admin-secret", tls.store_password, tls.key_password):
            assert secret not in mirror.log()


def test_two_instances_in_one_group(tmp_path, source, target, files):
    topic = source.create_topic("raw-pair", partitions=4)
    stream = BackgroundProducer(source, topic, rate=400).start()
    args = mirror_args(files, topic, RAW, "--offset.commit.interval.ms", "500")
    a = MirrorProcess(args, tmp_path / "a.log")
    b = None
    try:
        a.wait_for_log("Assigned", 30)
        b = MirrorProcess(args, tmp_path / "b.log")
        b.wait_for_log("Assigned", 30)
        a.wait_for_log("Revoked", 30)
        assert a.stop(signal.SIGTERM) == 143, a.log()
    finally:
        acked = stream.stop()
    try:
        mirrored_and_committed(source, target, files.group, topic, acked)
    finally:
        if b is not None:
            assert b.stop(signal.SIGTERM) == 143, b.log()


@pytest.mark.parametrize("timestamps", [
    "CreateTime",  # every batch forwarded as it is
    pytest.param("LogAppendTime", marks=pytest.mark.needs_kafka_feature("message.timestamp.type=LogAppendTime")),
])  # every batch through the record path: the handler decides there too
def test_a_raw_handler_renames_and_drops_batches(tmp_path, source, target, files, timestamps):
    from .harness import ROOT

    config = {"message.timestamp.type": timestamps}
    topic = source.create_topic("raw-ren", partitions=2, config=config)
    dropped = source.create_topic(name=f"{topic}.tmp", config=config)
    source.seed(topic, make_records(300))
    source.seed(dropped, make_records(30))
    mirror = MirrorProcess(mirror_args(files, f"{topic}.*", RAW, "--exit.when.caught.up", "--message.handler",
                                       "raw_batch_handler.PrefixTopics", "--message.handler.args", "dc1."),
                           tmp_path / "m.log", env={"PYTHONPATH": str(ROOT / "examples")})
    assert mirror.wait(90) == 0, mirror.log()
    assert len(target.read_all(f"dc1.{topic}", expected=300)) == 300
    assert target.partitions(f"dc1.{topic}") == 2
    assert not any(target.topic_exists(name) for name in (topic, dropped, f"dc1.{dropped}"))
    assert sum(source.committed(files.group, dropped).values()) == 30  # dropped, still committed


def test_a_raw_handler_sending_to_a_topic_it_does_not_name_is_one_clear_line(tmp_path, source, target, files):
    """The target topics a raw handler names (``target_topics``) are created with the source's
    partitions and their limits read before anything is sent; a batch sent to another topic
    would wait for it. One line, exit 255, nothing committed."""
    topic = source.create_topic("raw-undeclared", partitions=4)
    source.seed(topic, make_records(40))
    mirror = MirrorProcess(mirror_args(files, topic, RAW, "--message.handler", "raw_plugins.Undeclared"),
                           tmp_path / "m.log", env={"PYTHONPATH": str(Path(__file__).parent)})
    assert mirror.wait(60) == 255, mirror.log()
    errors = [line for line in mirror.log().splitlines() if " ERROR " in line]
    assert len(errors) == 1 and f"to {topic}.elsewhere, a topic its target_topics('{topic}') does not name" \
        in errors[0], errors
    assert "Traceback" not in mirror.log() and source.committed(files.group, topic) == {}


def test_a_record_handler_with_raw_bytes_is_one_line_and_exit_1(tmp_path, files):
    from .harness import ROOT

    mirror = MirrorProcess(mirror_args(files, "t", RAW, "--message.handler", "renaming_handler.PrefixTopics",
                                       "--message.handler.args", "dc1."),
                           tmp_path / "m.log", env={"PYTHONPATH": str(ROOT / "examples")})
    assert mirror.wait(60) == 1, mirror.log()
    errors = [line for line in mirror.log().splitlines() if " ERROR " in line]
    assert len(errors) == 1 and "write handle_batch(batch) (KIP-712)" in errors[0]


@pytest.mark.needs_kafka_feature("partition counts the broker keeps")
def test_a_target_topic_with_fewer_partitions_is_one_clear_line(tmp_path, source, target, files):
    topic = source.create_topic("raw-fewer", partitions=4)
    target.create_topic(name=topic, partitions=2)
    source.seed(topic, make_records(20))
    mirror = MirrorProcess(mirror_args(files, topic, RAW), tmp_path / "m.log")
    assert mirror.wait(60) == 255, mirror.log()
    errors = [line for line in mirror.log().splitlines() if " ERROR " in line]
    assert len(errors) == 1 and f"target topic {topic} has 2 partitions, fewer than the 4" in errors[0], errors


def test_two_streams_mirror_everything_and_exit_when_caught_up(tmp_path, source, target, files):
    topic = source.create_topic("raw-streams", partitions=4)
    records = make_records(2000)
    source.seed(topic, records, **{"compression.type": "lz4"})
    mirror = MirrorProcess(mirror_args(files, topic, RAW, "--num.streams", "2", "--exit.when.caught.up"),
                           tmp_path / "m.log")
    assert mirror.wait(90) == 0, mirror.log()
    assert "Caught up: 2000 records" in mirror.log()
    assert per_partition(target.read_all(topic, expected=2000)) == per_partition(source.read_all(topic))
    assert sum(source.committed(files.group, topic).values()) == 2000
