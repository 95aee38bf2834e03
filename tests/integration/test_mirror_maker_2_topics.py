"""MirrorMaker 2's topic capabilities on Apache Kafka (Tansu has no CreatePartitions, no config
enforcement, no ACLs): replication policies and cycle detection, config sync, partition follow,
ACL sync, and the same results as Kafka's MirrorMaker 2 on the same clusters."""

from __future__ import annotations

import sys
from collections import Counter

import pytest
from confluent_kafka.admin import (AclBinding, AclBindingFilter, AclOperation, AclPermissionType,
                                   AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, NewPartitions,
                                   ResourcePatternType, ResourceType)

from .harness import (BIN, MirrorProcess, make_records, mirror_args, mirror_files, unique, values,
                      wait_until)

pytestmark = pytest.mark.needs_kafka_feature("CreatePartitions, topic configs and ACLs")
OWN_ACLS = pytest.mark.needs_own_brokers("an authorizer for the ACLs the test sets up")

SYNC_FAST = ("--sync.topic.configs.enabled", "true", "--sync.topic.configs.interval.seconds", "1")


def topic_configs(cluster, topic):
    """The configs set on the topic itself."""
    resource = ConfigResource(ResourceType.TOPIC, topic)
    entries = cluster.admin().describe_configs([resource], request_timeout=30)[resource].result()
    return {name: e.value for name, e in entries.items() if e.source == ConfigSource.DYNAMIC_TOPIC_CONFIG.value}


def alter(cluster, topic, **changes):
    """Set (a value) or delete (None) topic configs, given with underscores for dots."""
    entries = [ConfigEntry(name.replace("_", "."), value, incremental_operation=AlterConfigOpType.DELETE
                           if value is None else AlterConfigOpType.SET) for name, value in changes.items()]
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=entries)
    cluster.admin().incremental_alter_configs([resource], request_timeout=30)[resource].result()


def topic_acls(cluster, topic):
    found = cluster.admin().describe_acls(AclBindingFilter(
        ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, None, None, AclOperation.ANY,
        AclPermissionType.ANY), request_timeout=30).result()
    return sorted((b.principal, b.operation.name, b.permission_type.name) for b in found)


def test_default_policy_names_target_topics_after_the_source_alias(tmp_path, source, target, files):
    topic = source.create_topic("orders", partitions=2)
    internal = source.create_topic(name=f"{topic}.internal", partitions=1)
    records = make_records(200)
    source.seed(topic, records)
    source.seed(internal, make_records(5, "i"))
    mirror = MirrorProcess(mirror_args(files, f"{topic}.*", "--replication.policy.class", "default",
                                       "--source.cluster.alias", "a", "--target.cluster.alias", "b",
                                       "--exit.when.caught.up"), tmp_path / "mirror.log")
    assert mirror.wait(120) == 0, mirror.log()
    assert sorted(values(target.read_values(f"a.{topic}", [r.value for r in records]))) == \
        sorted(r.value for r in records)
    assert target.partitions(f"a.{topic}") == 2
    assert not target.topic_exists(topic) and not target.topic_exists(f"a.{internal}")  # internal: never


def test_raw_mode_sends_batches_to_the_policys_names(tmp_path, source, target, files):
    topic = source.create_topic("raw-named", partitions=2)
    records = make_records(300)
    source.seed(topic, records, **{"compression.type": "lz4", "linger.ms": 50})
    mirror = MirrorProcess(mirror_args(files, topic, "--use.raw.bytes", "--replication.policy.class", "default",
                                       "--source.cluster.alias", "a", "--target.cluster.alias", "b",
                                       "--exit.when.caught.up"), tmp_path / "mirror.log")
    assert mirror.wait(120) == 0, mirror.log()
    rows = target.read_values(f"a.{topic}", [r.value for r in records])
    by_partition = {p: sorted(rec.value for q, _o, rec in rows if q == p) for p in (0, 1)}
    source_rows = source.read_all(topic)
    assert by_partition == {p: sorted(rec.value for q, _o, rec in source_rows if q == p) for p in (0, 1)}
    assert not target.topic_exists(topic)


