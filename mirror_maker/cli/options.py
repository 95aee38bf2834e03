"""The command line options: Kafka 3.9 MirrorMaker's 14, its aliases, our extensions and Spark's.

Kafka's dotted names are kept verbatim; each gets an explicit Python name because click cannot
derive one from a dotted flag. ``KAFKA_OPTIONS`` and ``EXTENSION_OPTIONS`` drive the help text
(jopt-simple's layout for Kafka's, a separate "Extensions" section for ours).
"""

from __future__ import annotations

import click


def _boolean(ctx, param, value):
    if value is None:
        return None
    text = value.strip().lower()
    if text not in ("true", "false"):
        raise click.BadParameter(f"'{value}' is not true or false", param_hint=param.opts[0])
    return text == "true"


# (declarations, python name, metavar "Type: description", default shown, click kwargs)
KAFKA_OPTIONS = [
    (("--abort.on.send.failure", "--abort.on.send.fail"), "abort_on_send_failure",
     "String: Stop the entire mirror maker when a send failure occurs", "true",
     dict(default="true", callback=_boolean)),
    (("--consumer.config",), "consumer_config",
     "String: Embedded consumer config for consuming from the source cluster.", None, {}),
    (("--consumer.rebalance.listener",), "rebalance_listener",
     "String: A custom rebalance listener of type ConsumerRebalanceListener", None, {}),
    (("--help",), "show_help", "Print usage information.", None, dict(is_flag=True)),
    (("--include",), "include",
     "String: Java regex (String): List of included topics to mirror.", None, {}),
    (("--message.handler",), "message_handler",
     "String: Message handler which will process every record in-between consumer and producer.",
     None, {}),
    (("--message.handler.args",), "message_handler_args",
     "String: Arguments used by custom message handler for mirror maker.", None, {}),
    (("--new.consumer",), "new_consumer",
     "DEPRECATED Use new consumer in mirror maker (this is the default so this option will be "
     "removed in a future version).", None, dict(is_flag=True)),
    (("--num.streams",), "num_streams", "Integer: Number of threads: Number of consumption streams.",
     "1", dict(type=int, default=1)),
    (("--offset.commit.interval.ms",), "offset_commit_interval_ms",
     "Integer: offset commit interval in millisecond: Offset commit interval in ms.", "60000",
     dict(type=int, default=60000)),
    (("--producer.config",), "producer_config", "String: Embedded producer config.", None, {}),
    (("--rebalance.listener.args", "--consumer.rebalance.listener.args"), "rebalance_listener_args",
     "String: Arguments used by custom rebalance listener for mirror maker consumer.", None, {}),
    (("--version",), "show_version", "Display Kafka version.", None, dict(is_flag=True)),
    (("--whitelist",), "whitelist",
     "String: Java regex (String): DEPRECATED, use --include instead; ignored if --include "
     "specified. List of included topics to mirror.", None, {}),
]

EXTENSION_OPTIONS = [
    (("--log.level",), "log_level",
     "String: DEBUG, INFO, WARN or ERROR (or the MIRROR_MAKER_LOG_LEVEL environment variable).",
     "INFO", {}),
    (("--metrics.port",), "metrics_port",
     "Integer: Serve Prometheus metrics on /metrics, and /healthz and /ready, on this port "
     "(off unless given).", None, dict(type=click.IntRange(0, 65535))),
    (("--metrics.bind",), "metrics_bind", "String: The address the metrics server listens on.",
     "0.0.0.0", dict(default="0.0.0.0")),
    (("--status.interval.ms",), "status_interval_ms",
     "Integer: Log a status line (rates, lag, dropped, partitions) this often; 0 turns it off.",
     "30000", dict(type=click.IntRange(min=0), default=30000)),
    (("--exit.when.caught.up",), "exit_when_caught_up",
     "Stop, after the final flush and commit, once every assigned partition has reached its end; "
     "exit 0 and print a summary (for cron).", None, dict(is_flag=True)),
    (("--use.raw.bytes",), "use_raw_bytes",
     "Shallow mirroring (KIP-712): copy whole record batches as they are (same compression, same "
     "partition numbers) instead of record by record; a handler then decides per batch.", None,
     dict(is_flag=True)),
    (("--exactly.once",), "exactly_once",
     "Exactly-once (KIP-656): each stream commits its records and the source offsets in one "
     "transaction on the target; readers use isolation.level=read_committed.", None, dict(is_flag=True)),
    (("--exactly.once.group",), "exactly_once_group_option",
     "String: The consumer group on the target that holds the source offsets (exactly-once).",
     "the source group.id", {}),
    (("--shutdown.timeout.ms",), "shutdown_timeout_ms",
     "Integer: How long a clean stop may wait for the target to acknowledge queued records "
     "before it exits without committing them.", "30000", dict(type=int, default=30000)),
]

SPARK_OPTIONS = [
    (("--spark",), "spark",
     "Run the streams as tasks of one Spark job (PySpark: pip install "
     "'kafka-mirror-maker[spark]').", None, dict(is_flag=True)),
    (("--spark.master",), "spark_master",
     "String: The Spark master URL (spark://host:port, yarn, k8s://...).",
     "local[<num.streams>]", {}),
    (("--spark.conf",), "spark_conf",
     "String: key=value: A Spark setting; repeat the option for several.", None,
     dict(multiple=True)),
    (("--spark.py.files",), "spark_py_files",
     "String: Comma-separated .py/.zip/.egg files the executors need (plugin modules that only "
     "this machine has are shipped without it).", None, {}),
    (("--spark.max.restarts",), "spark_max_restarts",
     "Integer: How often in a row the driver restarts the job after a worker died or stopped on "
     "its own.", "3",
     dict(type=click.IntRange(min=0), default=3)),
]

