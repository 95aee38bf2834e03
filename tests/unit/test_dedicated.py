"""MirrorMaker 2's dedicated mode without brokers: mm2.properties read with MirrorMaker 2's scopes,
defaults and precedence (``MirrorMakerConfig.clusterPairs``, ``clusterProps``,
``connectorBaseConfig``, ``MirrorConnectorConfig.sourceConsumerConfig``), the flows planned from it,
its bad input, the supervisor's rules and the MirrorMaker 2 metric names."""

from __future__ import annotations

import logging
import time
from dataclasses import fields

import pytest

from mirror_maker.cli.dedicated import invoke
from mirror_maker.config.replication import ReplicationOptions
from mirror_maker.config import spec
from mirror_maker.dedicated.flows import RunSettings, plan_flows
from mirror_maker.dedicated.mm2_file import parse
from mirror_maker.errors import ConfigError, HandlerFailed, ClientFailed, SendFailed

BASE = {"clusters": "A, B, C", "A.bootstrap.servers": "127.0.0.1:1", "B.bootstrap.servers": "127.0.0.1:2",
        "C.bootstrap.servers": "127.0.0.1:3"}


class NoKeeper:
    """The supervisor's keeper of Connect's offsets, for flows without brokers."""

    def __init__(self, flow, leading, wait):
        self.finals = 0

    def seen(self, positions):
        assert positions == {}

    def start(self):
        pass

    def final(self):
        self.finals += 1


def flows(targets=None, **props):
    return {flow.name: flow for flow in plan_flows(parse({**BASE, **props}), targets)}


def test_mirror_maker_2_s_defaults_hold_for_an_enabled_flow():
    flow = flows(**{"A->B.enabled": "true"})["A->B"]
    config, options = flow.config, flow.config.replication
    assert flow.enabled and config.group_id == "mm2-A->B"
    assert config.message_handler == "mirror_maker.handlers.PartitionPreservingHandler"  # partitions kept
    assert config.consumer["auto.offset.reset"] == "earliest" and config.consumer["enable.auto.commit"] == "false"
    assert options.policy == spec.DEFAULT_POLICY and (options.source_alias, options.target_alias) == ("A", "B")
    assert options.emit_offset_syncs and options.emit_checkpoints and options.emit_heartbeats
    assert options.sync_topic_configs and options.sync_topic_acls and options.refresh_topics
    assert not options.sync_group_offsets and options.replication_factor == 2 and options.offset_lag_max == 100
    assert config.num_streams == 1 and config.offset_commit_interval_ms == 60000
    assert config.include.fullmatch("orders") and not config.include.fullmatch("x.internal")
    assert not config.include.fullmatch("__consumer_offsets") and not config.include.fullmatch("a.replica")


def test_heartbeats_run_for_every_pair_as_mirror_maker_2_s_herders():
    """clusterPairs: a pair runs if its flow is enabled or its heartbeats are on (globally or per
    pair), so the reverse of A->B writes heartbeats into A."""
    assert sorted(flows(**{"A->B.enabled": "true"})) == ["A->B", "A->C", "B->A", "B->C", "C->A", "C->B"]
    planned = flows(**{"A->B.enabled": "true", "emit.heartbeats.enabled": "false", "B->A.emit.heartbeats.enabled":
                       "true"})
    assert sorted(planned) == ["A->B", "B->A"] and not planned["B->A"].enabled
    assert sorted(flows(["B"], **{"A->B.enabled": "true", "emit.heartbeats.enabled": "false"})) == ["A->B"]
    assert sorted(flows(["A"], **{"A->B.enabled": "true"})) == ["B->A", "C->A"]  # --clusters A: flows into A


def test_a_flow_s_value_wins_over_the_top_level_and_a_worker_setting_is_read_per_target_only(caplog):
    """MirrorMakerConfig: a connector setting is the flow's, else the top level's; a worker setting
    (workerConfig) the target cluster's only: a top-level offset.flush.interval.ms is not read."""
    planned = flows(**{"A->B.enabled": "true", "A->C.enabled": "true", "topics": "orders.*",
                       "A->C.topics": "payments", "tasks.max": "3", "A->C.tasks.max": "1",
                       "A.topics": "ignored", "B.offset.flush.interval.ms": "1000", "offset.flush.interval.ms": "5000",
                       "sync.group.offsets.enabled": "true", "A->C.emit.checkpoints.enabled": "false"})
    ab, ac = planned["A->B"].config, planned["A->C"].config
    assert ab.include.fullmatch("orders-1") and not ab.include.fullmatch("payments")
    assert ac.include.fullmatch("payments") and not ac.include.fullmatch("orders-1")
    assert (ab.num_streams, ac.num_streams) == (3, 1)
    assert (ab.offset_commit_interval_ms, ac.offset_commit_interval_ms) == (1000, 60000)
    assert ("mm2.properties: offset.flush.interval.ms: MirrorMaker 2 reads offset.flush.interval.ms only per "
            "cluster (<alias>.): ignored here") in caplog.text
    assert ab.replication.sync_group_offsets
    assert not ac.replication.emit_checkpoints and not ac.replication.sync_group_offsets  # needs checkpoints