def test_identity_policy_keeps_names(tmp_path, source, target, files):
    topic = source.create_topic("dotted.orders", partitions=1)
    records = make_records(50)
    source.seed(topic, records)
    mirror = MirrorProcess(mirror_args(files, topic, "--replication.policy.class", "identity",
                                       "--exit.when.caught.up"), tmp_path / "mirror.log")
    assert mirror.wait(120) == 0, mirror.log()
    assert "The identity replication policy cannot detect cycles" in mirror.log()
    assert len(target.read_values(topic, [r.value for r in records])) == 50


def test_two_way_mirrors_with_the_default_policy_never_loop(tmp_path, source, target):
    prefix = unique("loop")
    on_a, on_b = source.create_topic(name=f"{prefix}-a"), target.create_topic(name=f"{prefix}-b")
    a_records, b_records = make_records(100, "a"), make_records(100, "b")
    source.seed(on_a, a_records)
    target.seed(on_b, b_records)
    include = f".*{prefix}.*"
    a_to_b = MirrorProcess(mirror_args(mirror_files(tmp_path, source, target), include, "--replication.policy.class",
                                       "default", "--source.cluster.alias", "A", "--target.cluster.alias", "B"),
                           tmp_path / "a-to-b.log")
    b_to_a = MirrorProcess(mirror_args(mirror_files(tmp_path, target, source), include, "--replication.policy.class",
                                       "default", "--source.cluster.alias", "B", "--target.cluster.alias", "A"),
                           tmp_path / "b-to-a.log")
    try:
        target.read_values(f"A.{on_a}", [r.value for r in a_records])
        source.read_values(f"B.{on_b}", [r.value for r in b_records])
        # Topics made after the remote ones exist: once they are mirrored, each mirror has listed
        # the other's remote topic and left it alone.
        late_a, late_b = source.create_topic(name=f"{prefix}-late-a"), target.create_topic(name=f"{prefix}-late-b")
        late_a_records, late_b_records = make_records(1, "la"), make_records(1, "lb")
        source.seed(late_a, late_a_records)
        target.seed(late_b, late_b_records)
        target.read_values(f"A.{late_a}", [r.value for r in late_a_records])
        source.read_values(f"B.{late_b}", [r.value for r in late_b_records])
        assert not source.topic_exists(f"B.A.{on_a}") and not target.topic_exists(f"A.B.{on_b}")
        for cluster, topic, records in ((target, f"A.{on_a}", a_records), (source, f"B.{on_b}", b_records)):
            counts = Counter(values(cluster.read_all(topic, timeout_s=30)))
            assert counts == Counter(r.value for r in records)  # each once
    finally:
        assert a_to_b.stop() == 143 and b_to_a.stop() == 143


def test_configs_synced_at_creation_and_after_a_change(tmp_path, source, target, files):
    topic = source.create_topic("configs", partitions=1)
    alter(source, topic, retention_ms="12345678", cleanup_policy="compact", min_insync_replicas="1")
    source.seed(topic, make_records(10))
    mirror = MirrorProcess(mirror_args(files, topic, *SYNC_FAST), tmp_path / "mirror.log")
    try:
        wait_until(lambda: target.topic_exists(topic), 60, "the target topic")
        created = topic_configs(target, topic)
        assert created.get("retention.ms") == "12345678" and created.get("cleanup.policy") == "compact"
        assert "min.insync.replicas" not in created  # MirrorMaker 2's default exclusion
        alter(source, topic, retention_ms="999999", cleanup_policy=None)
        wait_until(lambda: topic_configs(target, topic).get("retention.ms") == "999999"
                   and "cleanup.policy" not in topic_configs(target, topic), 30, "the change on the target")
        assert "Syncing the configs of target topic" in mirror.log()
    finally:
        assert mirror.stop() == 143


