"""MirrorMaker 2's topic capabilities without brokers: the policies' names and rules (the cases
of MirrorMaker 2's own ReplicationPolicy tests), config and ACL conversion, the options, and the
names the mirror thread sends to."""

import re
from dataclasses import replace

import pytest
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, ConfigEntry, ConfigSource,
                                   ResourcePatternType, ResourceType)

from mirror_maker.cli.command import invoke
from mirror_maker.config.replication import ReplicationOptions, compile_list
from mirror_maker.config.spec import DEFAULT_CONFIG_EXCLUDE
from mirror_maker.errors import PluginLoadError
from mirror_maker.replication.acls import target_bindings
from mirror_maker.replication.policies import (DefaultReplicationPolicy, IdentityReplicationPolicy, TopicRules,
                                               load_policy, topic_rules)
from mirror_maker.replication.topic_configs import changes, copied
from mirror_maker.records import TopicPartition

from .stream_parts import Consumer, Msg, config, mirror, stream

ANY = re.compile(".*")


class SuffixPolicy:
    """A user's policy with only the three naming methods: <topic>@<alias>."""

    def format_remote_topic(self, alias, topic):
        return f"{topic}@{alias}"

    def topic_source(self, topic):
        return topic.rsplit("@", 1)[1] if "@" in topic else None

    def upstream_topic(self, topic):
        return topic.rsplit("@", 1)[0] if "@" in topic else None


def test_default_policy_names_and_sources():
    policy = DefaultReplicationPolicy()
    assert policy.format_remote_topic("a", "orders") == "a.orders"
    assert policy.topic_source("a.orders") == "a" and policy.upstream_topic("a.orders") == "orders"
    assert policy.topic_source("orders") is None and policy.upstream_topic("orders") is None
    assert policy.topic_source("b.a.orders") == "b" and policy.original_topic("b.a.orders") == "orders"
    assert policy.topic_source("orders.") is None  # Java's split drops trailing empty pieces
    assert DefaultReplicationPolicy("_").format_remote_topic("a", "x") == "a_x"


def test_internal_topics_as_mirror_maker_2_names_them():
    policy = DefaultReplicationPolicy()
    assert policy.checkpoints_topic("a") == "a.checkpoints.internal"
    assert policy.offset_syncs_topic("b") == "mm2-offset-syncs.b.internal"
    for topic in ("a.checkpoints.internal", "mm2-offset-syncs.b.internal", "__consumer_offsets", ".hidden",
                  "connect-offsets-internal", "x.internal"):
        assert policy.is_internal_topic(topic), topic
    assert not policy.is_internal_topic("orders")
    assert policy.is_heartbeats_topic("heartbeats") and policy.is_heartbeats_topic("a.b.heartbeats")
    underscore = DefaultReplicationPolicy("_")
    assert underscore.checkpoints_topic("a") == "a_checkpoints_internal"


def test_identity_policy_keeps_names_but_heartbeats():
    policy = IdentityReplicationPolicy(source_alias="a")
    assert policy.format_remote_topic("a", "my.orders") == "my.orders"
    assert policy.topic_source("my.orders") == "a" and policy.upstream_topic("my.orders") == "my.orders"
    assert policy.format_remote_topic("a", "heartbeats") == "a.heartbeats"


def test_cycles_are_detected_at_any_hop_and_never_with_identity():
    rules = TopicRules(DefaultReplicationPolicy(), "b", "a", mm2_rules=True)
    assert rules.is_cycle("a.orders") and rules.is_cycle("c.a.orders")
    assert not rules.is_cycle("orders") and not rules.is_cycle("c.orders")
    assert rules.selects(ANY, "orders") and not rules.selects(ANY, "a.orders")
    assert not rules.selects(ANY, "__consumer_offsets") and not rules.selects(ANY, "b.checkpoints.internal")
    assert rules.selects(re.compile("orders"), "c.heartbeats")  # heartbeats always, as MirrorMaker 2
    identity = TopicRules(IdentityReplicationPolicy(source_alias="b"), "b", "a", mm2_rules=True)
    assert not identity.is_cycle("a.orders")


def test_without_a_policy_names_and_selection_are_mirror_maker_v1s():
    rules = topic_rules(ReplicationOptions())
    assert rules.remote("heartbeats") == "heartbeats" and rules.remote("a.x") == "a.x"
    assert not rules.mm2_rules and rules.selects(ANY, "x.internal")


def test_policies_by_name_or_dotted_path():
    assert isinstance(load_policy("default"), DefaultReplicationPolicy)
    assert isinstance(load_policy("org.apache.kafka.connect.mirror.IdentityReplicationPolicy"),
                      IdentityReplicationPolicy)
    rules = topic_rules(ReplicationOptions(policy="tests.unit.test_replication.SuffixPolicy", source_alias="b",
                                           target_alias="a"))
    assert rules.remote("orders") == "orders@b"
    assert rules.is_cycle("orders@a") and not rules.selects(ANY, "x-internal")  # defaults filled in
    with pytest.raises(PluginLoadError, match="has no format_remote_topic"):
        load_policy("tests.unit.test_replication.ANY")
    with pytest.raises(PluginLoadError, match="cannot load"):
        load_policy("no.such.Policy")