def test_a_feature_whose_needs_are_off_is_off_as_mirror_maker_2_s_connector_would_not_run(caplog):
    planned = flows(**{"A->B.enabled": "true", "A->B.emit.offset-syncs.enabled": "false",
                       "A->C.enabled": "true", "A->C.emit.offset-syncs.enabled": "false",
                       "A->C.emit.checkpoints.enabled": "true"})
    assert not planned["A->B"].config.replication.emit_checkpoints
    assert not planned["A->C"].config.replication.emit_checkpoints
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == ["mm2.properties: A->C: emit.checkpoints.enabled = true needs emit.offset-syncs.enabled = "
                        "true, which is false for this flow: off"]


def test_client_settings_follow_mirror_maker_2_s_precedence():
    """Source consumer: <source>.consumer.* > <source>.<security> > top-level <security> >
    <source>-><target>.consumer.*; producer: <source>-><target>.producer.override.* >
    <target>.producer.* > <target>.<security> > top-level <security>."""
    planned = flows(**{
        "A->B.enabled": "true", "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
        "sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" '
                            'password="p";', "A.security.protocol": "PLAINTEXT",
        "A->B.consumer.security.protocol": "SSL", "A->B.consumer.fetch.min.bytes": "7",
        "A->B.consumer.max.poll.records": "9", "A.consumer.max.poll.records": "11",
        "B.producer.linger.ms": "3", "A->B.producer.override.linger.ms": "4", "B.producer.compression.type": "lz4",
        "A->B.consumer.auto.offset.reset": "latest"})
    config = planned["A->B"].config
    assert config.consumer["security.protocol"].upper() == "PLAINTEXT"
    assert config.consumer["fetch.min.bytes"] == "7" and config.batch_size == 11
    assert config.consumer["auto.offset.reset"] == "latest"
    assert config.producer["linger.ms"] == "4" and config.producer["compression.type"] == "lz4"
    assert config.producer["security.protocol"].upper() == "SASL_PLAINTEXT"  # B has none of its own
    assert planned["B->A"].config.consumer["security.protocol"].upper() == "SASL_PLAINTEXT"


def test_our_consumer_groups_are_never_checkpointed_and_two_flows_may_not_share_one():
    planned = flows(**{"A->B.enabled": "true", "A->C.enabled": "true"})
    exclude = planned["A->B"].config.replication.groups_exclude_pattern
    for ours in ("mm2-A->B", "mm2-A->C", "mm2-B->A-singletons", "mm2-C->A-singletons"):
        assert exclude.fullmatch(ours), ours
    assert not exclude.fullmatch("payments-app") and exclude.fullmatch("console-consumer-1")
    with pytest.raises(ConfigError, match="would share the consumer group shared on A"):
        flows(**{"A->B.enabled": "true", "A->C.enabled": "true", "A.consumer.group.id": "shared"})


@pytest.mark.parametrize("props, message", [
    ({"clusters": ""}, "clusters is missing"),
    ({"A->Z.enabled": "true"}, "A->Z.enabled: not a flow between two clusters listed in clusters"),
    ({"Z.bootstrap.servers": "z:1"}, "'Z' is not one of the clusters (A, B, C)"),
    ({"Z.consumer.fetch.min.bytes": "1"}, "'Z' is not one of the clusters"),
    ({"C.bootstrap.servers": ""}, "C.bootstrap.servers is missing"),
    ({"A->B.enabled": "yes"}, "A->B.enabled = 'yes' is not true or false"),
    ({"A->B.enabled": "true", "tasks.max": "two"}, "tasks.max = 'two' is not a whole number"),
    ({"A->B.enabled": "true", "offset-syncs.topic.location": "moon"}, "is not one of source, target"),
    ({"A->B.enabled": "true", "A->B.topics": "("}, "A->B.topics = ( is an invalid regex list"),
    ({"A->B.enabled": "true", "tasks.max": "0"}, "tasks.max = 0 is not a positive number of threads"),
    ({"A->B.enabled": "true", "A->B.replication.factor": "0"}, "A->B.replication.factor = 0 is not a positive"),
    ({"metrics.port": "70000"}, "metrics.port = 70000 is not a port"),
    ({"A->B.enabled": "true", "replication.policy.class": "no.such.Policy"}, "A->B replication.policy.class"),
    ({"emit.heartbeats.enabled": "false"}, "no source->target replication flows"),
])
def test_bad_input_is_one_line(props, message):
    with pytest.raises(ConfigError) as raised:
        plan_flows(parse({**BASE, **props}, "mm2.properties"))
    assert message in str(raised.value) and "\n" not in str(raised.value)