def test_partitions_followed_and_new_partitions_mirrored_from_their_start(tmp_path, source, target):
    topic = source.create_topic("grow", partitions=2)
    files = mirror_files(tmp_path, source, target, consumer={"auto.offset.reset": "latest"})
    mirror = MirrorProcess(mirror_args(files, topic, "--refresh.topics.enabled", "true",
                                       "--refresh.topics.interval.seconds", "1",
                                       "--message.handler", "mirror_maker.handlers.PartitionPreservingHandler"),
                           tmp_path / "mirror.log")
    try:
        mirror.wait_for_log("Resetting offset for partition", 60)
        first = make_records(100, "first")
        source.seed(topic, first)
        target.read_values(topic, [r.value for r in first])
        source.admin().create_partitions([NewPartitions(topic, 4)], request_timeout=30)[topic].result()
        wait_until(lambda: source.partitions(topic) == 4, 15, "4 source partitions")
        added = make_records(40, "added")
        source.seed(topic, added[:20], partition=2)  # before the mirror has the new partitions
        source.seed(topic, added[20:], partition=3)
        wait_until(lambda: target.partitions(topic) == 4, 30, "the target topic at 4 partitions")
        rows = target.read_values(topic, [r.value for r in first + added])
        assert {p for p, _o, rec in rows if rec.value.startswith(b"added")} == {2, 3}
        assert "grew from 2 to 4 partitions" in mirror.log()
        assert "a partition added while mirroring: from its start" in mirror.log()
    finally:
        assert mirror.stop() == 143


@OWN_ACLS
def test_topic_acls_copied_never_allow_write_all_as_read_deny_kept(tmp_path, source, target, files):
    topic = source.create_topic("acls", partitions=1)
    bindings = [AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, f"User:{user}", "*", operation,
                           permission) for user, operation, permission in (
        ("reader", AclOperation.READ, AclPermissionType.ALLOW), ("owner", AclOperation.ALL, AclPermissionType.ALLOW),
        ("writer", AclOperation.WRITE, AclPermissionType.ALLOW), ("banned", AclOperation.READ, AclPermissionType.DENY))]
    for future in source.admin().create_acls(bindings, request_timeout=30).values():
        future.result()
    source.seed(topic, make_records(5))
    mirror = MirrorProcess(mirror_args(files, topic, "--replication.policy.class", "default", "--source.cluster.alias",
                                       "a", "--target.cluster.alias", "b", "--sync.topic.acls.enabled", "true", "--sync.topic.acls.interval.seconds",
                                       "1"), tmp_path / "mirror.log")
    try:
        expected = [("User:banned", "READ", "DENY"), ("User:owner", "READ", "ALLOW"), ("User:reader", "READ", "ALLOW")]
        wait_until(lambda: topic_acls(target, f"a.{topic}") == expected, 60, "the copied ACLs")
    finally:
        assert mirror.stop() == 143