#: MirrorMaker 2's topic capabilities, with its property names; every sync is off by default.
MM2_OPTIONS = [
    (("--replication.policy.class",), "replication_policy",
     "String: How target topics are named: identity (names unchanged), default (MirrorMaker 2's "
     "<source alias><separator><topic>) or a Python class by dotted path. Given, MirrorMaker 2's "
     "topic rules apply too: internal topics and cycles are never mirrored.",
     "none (MirrorMaker v1: names unchanged, no MirrorMaker 2 rules)", {}),
    (("--replication.policy.separator",), "replication_policy_separator",
     "String: The separator of the default policy's remote topic names.", ".", {}),
    (("--source.cluster.alias",), "source_cluster_alias", "String: The source cluster's alias.", "source", {}),
    (("--target.cluster.alias",), "target_cluster_alias",
     "String: The target cluster's alias (a topic whose source it is, by the policy, is a cycle).", "target", {}),
    (("--replication.factor",), "replication_factor",
     "Integer: The replication factor of the target topics the mirror creates.", "the target broker's",
     dict(type=int)),
    (("--refresh.topics.enabled",), "refresh_topics",
     "String: true: a target topic grows to its source topic's partition count, and the new "
     "partitions are mirrored from their start.", "false", dict(callback=_boolean)),
    (("--refresh.topics.interval.seconds",), "refresh_topics_interval_s",
     "Integer: How often partition counts are compared.", "600", dict(type=int)),
    (("--sync.topic.configs.enabled",), "sync_topic_configs",
     "String: true: target topics are created with their source topic's non-default configs and "
     "kept in sync.", "false", dict(callback=_boolean)),
    (("--sync.topic.configs.interval.seconds",), "sync_topic_configs_interval_s",
     "Integer: How often topic configs are synced.", "600", dict(type=int)),
    (("--config.properties.exclude",), "config_properties_exclude",
     "String: Comma-separated regexes of topic configs never synced.",
     "MirrorMaker 2's (throttled replicas, message.timestamp.*, unclean.leader.election.enable, "
     "min.insync.replicas)", {}),
    (("--sync.topic.acls.enabled",), "sync_topic_acls",
     "String: true: the source's literal topic ACLs are copied to the target topics (never ALLOW "
     "WRITE, ALLOW ALL as READ, DENY as it is).", "false", dict(callback=_boolean)),
    (("--sync.topic.acls.interval.seconds",), "sync_topic_acls_interval_s",
     "Integer: How often topic ACLs are synced.", "600", dict(type=int)),
    (("--emit.offset-syncs.enabled",), "emit_offset_syncs",
     "String: true: (source offset, target offset) pairs of mirrored records go to MirrorMaker 2's "
     "offset-syncs topic (needs the source partition kept: PartitionPreservingHandler, or --use.raw.bytes).",
     "false",
     dict(callback=_boolean)),
    (("--offset-syncs.topic.location",), "offset_syncs_location",
     "String: source or target: the cluster of the offset-syncs topic.", "source", {}),
    (("--offset.lag.max",), "offset_lag_max",
     "Integer: How far the target offset may move past the last offset sync before another.", "100",
     dict(type=int)),
    (("--emit.checkpoints.enabled",), "emit_checkpoints",
     "String: true: source consumer groups' offsets, translated, go to <source alias>.checkpoints.internal "
     "on the target.", "false", dict(callback=_boolean)),
    (("--emit.checkpoints.interval.seconds",), "emit_checkpoints_interval_s",
     "Integer: How often checkpoints are written.", "60", dict(type=int)),
    (("--groups",), "groups", "String: Comma-separated regexes of the consumer groups checkpointed.", ".*", {}),
    (("--groups.exclude",), "groups_exclude", "String: Comma-separated regexes of groups never checkpointed.",
     "console-consumer-.*, connect-.*, __.*", {}),
    (("--sync.group.offsets.enabled",), "sync_group_offsets",
     "String: true: translated offsets are committed to the target's groups while they have no "
     "active member there (never backwards).", "false", dict(callback=_boolean)),
    (("--sync.group.offsets.interval.seconds",), "sync_group_offsets_interval_s",
     "Integer: How often group offsets are synced.", "60", dict(type=int)),
    (("--emit.heartbeats.enabled",), "emit_heartbeats",
     "String: true: heartbeats (source alias, target alias, time) go to the target's heartbeats topic.",
     "false", dict(callback=_boolean)),
    (("--emit.heartbeats.interval.seconds",), "emit_heartbeats_interval_s",
     "Integer: How often heartbeats are written.", "1", dict(type=int)),
]

ALL_OPTIONS = KAFKA_OPTIONS + EXTENSION_OPTIONS + MM2_OPTIONS + SPARK_OPTIONS


def apply(command):
    """Decorate ``command`` with every option, in a stable order."""
    for decls, name, description, _default, kwargs in reversed(ALL_OPTIONS):
        command = click.option(*decls, name, help=description, **kwargs)(command)
    return command


def value_options():
    """Options that take a value (a repeated one is an error, as in jopt-simple)."""
    return {decls: decls for decls, _n, _d, _df, kw in ALL_OPTIONS
            if not kw.get("is_flag") and not kw.get("multiple")}