def test_what_this_tool_does_not_use_is_one_line_each(caplog):
    caplog.set_level(logging.INFO)
    parse({**BASE, "A->B.enabled": "true", "consumer.poll.timeout.ms": "5", "A.topics": "x",
           "A.max.poll.records": "5", "A->B.producer.linger.ms": "5", "A->B.admin.request.timeout.ms": "5",
           "no.such.setting": "1", "config.storage.replication.factor": "1", "B.group.id": "mm2-workers"})
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 6, warnings
    for expected in ("consumer.poll.timeout.ms is not supported", "A.topics: MirrorMaker 2 reads topics only per "
                     "flow (<a>-><b>.) or at the top level", "use A.consumer.max.poll.records", "A->B.producer.linger.ms",
                     "A->B.admin.request.timeout.ms: MirrorMaker 2 reads admin client settings only per cluster",
                     "no.such.setting is not a MirrorMaker 2 setting"):
        assert any(expected in w for w in warnings), expected
    info = [r.getMessage() for r in caplog.records if "Kafka Connect's own settings" in r.getMessage()]
    assert info and "B.group.id, config.storage.replication.factor" in info[0]


def test_exactly_once_per_target_cluster_with_mirror_maker_2_s_defaults():
    planned = flows(**{"A->B.enabled": "true", "B.exactly.once.source.support": "enabled"})
    assert planned["A->B"].config.exactly_once and not planned["C->B"].config.exactly_once
    replication = planned["A->B"].config.replication
    assert replication.emit_offset_syncs and replication.emit_checkpoints  # as MirrorMaker 2 has them
    assert planned["A->B"].config.producer["enable.idempotence"] == "true"


def test_the_identity_policy_warns_once_per_flow(caplog):
    flows(**{"A->B.enabled": "true", "emit.heartbeats.enabled": "false",
             "replication.policy.class": "org.apache.kafka.connect.mirror.IdentityReplicationPolicy"})
    assert sum("cannot detect cycles: a flow A->B" in r.getMessage() for r in caplog.records) == 1


def test_every_setting_of_the_file_is_read_at_scopes_that_exist_and_none_is_also_unsupported():
    for option in spec.OPTIONS:
        if option.prop is not None:
            assert option.prop.scopes and set(option.prop.scopes) <= {spec.TOP, spec.CLUSTER, spec.FLOW}, option.name
    assert not set(spec.UNSUPPORTED) & set(spec.BY_KEY)
    assert {f.name for f in fields(RunSettings)} == {"metrics_port", "metrics_bind", "status_interval_ms",
                                                      "shutdown_timeout_ms"}


def test_a_replication_factor_of_minus_one_is_the_broker_s_default():
    options = flows(**{"A->B.enabled": "true", "replication.factor": "-1",
                       "A->B.checkpoints.topic.replication.factor": "-1"})["A->B"].config.replication
    assert options.replication_factor is None and options.internal_replication_factor("checkpoints") is None
    assert options.internal_replication_factor("offset-syncs") == 3
    # An internal topic's -1 is the broker's default, not the remote topics' factor.
    options = flows(**{"A->B.enabled": "true", "replication.factor": "2",
                       "heartbeats.topic.replication.factor": "-1"})["A->B"].config.replication
    assert options.internal_replication_factor("heartbeats") is None and options.replication_factor == 2
    with pytest.raises(ConfigError, match="heartbeats.topic.replication.factor = 0 is not a replication factor"):
        flows(**{"A->B.enabled": "true", "heartbeats.topic.replication.factor": "0"})