def test_a_bad_policy_class_is_one_line_and_exit_1(tmp_path, files):
    import subprocess

    done = subprocess.run([sys.executable, str(BIN), *mirror_args(files, "x", "--replication.policy.class",
                                                                  "org.example.NoSuchPolicy")],
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 1
    lines = [line for line in done.stderr.splitlines() if "ERROR" in line]
    assert len(lines) == 1 and "--replication.policy.class" in lines[0] and "Traceback" not in done.stderr


@OWN_ACLS
def test_the_same_names_configs_and_acls_as_kafka_mirror_maker_2(tmp_path, source, target, files):
    from ..brokers.java_mirror_makers import mirror_maker_2, mirror_maker_2_properties

    topic = source.create_topic("parity", partitions=3)
    alter(source, topic, retention_ms="7654321", max_message_bytes="500000", min_insync_replicas="1")
    for future in source.admin().create_acls([
            AclBinding(ResourceType.TOPIC, topic, ResourcePatternType.LITERAL, f"User:{user}", "*", operation,
                       permission) for user, operation, permission in (
                ("p", AclOperation.ALL, AclPermissionType.ALLOW), ("p", AclOperation.WRITE, AclPermissionType.ALLOW),
                ("p", AclOperation.DESCRIBE, AclPermissionType.ALLOW), ("q", AclOperation.READ, AclPermissionType.DENY))],
            request_timeout=30).values():
        future.result()
    source.seed(topic, make_records(30))
    ours = MirrorProcess(mirror_args(files, topic, "--replication.policy.class", "default", "--source.cluster.alias",
                                     "ours", "--target.cluster.alias", "b", *SYNC_FAST, "--sync.topic.acls.enabled", "true",
                                     "--sync.topic.acls.interval.seconds", "1"), tmp_path / "ours.log")
    props = mirror_maker_2_properties(source.bootstrap, target.bootstrap, topic, 1, {
        "replication.policy.class": "org.apache.kafka.connect.mirror.DefaultReplicationPolicy",
        "sync.topic.configs.enabled": "true", "sync.topic.acls.enabled": "true",
        "sync.topic.configs.interval.seconds": 1, "sync.topic.acls.interval.seconds": 1},
        aliases=("theirs", unique("t")))
    theirs = MirrorProcess([], tmp_path / "mm2.log", command=mirror_maker_2(props, tmp_path / "mm2"))
    try:
        for name in (f"ours.{topic}", f"theirs.{topic}"):
            wait_until(lambda: target.partitions(name) == 3 and len(target.read_all(name, timeout_s=10)) == 30
                       and topic_acls(target, name), 120, f"{name} mirrored with its ACLs")
        wait_until(lambda: topic_configs(target, f"ours.{topic}") == topic_configs(target, f"theirs.{topic}"),
                   30, "the same configs")
        assert topic_configs(target, f"ours.{topic}") == {"retention.ms": "7654321", "max.message.bytes": "500000"}
        wait_until(lambda: topic_acls(target, f"ours.{topic}") == topic_acls(target, f"theirs.{topic}"), 30,
                   "the same ACLs")
        assert topic_acls(target, f"ours.{topic}") == [("User:p", "DESCRIBE", "ALLOW"), ("User:p", "READ", "ALLOW"),
                                                       ("User:q", "READ", "DENY")]
    finally:
        assert ours.stop() == 143
        theirs.stop()


def test_an_mm2_file_without_syncs_creates_topics_as_mirror_maker_2_and_follows_a_new_partition(tmp_path, source,
                                                                                              target):
    """sync.topic.configs.enabled = false and refresh.topics.enabled = false, as a team's file may
    have them: the compacted source topic still arrives compacted (MirrorMaker 2's createNewTopics
    copies the configs whatever the flag), and a partition added to the source while mirrored is
    mirrored into a target partition grown for it, never a send to a partition the target lacks."""
    from .test_dedicated_mode import BIN as DEDICATED_BIN, write_mm2

    a, b = (side + unique("")[-6:] for side in ("a", "b"))  # this test's own aliases and groups
    topic = source.create_topic("compacted", partitions=2, config={"cleanup.policy": "compact",
                                                                   "min.compaction.lag.ms": "60000"})
    first = make_records(40, "first")
    source.seed(topic, first)
    path = write_mm2(tmp_path / "mm2.properties", {a: source, b: target}, extra={
        f"{a}->{b}.enabled": "true", "topics": topic, "emit.heartbeats.enabled": "false",
        "sync.topic.configs.enabled": "false", "refresh.topics.enabled": "false",
        f"{a}->{b}.consumer.metadata.max.age.ms": 2000})  # the group sees the new partition soon
    mirror = MirrorProcess([], tmp_path / "m.log", command=[sys.executable, str(DEDICATED_BIN), str(path)])
    remote = f"{a}.{topic}"
    try:
        target.read_values(remote, [r.value for r in first], timeout_s=90, evidence=mirror.log_tail)
        assert topic_configs(target, remote) == {"cleanup.policy": "compact", "min.compaction.lag.ms": "60000"}
        source.admin().create_partitions([NewPartitions(topic, 3)], request_timeout=30)[topic].result()
        later = make_records(20, "later")
        source.seed(topic, later, partition=2)
        wait_until(lambda: target.partitions(remote) == 3, 60, f"{remote} grown to 3 partitions",
                   evidence=mirror.log_tail)
        target.read_values(remote, [r.value for r in later], timeout_s=90, evidence=mirror.log_tail)
        assert {p for p, _o, rec in target.read_all(remote, expected=60) if rec.value.startswith(b"later")} == {2}
        assert mirror.process.poll() is None, mirror.log_tail()
        assert f"Target topic {remote} grew from 2 to 3 partitions (as its source topic)" in mirror.log()
    finally:
        assert mirror.stop() == 143, mirror.log_tail()