def test_a_bad_policy_or_option_is_one_line_and_exit_1(tmp_path, capsys):
    consumer, producer = tmp_path / "c.properties", tmp_path / "p.properties"
    consumer.write_text("bootstrap.servers=localhost:1\ngroup.id=g\n")
    producer.write_text("bootstrap.servers=localhost:2\n")
    base = ["--consumer.config", str(consumer), "--producer.config", str(producer), "--include", "x"]
    for extra, message in ((["--replication.policy.class", "no.such.Policy"], "--replication.policy.class"),
                           (["--replication.policy.class", "default", "--source.cluster.alias", "a"],
                            "needs both --source.cluster.alias and --target.cluster.alias"),
                           (["--sync.topic.acls.enabled", "maybe"], "is not true or false"),
                           (["--source.cluster.alias", "a", "--target.cluster.alias", "a"], "both 'a'"),
                           (["--sync.topic.configs.enabled", "true", "--config.properties.exclude", "("],
                            "invalid regex")):
        assert invoke(base + extra) == 1, extra
        err = capsys.readouterr().err
        assert message in err and "Traceback" not in err, err


def test_an_option_without_its_switch_is_one_warn_and_checkpoints_imply_offset_syncs(caplog):
    """A MirrorMaker 2 user expects the switches on (MirrorMaker 2's defaults): an interval given
    without its switch is a WARN, not a refusal, and checkpoints turn offset syncs on."""
    from mirror_maker.cli.command import _replication_options

    options = _replication_options({"refresh.topics.interval.seconds": 5}, {"refresh_topics_interval_s": 5})
    assert not options.refresh_topics and options.refresh_topics_interval_s == 5
    assert "--refresh.topics.interval.seconds is only used with --refresh.topics.enabled true: ignored" \
        in caplog.text
    options = _replication_options({"sync.group.offsets.enabled": True}, {"sync_group_offsets": True})
    assert options.sync_group_offsets and options.emit_checkpoints and options.emit_offset_syncs
    with pytest.raises(Exception, match="needs --emit.offset-syncs.enabled true, which is given as false"):
        _replication_options({"emit.checkpoints.enabled": True, "emit.offset-syncs.enabled": False},
                             {"emit_checkpoints": True, "emit_offset_syncs": False})


def test_the_identity_policy_warns_that_it_cannot_detect_cycles():
    from mirror_maker.replication.policies import cycle_warning

    identity = topic_rules(ReplicationOptions(policy="identity", source_alias="a", target_alias="b"))
    assert "cannot detect cycles: a flow a->b" in cycle_warning(identity)
    assert cycle_warning(topic_rules(ReplicationOptions(policy="default", source_alias="a", target_alias="b"))) is None
    assert cycle_warning(topic_rules(ReplicationOptions())) is None  # MirrorMaker v1: no MirrorMaker 2 rules


def test_help_groups_the_mirror_maker_2_options(capsys):
    invoke(["--help"])
    err = capsys.readouterr().err
    section = err[err.index("MirrorMaker 2 capabilities"):err.index("Spark mode")]
    for option in ("--replication.policy.class", "--sync.topic.configs.enabled", "--refresh.topics.enabled",
                   "--sync.topic.acls.enabled", "--replication.factor", "--config.properties.exclude"):
        assert option in section


def entry(name, value, source=ConfigSource.DYNAMIC_TOPIC_CONFIG, **flags):
    return ConfigEntry(name, value, source=source.value, **flags)  # described entries carry numbers


def test_configs_copied_as_mirror_maker_2_copies_them():
    exclude = compile_list(DEFAULT_CONFIG_EXCLUDE, "x")
    source = {"retention.ms": entry("retention.ms", "1000"),
              "cleanup.policy": entry("cleanup.policy", "delete", ConfigSource.DEFAULT_CONFIG),
              "min.insync.replicas": entry("min.insync.replicas", "2"),  # excluded by default
              "segment.bytes": entry("segment.bytes", "1", ConfigSource.STATIC_BROKER_CONFIG),
              "secret": entry("secret", "x", is_sensitive=True),
              "ro": entry("ro", "x", is_read_only=True)}
    assert copied(source, exclude) == {"retention.ms": "1000", "cleanup.policy": None}
    target = {"retention.ms": entry("retention.ms", "5"), "cleanup.policy": entry("cleanup.policy", "compact")}
    assert changes(copied(source, exclude), target) == [("cleanup.policy", None), ("retention.ms", "1000")]
    synced = {"retention.ms": entry("retention.ms", "1000"),
              "cleanup.policy": entry("cleanup.policy", "delete", ConfigSource.DEFAULT_CONFIG)}
    assert changes(copied(source, exclude), synced) == []