def test_worker_settings_are_read_per_target_cluster_only_as_mirror_maker_2_s_worker_config(caplog):
    planned = flows(**{"A->B.enabled": "true", "exactly.once.source.support": "enabled",
                       "A->B.offset.flush.interval.ms": "5", "emit.heartbeats.enabled": "false"})
    assert not planned["A->B"].config.exactly_once and planned["A->B"].config.offset_commit_interval_ms == 60000
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        "mm2.properties: exactly.once.source.support: MirrorMaker 2 reads exactly.once.source.support only per "
        "cluster (<alias>.): ignored here",
        "mm2.properties: A->B.offset.flush.interval.ms: MirrorMaker 2 reads offset.flush.interval.ms only per "
        "cluster (<alias>.): ignored here"]
    # offset.storage.*: the top level's wins over the target cluster's (workerConfig puts it last).
    planned = flows(**{"A->B.enabled": "true", "emit.heartbeats.enabled": "false", "offset.storage.topic": "top",
                       "B.offset.storage.topic": "b"})
    assert planned["A->B"].connect_offsets_topic == "top"


def test_a_top_level_enabled_runs_every_pair_mirror_maker_2_runs():
    """clusterPairs makes a herder for a pair whose own enabled is true or whose heartbeats are on;
    its connectors then read enabled from the flow, else the top level."""
    planned = flows(**{"enabled": "true"})
    assert sorted(name for name, flow in planned.items() if flow.enabled) == [
        "A->B", "A->C", "B->A", "B->C", "C->A", "C->B"]
    planned = flows(**{"enabled": "true", "B->C.enabled": "false", "emit.heartbeats.enabled": "false",
                       "A->B.enabled": "true"})
    assert sorted(planned) == ["A->B"]  # no herder for the others: MirrorMaker 2 runs nothing there
    with pytest.raises(ConfigError, match="no source->target replication flows"):
        flows(**{"enabled": "true", "emit.heartbeats.enabled": "false"})


def test_mirror_maker_2_s_default_plugin_classes_are_accepted_and_another_is_refused_in_one_line():
    defaults = {"topic.filter.class": "org.apache.kafka.connect.mirror.DefaultTopicFilter",
                "group.filter.class": "org.apache.kafka.connect.mirror.DefaultGroupFilter",
                "config.property.filter.class": "org.apache.kafka.connect.mirror.DefaultConfigPropertyFilter",
                "forwarding.admin.class": "org.apache.kafka.clients.admin.ForwardingAdmin"}
    assert flows(**{"A->B.enabled": "true", **defaults})["A->B"].enabled
    for key, use in (("topic.filter.class", "use topics and topics.exclude"),
                     ("A->B.group.filter.class", "use groups and groups.exclude"),
                     ("config.property.filter.class", "use config.properties.exclude"),
                     ("forwarding.admin.class", "created through the admin API")):
        with pytest.raises(ConfigError) as raised:
            flows(**{"A->B.enabled": "true", key: "com.example.Custom"})
        assert str(raised.value).startswith(f"mm2.properties: {key} = com.example.Custom: a Java ")
        assert use in str(raised.value)


def test_kafka_3_s_blacklist_keys_are_read_where_the_exclude_keys_are_not_given(caplog):
    caplog.set_level(logging.INFO)
    planned = flows(**{"A->B.enabled": "true", "A->C.enabled": "true", "topics.blacklist": "secret.*",
                       "A->C.topics.exclude": "audit", "groups.blacklist": "batch-.*",
                       "config.properties.blacklist": "retention\\.ms"})
    ab, ac = planned["A->B"].config, planned["A->C"].config
    assert ab.include.fullmatch("orders") and not ab.include.fullmatch("secret-1")
    assert ac.include.fullmatch("secret-1") and not ac.include.fullmatch("audit")  # the new key wins
    assert ab.replication.groups_exclude.startswith("batch-.*")
    assert ab.replication.config_exclude_pattern.fullmatch("retention.ms")
    assert not ab.replication.config_exclude_pattern.fullmatch("min.insync.replicas")  # the default replaced
    assert not [r for r in caplog.records if r.levelno == logging.WARNING]
    assert ("Kafka 3.x's names, removed in Kafka 4.0, are read where the new name is not given: "
            "config.properties.blacklist (as config.properties.exclude), groups.blacklist (as groups.exclude), "
            "topics.blacklist (as topics.exclude)") in caplog.text


