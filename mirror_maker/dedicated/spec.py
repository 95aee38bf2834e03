"""Every mm2.properties setting this tool reads, declared once as data: Kafka's ``ConfigDef`` rows
(name, type, default, where it may be given, doc), plus what each one feeds.

Scopes, as MirrorMaker 2's ``MirrorMakerConfig`` reads them: ``top`` (``topics = .*``), ``cluster``
(``us-west.bootstrap.servers``; for a worker setting, the *target* cluster's) and ``flow``
(``us-west->us-east.topics``). A flow's value wins over the top level's, a cluster's over the top
level's; MirrorMaker 2 reads connector settings (topics, syncs, intervals) at the top level and per
flow only, and worker settings (the commit interval, exactly-once) per target cluster.

``field`` names what the value becomes: ``replication.<f>`` a ``ReplicationOptions`` field,
``mirror.<f>`` a ``MirrorMakerConfig`` field, ``flow.<f>`` and ``run.<f>`` the dedicated mode's own;
None: accepted, read where it is needed. Settings that MirrorMaker 2 has and this tool does not are
``UNSUPPORTED`` (one WARN naming each); Kafka Connect's own worker settings, which a process
without Connect does not need, are ``CONNECT_ONLY`` (one INFO line).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Tuple

from ..config.replication import DEFAULT_CONFIG_EXCLUDE, DEFAULT_GROUPS_EXCLUDE

TOP, CLUSTER, FLOW = "top", "cluster", "flow"
CONNECTOR = (TOP, FLOW)
WORKER = (TOP, CLUSTER)

#: MirrorMaker 2's DefaultTopicFilter default for topics.exclude.
DEFAULT_TOPICS_EXCLUDE = ".*[\\-\\.]internal, .*\\.replica, __.*"
DEFAULT_POLICY = "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"


@dataclass(frozen=True)
class Setting:
    name: str
    #: boolean, int, list (comma-separated), string, or class (a policy name)
    type: str
    #: MirrorMaker 2's default (ours for an extension); None: none
    default: object
    scopes: Tuple[str, ...]
    doc: str
    field: Optional[str] = None
    #: False: an extension of ours, not a MirrorMaker 2 property
    mm2: bool = True
    #: For a string: the values allowed
    choices: Tuple[str, ...] = ()


SETTINGS: Tuple[Setting, ...] = (
    Setting("clusters", "list", None, (TOP,), "The cluster aliases (required)."),
    Setting("bootstrap.servers", "string", None, (CLUSTER,),
            "A cluster's brokers, as <alias>.bootstrap.servers (required for every alias)."),
    Setting("enabled", "boolean", False, (FLOW,), "<source>-><target>.enabled = true runs the flow."),
    Setting("config.providers", "list", "", (TOP,), "Kafka's config providers (${provider:path:key} values "
            "anywhere in the file: file, env and dir)."),
    # What is mirrored and how it is named
    Setting("topics", "list", ".*", CONNECTOR, "Topics to mirror: comma-separated regexes, full match.",
            "flow.topics"),
    Setting("topics.exclude", "list", DEFAULT_TOPICS_EXCLUDE, CONNECTOR,
            "Topics never mirrored; wins over topics.", "flow.topics_exclude"),
    Setting("replication.policy.class", "class", DEFAULT_POLICY, CONNECTOR,
            "How remote topics are named: MirrorMaker 2's Default or IdentityReplicationPolicy, or a Python "
            "class by dotted path.", "replication.policy"),
    Setting("replication.policy.separator", "string", ".", CONNECTOR,
            "The default policy's separator.", "replication.separator"),
    Setting("heartbeats.replication.enabled", "boolean", True, CONNECTOR,
            "Heartbeats topics are mirrored whatever topics says (only true is supported)."),
    Setting("tasks.max", "int", 1, CONNECTOR, "Streams per flow on each node (MirrorMaker 2's tasks).",
            "mirror.num_streams"),
    # Topic creation and syncs
    Setting("replication.factor", "int", 2, CONNECTOR,
            "Replication factor of the remote topics the flow creates (-1: the broker's default).",
            "replication.replication_factor"),
    Setting("offset-syncs.topic.replication.factor", "int", 3, CONNECTOR,
            "Replication factor of the offset-syncs topic (-1: the broker's default).",
            "replication.offset_syncs_replication_factor"),
    Setting("checkpoints.topic.replication.factor", "int", 3, CONNECTOR,
            "Replication factor of the checkpoints topic (-1: the broker's default).",
            "replication.checkpoints_replication_factor"),
    Setting("heartbeats.topic.replication.factor", "int", 3, CONNECTOR,
            "Replication factor of the heartbeats topic (-1: the broker's default).",
            "replication.heartbeats_replication_factor"),
    Setting("refresh.topics.enabled", "boolean", True, CONNECTOR,
            "Remote topics grow with their source topics' partitions.", "replication.refresh_topics"),
    Setting("refresh.topics.interval.seconds", "int", 600, CONNECTOR, "How often topics and partitions are "
            "listed.", "replication.refresh_topics_interval_s"),
    Setting("sync.topic.configs.enabled", "boolean", True, CONNECTOR,
            "Remote topics keep their source topics' configs.", "replication.sync_topic_configs"),
    Setting("sync.topic.configs.interval.seconds", "int", 600, CONNECTOR, "How often configs are synced.",
            "replication.sync_topic_configs_interval_s"),
    Setting("config.properties.exclude", "list", DEFAULT_CONFIG_EXCLUDE, CONNECTOR, "Topic configs never "
            "synced.", "replication.config_exclude"),
    Setting("use.incremental.alter.configs", "string", "requested", CONNECTOR,
            "Configs are always synced with the incremental API (never is not supported).",
            choices=("requested", "required", "never")),
    Setting("sync.topic.acls.enabled", "boolean", True, CONNECTOR,
            "The source's literal topic ACLs are copied to the remote topics.", "replication.sync_topic_acls"),
    Setting("sync.topic.acls.interval.seconds", "int", 600, CONNECTOR, "How often ACLs are synced.",
            "replication.sync_topic_acls_interval_s"),
    # Consumer failover
    Setting("emit.offset-syncs.enabled", "boolean", True, CONNECTOR, "Offset syncs are written.",
            "replication.emit_offset_syncs"),
    Setting("offset-syncs.topic.location", "string", "source", CONNECTOR,
            "The cluster of the offset-syncs topic.", "replication.offset_syncs_location",
            choices=("source", "target")),
    Setting("offset.lag.max", "int", 100, CONNECTOR, "How far a remote partition may move past its last offset "
            "sync.", "replication.offset_lag_max"),
    Setting("emit.checkpoints.enabled", "boolean", True, CONNECTOR,
            "Source groups' offsets, translated, go to <source>.checkpoints.internal on the target.",
            "replication.emit_checkpoints"),
    Setting("emit.checkpoints.interval.seconds", "int", 60, CONNECTOR, "How often checkpoints are written.",
            "replication.emit_checkpoints_interval_s"),
    Setting("groups", "list", ".*", CONNECTOR, "The consumer groups checkpointed.", "replication.groups"),
    Setting("groups.exclude", "list", DEFAULT_GROUPS_EXCLUDE, CONNECTOR, "Groups never checkpointed.",
            "replication.groups_exclude"),
    Setting("refresh.groups.enabled", "boolean", True, CONNECTOR,
            "Groups are listed again at every checkpoint here, so new groups are always found."),
    Setting("refresh.groups.interval.seconds", "int", 600, CONNECTOR, "See refresh.groups.enabled."),
    Setting("sync.group.offsets.enabled", "boolean", False, CONNECTOR, "Translated offsets are committed to "
            "groups with no active member on the target.", "replication.sync_group_offsets"),
    Setting("sync.group.offsets.interval.seconds", "int", 60, CONNECTOR, "How often group offsets are synced.",
            "replication.sync_group_offsets_interval_s"),
    Setting("emit.heartbeats.enabled", "boolean", True, CONNECTOR,
            "Heartbeats go to the target's heartbeats topic (also for a pair whose flow is not enabled, as "
            "MirrorMaker 2 does).", "replication.emit_heartbeats"),
    Setting("emit.heartbeats.interval.seconds", "int", 1, CONNECTOR, "How often heartbeats are written.",
            "replication.emit_heartbeats_interval_s"),
    # Kafka Connect worker settings that have a meaning here (per target cluster)
    Setting("exactly.once.source.support", "string", "disabled", WORKER,
            "enabled: the flows into this cluster are exactly-once (transactions on the target).",
            "flow.exactly_once", choices=("disabled", "preparing", "enabled")),
    Setting("offset.storage.topic", "string", None, WORKER,
            "Where Kafka's MirrorMaker 2 kept a flow's progress (mm2-offsets.<source>.internal by default): read "
            "once, so that a flow taken over from it resumes where it stopped."),
    Setting("offset.flush.interval.ms", "int", 60000, WORKER,
            "Time between flush-then-commit cycles of the flows into this cluster.",
            "mirror.offset_commit_interval_ms"),
    # Our extensions
    Setting("use.raw.bytes", "boolean", False, CONNECTOR,
            "Shallow mirroring: whole record batches as they are (see the README).", "mirror.use_raw_bytes",
            mm2=False),
    Setting("abort.on.send.failure", "boolean", True, CONNECTOR,
            "A record the target refuses stops the process (exit 255); false: counted and skipped.",
            "mirror.abort_on_send_failure", mm2=False),
    Setting("metrics.port", "int", None, (TOP,), "Serve /metrics, /healthz and /ready on this port.",
            "run.metrics_port", mm2=False),
    Setting("metrics.bind", "string", "0.0.0.0", (TOP,), "The address the metrics server listens on.",
            "run.metrics_bind", mm2=False),
    Setting("status.interval.ms", "int", 30000, (TOP,), "A status line per flow this often; 0 turns it off.",
            "run.status_interval_ms", mm2=False),
    Setting("shutdown.timeout.ms", "int", 30000, (TOP,), "How long a clean stop waits for the targets.",
            "run.shutdown_timeout_ms", mm2=False),
)

BY_NAME: Dict[str, Setting] = {s.name: s for s in SETTINGS}

#: MirrorMaker 2 settings this tool does not have: one WARN each, naming why.
UNSUPPORTED: Dict[str, str] = {
    "topic.filter.class": "a Java TopicFilter cannot run here; use topics and topics.exclude",
    "group.filter.class": "a Java GroupFilter cannot run here; use groups and groups.exclude",
    "config.property.filter.class": "a Java ConfigPropertyFilter cannot run here; use config.properties.exclude",
    "forwarding.admin.class": "a Java ForwardingAdmin cannot run here",
    "replication.policy.internal.topic.separator.enabled": "internal topic names always use the separator",
    "consumer.poll.timeout.ms": "the streams poll as MirrorMaker v1 does",
    "admin.timeout.ms": "admin requests have their own bounded timeouts",
    "metric.reporters": "metrics are served on metrics.port (Prometheus)",
    "add.source.alias.to.metrics": "removed in Kafka 4.0; the source label is always there",
    "topics.blacklist": "removed in Kafka 4.0; use topics.exclude",
    "groups.blacklist": "removed in Kafka 4.0; use groups.exclude",
    "config.properties.blacklist": "removed in Kafka 4.0; use config.properties.exclude",
}

#: Kafka Connect's own settings (its worker group, internal topics, converters, REST server):
#: a process without Connect has nothing to do with them. Matched as prefixes.
CONNECT_ONLY: Tuple[str, ...] = (
    "offset.storage.", "config.storage.", "status.storage.", "key.converter", "value.converter",
    "header.converter", "task.shutdown.graceful.timeout.ms", "worker.", "listeners", "rest.",
    "dedicated.mode.enable.internal.rest", "plugin.path", "plugin.discovery", "group.id",
    "scheduled.rebalance.max.delay.ms", "connector.client.config.override.policy", "offset.flush.timeout.ms",
    "connections.max.idle.ms", "heartbeat.interval.ms", "session.timeout.ms", "rebalance.timeout.ms",
    "inter.worker.", "admin.listeners",
)


def is_client_setting(key: str) -> bool:
    """MirrorMaker 2's CLIENT_CONFIG_DEF: what a cluster's (and the top level's) plain settings give
    every client of the cluster: where it is and how to log in."""
    return key in ("bootstrap.servers", "security.protocol") or key.startswith(("ssl.", "sasl."))


def connect_only(key: str) -> bool:
    return key.startswith(CONNECT_ONLY)