def test_acls_copied_as_mirror_maker_2_copies_them():
    def acl(topic, operation, permission=AclPermissionType.ALLOW, pattern=ResourcePatternType.LITERAL):
        return AclBinding(ResourceType.TOPIC, topic, pattern, "User:alice", "*", operation, permission)
    source = [acl("orders", AclOperation.READ), acl("orders", AclOperation.ALL), acl("orders", AclOperation.WRITE),
              acl("orders", AclOperation.READ, AclPermissionType.DENY), acl("ord", AclOperation.READ,
                                                                             pattern=ResourcePatternType.PREFIXED),
              acl("other", AclOperation.READ)]
    copied_acls = target_bindings(source, {"orders": {"a.orders"}})
    assert [(b.name, b.operation, b.permission_type) for b in copied_acls] == [
        ("a.orders", AclOperation.READ, AclPermissionType.ALLOW), ("a.orders", AclOperation.READ, AclPermissionType.ALLOW),
        ("a.orders", AclOperation.READ, AclPermissionType.DENY)]  # a DENY dropped would widen access
    deny_all = target_bindings([acl("orders", AclOperation.ALL, AclPermissionType.DENY)], {"orders": {"a.orders"}})
    assert [(b.operation, b.permission_type) for b in deny_all] == [(AclOperation.ALL, AclPermissionType.DENY)]


def test_the_fast_path_and_a_user_handler_send_to_the_policys_names():
    rules = topic_rules(ReplicationOptions(policy="default", source_alias="a", target_alias="b"))
    worker, producer, _ = stream(remote=rules.remote)
    mirror(worker, [Msg("t", 0, 5), Msg("t", 1, 9)])
    assert [sent[0] for sent in producer.sent] == ["a.t", "a.t"]

    class Rename:
        def handle(self, record):
            from mirror_maker.records import ProducerRecord
            return [ProducerRecord(record.topic + "-v2", record.value)]

        def target_topics(self, topic):
            return [topic + "-v2"]

    worker, producer, _ = stream(Rename(), remote=rules.remote)
    mirror(worker, [Msg("t", 0, 5)])
    assert producer.sent[0][0] == "a.t-v2"  # the handler renames, the policy prefixes
    worker.prepare_targets([TopicPartition("t", 0)])
    assert worker._shared.target_topics.ensured == [{"t": ["a.t-v2"]}]


@pytest.mark.parametrize("refresh, start", [(True, 3), (False, 50)])
def test_a_partition_added_while_mirroring_starts_at_its_beginning(refresh, start):
    conf = replace(config(**{"auto.offset.reset": "latest"}), replication=ReplicationOptions(refresh_topics=refresh))
    consumer = Consumer(committed={0: 12}, watermarks=(3, 50))
    worker, _, _ = stream(assigned=(), conf=conf, consumer=consumer)
    worker.parts.membership._on_assign(consumer, [KafkaTopicPartition("t", 1)])  # partition 0 has an offset
    assert consumer.assigned_with == ("assign", [(1, start)])
    consumer = Consumer(committed={}, watermarks=(3, 50))
    fresh, _, _ = stream(assigned=(), conf=conf, consumer=consumer)
    fresh.parts.membership._on_assign(consumer, [KafkaTopicPartition("t", 0), KafkaTopicPartition("t", 1)])
    assert consumer.assigned_with == ("assign", [(0, 50), (1, 50)])  # a new topic: auto.offset.reset


def test_an_assignment_waiting_for_the_targets_ends_stops_waiting_at_a_stop():
    """Offset syncs read where a new partition's records will land, retrying a target that cannot
    say yet for up to 10 s; a stop ends that wait (the partition then starts without syncs)."""
    import threading

    from confluent_kafka import KafkaError, KafkaException

    from ..integration.harness import wait_until

    from mirror_maker.engine.state import RunState
    from mirror_maker.replication.offset_syncs import OffsetSyncWriter

    class AwayAdmin:
        asked = 0

        def list_offsets(self, request, request_timeout):
            AwayAdmin.asked += 1
            raise KafkaException(KafkaError(KafkaError._TRANSPORT))

    state = RunState()
    writer = OffsetSyncWriter(None, AwayAdmin(), str, 100, state)
    waiting = threading.Thread(target=writer.assigned, args=([TopicPartition("t", 0)],))
    waiting.start()
    wait_until(lambda: AwayAdmin.asked >= 2, 10, "the wait for the target's end offsets")
    state.request_stop()
    waiting.join(5)  # the wait itself lasts 10 s
    assert not waiting.is_alive(), "the stop did not end the wait"
    assert writer._partitions[TopicPartition("t", 0)].base is None