def test_the_internal_topic_separator_can_be_left_out_of_internal_topic_names():
    from mirror_maker.replication.policies import topic_rules

    for enabled, syncs, checkpoints in (("true", "mm2-offset-syncs_B_internal", "A_checkpoints_internal"),
                                        ("false", "mm2-offset-syncs.B.internal", "A.checkpoints.internal")):
        options = flows(**{"A->B.enabled": "true", "replication.policy.separator": "_",
                           "replication.policy.internal.topic.separator.enabled": enabled})["A->B"].config.replication
        policy = topic_rules(options).policy
        assert (policy.offset_syncs_topic("B"), policy.checkpoints_topic("A")) == (syncs, checkpoints)
        assert policy.format_remote_topic("A", "orders") == "A_orders"


def test_a_sync_for_every_record_with_offset_lag_max_0_and_source_configs_on_every_new_topic():
    options = flows(**{"A->B.enabled": "true", "offset.lag.max": "0",
                       "sync.topic.configs.enabled": "false"})["A->B"].config.replication
    assert options.offset_lag_max == 0 and not options.sync_topic_configs
    assert options.mirror_maker_2_creation  # MirrorMaker 2's createNewTopics copies them whatever the flag says


def test_our_positions_are_written_byte_for_byte_as_kafka_connect_writes_them():
    """Connect looks a position up by its key's bytes: JsonConverter without schemas, the source
    partition map in Java's HashMap order (cluster, partition, topic), no spaces."""
    from mirror_maker.dedicated.connect_offsets import WRITER_HEADER, decode, key_bytes, value_bytes
    from mirror_maker.records import TopicPartition

    tp = TopicPartition("orders-2", 11)
    assert key_bytes("us-west", tp) == b'["MirrorSourceConnector",{"cluster":"us-west","partition":11,"topic":"orders-2"}]'
    assert value_bytes(501) == b'{"offset":500}'  # the last mirrored: MirrorMaker 2 resumes one past it
    _tp, position = decode(key_bytes("us-west", tp), value_bytes(501), [(WRITER_HEADER, b"x")], "us-west")
    assert (position.next_offset, position.ours) == (501, True)


def test_a_take_over_takes_mirror_maker_2_s_newer_positions_and_never_our_own():
    """MirrorMaker 2 ran since our last commit: its position ahead of the group's is taken; one we
    wrote is the group's own past (an operator may have rewound the group since): never taken."""
    from mirror_maker.dedicated.connect_offsets import Position
    from mirror_maker.dedicated.takeover import to_take
    from mirror_maker.records import TopicPartition

    def tp(p, topic="orders"):
        return TopicPartition(topic, p)

    points = {tp(0): Position(50, ours=False), tp(1): Position(50, ours=False), tp(2): Position(90, ours=True),
              tp(3): Position(7, ours=False), tp(4): Position(9, ours=True), tp(0, "skipped"): Position(5, ours=False)}
    committed = {tp(0): 40, tp(1): 60, tp(2): 20}
    assert to_take(points, committed, lambda topic: topic == "orders") == {tp(0): 50, tp(3): 7, tp(4): 9}


def test_the_keeper_writes_what_moved_survives_a_failed_round_and_writes_once_more_at_the_stop(monkeypatch, caplog):
    """Connect's offsets are kept at the flow's committed offsets by the elected node; MirrorMaker
    2's positions the flow took are written again as ours; a round that failed (any error) is
    one WARN, and the next one starts with a new producer."""
    from types import SimpleNamespace

    from mirror_maker.dedicated import takeover
    from mirror_maker.dedicated.connect_offsets import Position
    from mirror_maker.records import TopicPartition

    orders0, orders1 = TopicPartition("orders", 0), TopicPartition("orders", 1)
    committed = {orders0: 10, orders1: 5, TopicPartition("other", 0): 3}
    writers, answers = [], [None, BufferError("Local: Queue full"), None, None]

    class Writer:
        def __init__(self, topic, source, conf, admin, partitions, factor, written):
            self.written, self.rounds, self.closed = dict(written), [], False
            writers.append(self)

        def write(self, positions, timeout_s):
            answer = answers.pop(0)
            if answer is not None:
                raise answer
            moved = {tp: o for tp, o in positions.items() if self.written.get(tp) != o}
            self.rounds.append(moved)
            self.written.update(moved)
            return len(moved)

        def close(self, timeout_s):
            self.closed = True

    monkeypatch.setattr(takeover, "ConnectOffsetsWriter", Writer)
    monkeypatch.setattr(takeover, "FlowOffsets", lambda flow: SimpleNamespace(committed=lambda t=None: dict(committed)))
    monkeypatch.setattr(takeover, "admin_client", lambda conf, name: None)
    flow = flows(**{"A->B.enabled": "true", "topics": "orders"})["A->B"]
    keeper = takeover.ConnectOffsetsKeeper(flow, lambda: True, lambda s: True)
    keeper.seen({orders0: Position(10, ours=False), orders1: Position(5, ours=True)})
    assert keeper.keep(1.0) == 1 and writers[0].rounds == [{orders0: 10}]  # MirrorMaker 2's, written as ours
    committed[orders1] = 7
    assert keeper.keep(1.0) == 0 and writers[0].closed
    assert "Cannot keep mm2-offsets.A.internal" in caplog.text and "BufferError: Local: Queue full" in caplog.text
    committed[orders0] = 12
    keeper.final()
    assert len(writers) == 2 and writers[1].rounds == [{orders0: 12, orders1: 7}] and writers[1].closed
    assert "mm2-offsets.A.internal is current again" in caplog.text


def test_the_command_line(tmp_path, capsys):
    assert invoke([]) == 1
    assert "mm2.properties" in capsys.readouterr().err
    assert invoke(["x.properties", "--clusters"]) == 1
    assert "--clusters: expected at least one argument" in capsys.readouterr().err
    assert invoke(["--version"]) == 0
    assert invoke(["x.properties", "--spark.master", "local[2]"]) == 1
    assert "--spark.master is only used with --spark" in capsys.readouterr().err
    bad = tmp_path / "mm2.properties"
    bad.write_text("clusters = A\nA.bootstrap.servers = a:1\nA->Q.enabled = true\n")
    assert invoke([str(bad)]) == 1
    err = capsys.readouterr().err
    assert err.count("ERROR") == 1 and "A->Q.enabled" in err and "Traceback" not in err


def test_fatal_failures_are_mirror_maker_v1_s():
    from mirror_maker.dedicated.supervisor import is_fatal

    assert is_fatal(SendFailed("refused")) and is_fatal(HandlerFailed("raised"))
    assert not is_fatal(ClientFailed("authentication failed"))


def test_a_flow_s_threads_log_lines_name_it():
    from mirror_maker.dedicated.supervisor import FlowPrefix

    prefix = FlowPrefix(["A->B", "A->BB"])
    record = logging.LogRecord("x", logging.INFO, "f", 1, "Assigned %s", ("t-0",), None)
    record.threadName = "A->BB/mirrormaker-thread-0"
    prefix.filter(record)
    assert record.getMessage() == "[A->BB] Assigned t-0"
    plain = logging.LogRecord("x", logging.INFO, "f", 1, "100% done", None, None)
    plain.threadName = "A->B"
    prefix.filter(plain)
    assert plain.getMessage() == "[A->B] 100% done"
    main = logging.LogRecord("x", logging.INFO, "f", 1, "Status", None, None)
    prefix.starting = "A->B"
    prefix.filter(main)  # MainThread: the supervisor's own lines
    assert main.getMessage() == "Status"


def test_the_syncs_run_only_on_the_elected_node_and_all_at_once_when_it_becomes_it(monkeypatch):
    from mirror_maker.engine.state import RunState
    from mirror_maker.replication import topic_sync

    monkeypatch.setattr(topic_sync, "IDLE_WAIT_S", 0.01)
    asked = []

    def elected() -> bool:  # not this node for its first three looks
        asked.append(True)
        return len(asked) > 3

    state, runs = RunState(), []
    sync = topic_sync.TopicSync(ReplicationOptions(), None, None, None, None, state, active=elected)
    sync.add(3600, lambda: runs.append(len(asked)))  # first due 2 s after the start, unless elected later
    sync.start()
    try:
        deadline = time.monotonic() + 1.5  # well before the job's own first run
        while not runs and time.monotonic() < deadline:
            time.sleep(0.01)
        assert runs and runs[0] == 4  # at once when elected, and not before
    finally:
        state.request_stop()
        sync.join(5)


def test_rates_over_the_last_window():
    from mirror_maker.dedicated.metrics import Rates

    now = [100.0]
    rates = Rates(clock=lambda: now[0])
    assert rates.rate("k", 0) == 0.0
    now[0] = 110.0
    assert rates.rate("k", 500) == 50.0
    now[0] = 120.0
    assert rates.rate("k", 0) == 0.0  # counters started again: no negative rate


def test_where_kafka_s_mirror_maker_2_left_a_flow_is_read_from_connect_s_offsets():
    from mirror_maker.dedicated.connect_offsets import Position, decode
    from mirror_maker.records import TopicPartition

    found = {}
    for key, value in ((b'["MirrorSourceConnector",{"cluster":"A","partition":0,"topic":"orders"}]', b'{"offset":41}'),
                       (b'["MirrorSourceConnector",{"cluster":"A","partition":0,"topic":"orders"}]', b'{"offset":99}'),
                       (b'["MirrorSourceConnector",{"cluster":"A","partition":1,"topic":"orders"}]', b'{"offset":7}'),
                       (b'["MirrorSourceConnector",{"cluster":"A","partition":1,"topic":"orders"}]', None),
                       (b'["MirrorSourceConnector",{"cluster":"C","partition":2,"topic":"orders"}]', b'{"offset":5}'),
                       (b'["MirrorHeartbeatConnector",{"sourceClusterAlias":"A","targetClusterAlias":"B"}]',
                        b'{"offset":0}'), (b"not json", b"{}")):
        decoded = decode(key, value, None, "A")
        if decoded is not None:
            tp, position = decoded
            found.pop(tp, None) if position is None else found.__setitem__(tp, position)
    # One past the last mirrored, not ours (no header); a tombstone forgets.
    assert found == {TopicPartition("orders", 0): Position(100, ours=False)}
    planned = flows(**{"A->B.enabled": "true", "B.offset.storage.topic": "mm2-progress"})
    assert planned["A->B"].connect_offsets_topic == "mm2-progress"
    assert planned["C->A"].connect_offsets_topic == "mm2-offsets.C.internal"


def test_config_providers_resolve_the_whole_file(tmp_path, monkeypatch):
    from mirror_maker.dedicated.mm2_file import read_mm2_file

    secrets = tmp_path / "secrets.properties"
    secrets.write_text("west = 127.0.0.1:9\n")
    monkeypatch.setenv("MM2_TEST_TOPICS", "orders.*")
    path = tmp_path / "mm2.properties"
    path.write_text(f"config.providers = file, env\n"
                    f"config.providers.file.class = org.apache.kafka.common.config.provider.FileConfigProvider\n"
                    f"config.providers.env.class = org.apache.kafka.common.config.provider.EnvVarConfigProvider\n"
                    f"clusters = A, B\nA.bootstrap.servers = ${{file:{secrets}:west}}\n"
                    f"B.bootstrap.servers = 127.0.0.1:2\nA->B.topics = ${{env:MM2_TEST_TOPICS}}\n")
    file = read_mm2_file(str(path))
    assert file.cluster["A"]["bootstrap.servers"] == "127.0.0.1:9" and file.value("topics", "A", "B") == "orders.*"
    assert "config.providers" not in file.top
    path.write_text("clusters = A\nA.bootstrap.servers = ${vault:x:y}\nconfig.providers = vault\n"
                    "config.providers.vault.class = com.example.Vault\n")
    with pytest.raises(ConfigError, match="com.example.Vault"):
        read_mm2_file(str(path))


def test_an_exactly_once_flow_runs_only_on_the_node_that_holds_its_election(monkeypatch):
    """Its shards' transactional ids are the same on every node: two nodes running them fenced
    each other, and the supervisor restarted each after its fence, for ever."""
    import threading
    import time as clock
    from types import SimpleNamespace

    from mirror_maker.dedicated import supervisor as sup

    monkeypatch.setattr(sup, "take_over", lambda flow: {})
    monkeypatch.setattr(sup, "ConnectOffsetsKeeper", NoKeeper)
    monkeypatch.setattr(sup, "ELECTION_CHECK_S", 0.01)
    election = SimpleNamespace(leading=False)
    stop = threading.Event()
    runs = []

    class Run:
        def __init__(self):
            self.stopped = threading.Event()
            runs.append(self)

        def run(self):
            self.stopped.wait(5)
            return None

        def request_stop(self, signum=None):
            self.stopped.set()

    fake = SimpleNamespace(stopping=False, wait=lambda s: stop.wait(s), new_run=lambda flow, singletons: Run(),
                           attach=lambda runner, current: not stop.is_set())
    flow = SimpleNamespace(name="A->B", config=SimpleNamespace(exactly_once=True))
    runner = sup.FlowRunner(flow, fake, election)
    runner.start()
    try:
        clock.sleep(0.1)
        assert runs == []  # standing by
        assert runner.readiness() == (True, "standing by (another node holds the flow's election)")
        election.leading = True
        wait = clock.monotonic() + 2
        while not runs and clock.monotonic() < wait:
            clock.sleep(0.01)
        assert len(runs) == 1
        election.leading = False  # another node holds it now
        assert runs[0].stopped.wait(2)
        clock.sleep(0.1)
        assert len(runs) == 1  # back to standing by, not restarted
        assert runner.current is None and runner.readiness()[0]
    finally:
        stop.set()
        fake.stopping = True
        for run in runs:
            run.request_stop()
        assert runner.join(5)


def test_an_election_whose_consumer_failed_joins_again(monkeypatch, caplog):
    """An exactly-once flow runs only where the election is held: an election thread that ended
    on an error left every node standing by for ever, without a word."""
    import logging

    from mirror_maker.dedicated import election as el

    monkeypatch.setattr(el, "TOPIC_RETRY_S", 0.01)
    election = el.SingletonElection("A->B", {"bootstrap.servers": "127.0.0.1:1"}, "t", "g", None)
    attempts = []

    def take_part():
        attempts.append(1)
        if len(attempts) == 1:
            raise RuntimeError("the consumer broke")
        election._stop.set()

    monkeypatch.setattr(election, "_ensure_topic", lambda: True)
    monkeypatch.setattr(election, "_take_part", take_part)
    with caplog.at_level(logging.ERROR, logger="mirror_maker.dedicated"):
        election._run()
    assert len(attempts) == 2
    assert "The singleton election of A->B failed: RuntimeError: the consumer broke (joining again in 0 s)" \
        in caplog.text


def test_an_exactly_once_flow_s_offsets_are_read_and_written_under_its_remote_topics(monkeypatch):
    """An exactly-once flow keeps its source offsets in a group on the target under the remote
    topic (A.orders); another flow into B may share the group: only this flow's topics are its."""
    from types import SimpleNamespace

    from mirror_maker.dedicated import takeover
    from mirror_maker.records import TopicPartition

    altered = []
    admin = SimpleNamespace(alter_consumer_group_offsets=lambda request, request_timeout: (
        altered.extend((group.group_id, [(tp.topic, tp.partition, tp.offset) for tp in group.topic_partitions])
                       for group in request) or {request[0].group_id: SimpleNamespace(result=lambda: None)}))
    monkeypatch.setattr(takeover, "admin_client", lambda conf, name: admin)
    monkeypatch.setattr(takeover, "group_offsets", lambda client, group, timeout_s: {
        TopicPartition("A.orders", 0): 40, TopicPartition("A.orders", 1): 7, TopicPartition("C.orders", 0): 99,
        TopicPartition("orders", 0): 3})
    flow = flows(**{"A->B.enabled": "true", "C->B.enabled": "true", "topics": "orders",
                    "B.exactly.once.source.support": "enabled"})["A->B"]
    offsets = takeover.FlowOffsets(flow)
    assert offsets.group == flow.config.exactly_once_group
    assert offsets.committed() == {TopicPartition("orders", 0): 40, TopicPartition("orders", 1): 7}
    offsets.commit({TopicPartition("orders", 1): 8})
    assert altered == [(flow.config.exactly_once_group, [("A.orders", 1, 8)])]


def test_a_cluster_s_admin_settings_reach_every_admin_client_of_that_cluster(caplog):
    """``<alias>.admin.*`` (MirrorMaker 2's sourceAdminConfig and targetAdminConfig): an admin
    principal of its own, say, where the producer's may not create topics."""
    caplog.set_level(logging.WARNING)
    jaas = 'org.apache.kafka.common.security.plain.PlainLoginModule required username="ops" password="s3cret";'
    planned = flows(**{"A->B.enabled": "true", "B.security.protocol": "SASL_PLAINTEXT", "B.sasl.mechanism": "PLAIN",
                       "B.sasl.jaas.config": jaas.replace("ops", "mirror"), "B.admin.sasl.jaas.config": jaas,
                       "A.admin.socket.timeout.ms": "45000"})
    config = planned["A->B"].config
    assert config.producer["sasl.username"] == "mirror"  # the producer keeps the cluster's own
    assert config.target_admin["sasl.username"] == "ops" and config.target_admin["sasl.password"] == "s3cret"
    assert config.target_admin_conf()["sasl.username"] == "ops"
    assert config.target_admin_conf()["security.protocol"] == "SASL_PLAINTEXT"  # the cluster's, below it
    assert config.source_admin == {"socket.timeout.ms": "45000"}
    assert planned["B->A"].config.source_admin["sasl.username"] == "ops"  # B's admin clients in every flow
    assert not [r for r in caplog.records if "admin" in r.getMessage()]
