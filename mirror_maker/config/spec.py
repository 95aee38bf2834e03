"""Every option of the command line and every mm2.properties setting, declared once.

As Kafka's ``ConfigDef.define(NAME, TYPE, DEFAULT, VALIDATOR, IMPORTANCE, DOC)``, each
:class:`Option` names its type, default, validator, doc and group (Kafka's MirrorMaker v1, MirrorMaker
2's, ours, Spark's), the config field its value becomes, and, where MirrorMaker 2's dedicated mode
reads it, its mm2.properties key with the scopes it may be given at and MirrorMaker 2's default
(:class:`Property`). The rules between options are :data:`RULES`. From this module come the click
options and ``--help`` (``cli.options``), the config objects' defaults (``mirror_config``,
``replication``, ``spark.settings``), the dedicated mode's reading of mm2.properties
(``dedicated.mm2_file``) and the tables of docs/configuration.md (``config.reference``).

mm2.properties scopes, as MirrorMaker 2's ``MirrorMakerConfig`` reads them: ``top``
(``topics = .*``), ``cluster`` (``us-west.bootstrap.servers``; for a worker setting, the *target*
cluster's) and ``flow`` (``us-west->us-east.topics``). A flow's value wins over the top level's, a
cluster's over the top level's.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, Iterator, Optional, Pattern, Tuple

from ..errors import ConfigError

# Groups: whose option it is, and its section of --help.
KAFKA, OURS, MM2, SPARK = "kafka", "ours", "mm2", "spark"
#: --help's heading of each group after Kafka's own table.
HEADINGS = {
    OURS: "Extensions (kafka-mirror-maker for Python only):",
    MM2: "MirrorMaker 2 capabilities (MirrorMaker 2's property names; all off by default):",
    SPARK: "Spark mode (kafka-mirror-maker for Python only):",
}

# Types. BOOLEAN takes true or false in any case (Kafka's); FLAG is a command line switch.
STRING, INT, BOOLEAN, FLAG, LIST, CLASS = "string", "int", "boolean", "flag", "list", "class"

# mm2.properties scopes.
TOP, CLUSTER, FLOW = "top", "cluster", "flow"
#: Where MirrorMaker 2 reads a setting, first scope first (the first that gives it wins).
#: A connector setting (``MirrorMakerConfig.connectorBaseConfig``): the flow's, else the top level's.
CONNECTOR = (FLOW, TOP)
#: A Kafka Connect worker setting (``MirrorMakerConfig.workerConfig``): the target cluster's only.
WORKER = (CLUSTER,)

#: MirrorMaker 2's ``config.properties.exclude`` default (DefaultConfigPropertyFilter).
DEFAULT_CONFIG_EXCLUDE = ("follower\\.replication\\.throttled\\.replicas, "
                          "leader\\.replication\\.throttled\\.replicas, "
                          "message\\.timestamp\\.difference\\.max\\.ms, message\\.timestamp\\.type, "
                          "unclean\\.leader\\.election\\.enable, min\\.insync\\.replicas")
#: MirrorMaker 2's ``groups.exclude`` default (DefaultGroupFilter).
DEFAULT_GROUPS_EXCLUDE = "console-consumer-.*, connect-.*, __.*"
#: MirrorMaker 2's DefaultTopicFilter default for ``topics.exclude``.
DEFAULT_TOPICS_EXCLUDE = ".*[\\-\\.]internal, .*\\.replica, __.*"
DEFAULT_POLICY = "org.apache.kafka.connect.mirror.DefaultReplicationPolicy"
#: MirrorMaker 2's default plugin classes: the only ones that can run here.
DEFAULT_TOPIC_FILTER = "org.apache.kafka.connect.mirror.DefaultTopicFilter"
DEFAULT_GROUP_FILTER = "org.apache.kafka.connect.mirror.DefaultGroupFilter"
DEFAULT_CONFIG_FILTER = "org.apache.kafka.connect.mirror.DefaultConfigPropertyFilter"
DEFAULT_FORWARDING_ADMIN = "org.apache.kafka.clients.admin.ForwardingAdmin"

#: A validator returns what is wrong with a value (``0 is not a positive number``), or None.
Validator = Callable[[object], Optional[str]]


def at_least(minimum: int, problem: Optional[str] = None) -> Validator:
    problem = problem or ("is negative" if minimum == 0 else "is not a positive number")

    def check(value):
        return None if value >= minimum else f"{value} {problem}"
    check.doc = f"at least {minimum}"
    return check


def replication_factor(value) -> Optional[str]:
    return None if value == -1 or value >= 1 else f"{value} is not a replication factor (-1: the broker's default)"


replication_factor.doc = "at least 1, or -1"


def only(accepted: str, why: str) -> Validator:
    """A Java plugin class: MirrorMaker 2's default is accepted (it is what runs here), another is
    refused, since running without it would copy something else than the team's file says."""
    def check(value):
        return None if value.strip() == accepted else f"{value}: {why}"
    check.doc = accepted
    return check


def port(value) -> Optional[str]:
    return None if 0 <= value <= 65535 else f"{value} is not a port"


port.doc = "0 to 65535"


def non_empty(value) -> Optional[str]:
    return None if value else "must not be empty"


non_empty.doc = "not empty"


def cluster_alias(value) -> Optional[str]:
    return None if value and value.strip() == value else f"'{value}' is not a cluster alias"


cluster_alias.doc = "no surrounding spaces"


def regex_list_pattern(value: str) -> Pattern[str]:
    """MirrorMaker 2's LIST of regexes: comma-separated, trimmed, joined with ``|``, full match; an
    empty list matches nothing. Each entry is a Java regex, translated as ``--include``'s are so
    that it means the same on every Python. Raises ``ConfigError``."""
    from .topics import compile_java_regex

    entries = [entry.strip() for entry in value.split(",") if entry.strip()]
    # Joined as MirrorMaker 2 joins them (an inline flag or \\Q in one entry reaches the next).
    return compile_java_regex("|".join(entries) or "(?!)")


def regex_list(value) -> Optional[str]:
    from .topics import InvalidRegex

    try:
        regex_list_pattern(value)
    except InvalidRegex as exc:
        return f"{value} is an invalid regex list: {exc.reason}"
    return None


regex_list.doc = "comma-separated regexes"


def _broker_default(value):
    """Kafka's -1: the broker's default replication factor."""
    return None if value == -1 else value


@dataclass(frozen=True)
class Property:
    """How mm2.properties gives an option: its key, the scopes it is read at, MirrorMaker 2's
    default (ours for an extension), and what its text becomes when that is not the option's."""

    key: str
    scopes: Tuple[str, ...]
    default: object
    doc: Optional[str] = None
    #: The type in the file when it differs from the option's (a FLAG option is a BOOLEAN here).
    type: Optional[str] = None
    choices: Tuple[str, ...] = ()
    #: The field's value from the typed text (``exactly.once.source.support = enabled`` -> True).
    value: Optional[Callable[[object], object]] = None
    #: False: our extension, not a MirrorMaker 2 setting.
    mm2: bool = True
    #: Kafka 3.x's deprecated keys of the setting, read where the key itself is not given
    #: (``ConfigUtils.translateDeprecatedConfigs``; Kafka 4.0 removed them).
    aliases: Tuple[str, ...] = ()
    #: How this tool differs from Kafka's MirrorMaker 2 with this setting ("": it does not).
    differs: str = ""


@dataclass(frozen=True)
class Option:
    #: The dotted name: the command line's ``--name`` (a file-only setting: its mm2.properties key).
    name: str
    type: str
    #: The command line's default, and the default of the field it feeds (None: not set).
    default: object
    #: The ``--help`` line (Kafka's own words for Kafka's options).
    doc: str
    group: str
    #: What the value becomes: ``mirror.<f>`` (MirrorMakerConfig), ``replication.<f>``
    #: (ReplicationOptions), ``spark.<f>`` (SparkOptions); None: the command reads it itself.
    field: Optional[str] = None
    aliases: Tuple[str, ...] = ()
    #: The default as ``--help`` and the docs show it, where it is not the value.
    shown: Optional[str] = None
    validator: Optional[Validator] = None
    choices: Tuple[str, ...] = ()
    required: bool = False
    #: Given several times (``--spark.conf``); every other option with a value is given at most once.
    repeatable: bool = False
    #: False: an mm2.properties setting only, not on the command line.
    cli: bool = True
    prop: Optional[Property] = None
    #: More for docs/configuration.md than fits the ``--help`` line.
    notes: str = ""

    @property
    def flags(self) -> Tuple[str, ...]:
        return tuple(f"--{name}" for name in (self.name, *self.aliases)) if self.cli else ()

    @property
    def flag(self) -> str:
        return f"--{self.name}"

    @property
    def attr(self) -> str:
        """The field's name, else the name as a Python identifier (click's parameter name)."""
        if self.field:
            return self.field.partition(".")[2]
        return self.name.replace(".", "_").replace("-", "_")

    @property
    def metavar(self) -> Optional[str]:
        """jopt-simple's ``<Type>`` in --help."""
        return None if self.type == FLAG else ("Integer" if self.type == INT else "String")

    def shown_default(self) -> Optional[str]:
        if self.shown is not None:
            return self.shown
        if self.type == FLAG or self.repeatable or self.default is None:
            return None
        return format_value(self.default)

    def problem(self, value) -> Optional[str]:
        """What is wrong with a value of the field (None is never wrong: not set)."""
        if value is None:
            return None
        if self.choices and value not in self.choices:
            return f"'{value}' is not one of {', '.join(self.choices)}"
        return self.validator(value) if self.validator is not None else None


def format_value(value) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _mm2(key: Optional[str] = None, scopes: Tuple[str, ...] = CONNECTOR, default: object = "same", **kw) -> dict:
    """The ``prop`` of an option (``key`` and ``default``: the option's unless given)."""
    return dict(mm2_key=key, mm2_scopes=scopes, mm2_default=default, mm2=kw)


def _option(name: str, type: str, default: object, doc: str, group: str, mm2_key: Optional[str] = None,
            mm2_scopes: Tuple[str, ...] = (), mm2_default: object = "same", mm2: Optional[dict] = None,
            **kw) -> Option:
    prop = None
    if mm2 is not None:
        prop = Property(mm2_key or name, mm2_scopes, default if mm2_default == "same" else mm2_default, **mm2)
    return Option(name, type, default, doc, group, prop=prop, **kw)


def _file(name: str, type: str, default: object, scopes: Tuple[str, ...], doc: str, field: Optional[str] = None,
          ours: object = "same", **kw) -> Option:
    """A setting of mm2.properties only; ``ours``: the field's default where it is not MirrorMaker 2's."""
    prop_kw = {k: kw.pop(k) for k in ("value", "aliases", "differs") if k in kw}
    return Option(name, type, default if ours == "same" else ours, doc, MM2, field=field, cli=False,
                  prop=Property(name, scopes, default, **prop_kw), **kw)


OPTIONS: Tuple[Option, ...] = (
    # Kafka 3.9's kafka-mirror-maker.sh: its 14 options, names, defaults and --help words.
    _option("abort.on.send.failure", BOOLEAN, True, "Stop the entire mirror maker when a send failure occurs",
            KAFKA, field="mirror.abort_on_send_failure", aliases=("abort.on.send.fail",),
            notes="At the first record the target does not take, stop every stream without committing past it "
                  "(exit 255); false: log it, count it as dropped and skip it. `--abort.on.send.fail` is KIP-3's "
                  "spelling.",
            **_mm2(doc="A record the target refuses stops the process (exit 255); false: counted and skipped.",
                   mm2=False)),
    _option("consumer.config", STRING, None, "Embedded consumer config for consuming from the source cluster.",
            KAFKA, required=True, notes="The Java properties file of the consumer reading the source cluster."),
    _option("consumer.rebalance.listener", STRING, None,
            "A custom rebalance listener of type ConsumerRebalanceListener", KAFKA,
            field="mirror.rebalance_listener",
            notes="A Python class by dotted path (docs/plugins.md), called after the mirror's own listener."),
    _option("help", FLAG, False, "Print usage information.", KAFKA,
            notes="On stderr, exit 1, as Kafka's tool."),
    _option("include", STRING, None, "Java regex (String): List of included topics to mirror.", KAFKA,
            notes="Required (or `--whitelist`). Kafka's clean-up (trim, `,` to `|`, spaces removed, quotes "
                  "stripped) and full match; Java's regex constructs are translated."),
    _option("message.handler", STRING, None,
            "Message handler which will process every record in-between consumer and producer.", KAFKA,
            field="mirror.message_handler", notes="A Python class or function by dotted path (docs/plugins.md)."),
    _option("message.handler.args", STRING, None, "Arguments used by custom message handler for mirror maker.",
            KAFKA, field="mirror.message_handler_args", notes="One string, given to the handler unsplit."),
    _option("new.consumer", FLAG, False,
            "DEPRECATED Use new consumer in mirror maker (this is the default so this option will be removed in a "
            "future version).", KAFKA, notes="Accepted and ignored, as in Kafka."),
    _option("num.streams", INT, 1, "Number of threads: Number of consumption streams.", KAFKA,
            field="mirror.num_streams", validator=at_least(1, "is not a positive number of threads"),
            notes="Each stream has its own consumer in the group; record mode's streams share one producer.",
            **_mm2("tasks.max", doc="Streams per flow on each node (MirrorMaker 2's tasks).",
                   differs="counted per node: N nodes run N x tasks.max streams (MirrorMaker 2 spreads "
                           "tasks.max tasks over its nodes)")),
    _option("offset.commit.interval.ms", INT, 60000,
            "offset commit interval in millisecond: Offset commit interval in ms.", KAFKA,
            field="mirror.offset_commit_interval_ms", validator=at_least(0),
            notes="Time between flush-then-commit cycles (with `--exactly.once`, between transactions).",
            **_mm2("offset.flush.interval.ms", WORKER,
                   doc="Time between flush-then-commit cycles of the flows into this cluster.")),
    _option("producer.config", STRING, None, "Embedded producer config.", KAFKA, required=True,
            notes="The Java properties file of the producer writing the target cluster (may hold "
                  "`producer.type=sync|async`)."),
    _option("rebalance.listener.args", STRING, None,
            "Arguments used by custom rebalance listener for mirror maker consumer.", KAFKA,
            field="mirror.rebalance_listener_args", aliases=("consumer.rebalance.listener.args",),
            notes="`--consumer.rebalance.listener.args` is KIP-3's spelling."),
    _option("version", FLAG, False, "Display Kafka version.", KAFKA,
            notes="This tool's version, on stdout, exit 0."),
    _option("whitelist", STRING, None,
            "Java regex (String): DEPRECATED, use --include instead; ignored if --include specified. List of "
            "included topics to mirror.", KAFKA, notes="Deprecated (a WARN); `--include` wins."),

    # Ours.
    _option("log.level", STRING, "INFO", "DEBUG, INFO, WARN or ERROR (or the MIRROR_MAKER_LOG_LEVEL environment "
            "variable).", OURS),
    _option("metrics.port", INT, None, "Serve Prometheus metrics on /metrics, and /healthz and /ready, on this "
            "port (off unless given).", OURS, field="mirror.metrics_port", validator=port,
            notes="docs/operations.md lists the metrics.",
            **_mm2(scopes=(TOP,), doc="Serve /metrics, /healthz and /ready on this port.", mm2=False)),
    _option("metrics.bind", STRING, "0.0.0.0", "The address the metrics server listens on.", OURS,
            field="mirror.metrics_bind", **_mm2(scopes=(TOP,), mm2=False)),
    _option("status.interval.ms", INT, 30000, "Log a status line (rates, lag, dropped, partitions) this often; 0 "
            "turns it off.", OURS, field="mirror.status_interval_ms", validator=at_least(0),
            **_mm2(scopes=(TOP,), doc="A status line per flow this often; 0 turns it off.", mm2=False)),
    _option("exit.when.caught.up", FLAG, False, "Stop, after the final flush and commit, once every assigned "
            "partition has reached its end; exit 0 and print a summary (for cron).", OURS,
            field="mirror.exit_when_caught_up"),
    _option("use.raw.bytes", FLAG, False, "Shallow mirroring (KIP-712): copy whole record batches as they are "
            "(same compression, same partition numbers) instead of record by record; a handler then decides per "
            "batch.", OURS, field="mirror.use_raw_bytes", notes="docs/raw-mode.md. Needs the `raw` extra.",
            **_mm2(type=BOOLEAN, doc="Shallow mirroring: whole record batches as they are (docs/raw-mode.md).",
                   mm2=False)),
    _option("exactly.once", FLAG, False, "Exactly-once (KIP-656): each stream commits its records and the source "
            "offsets in one transaction on the target; readers use isolation.level=read_committed.", OURS,
            field="mirror.exactly_once", notes="docs/exactly-once.md.",
            **_mm2("exactly.once.source.support", WORKER, "disabled", type=STRING,
                   choices=("disabled", "preparing", "enabled"), value=lambda text: text == "enabled",
                   doc="enabled: the flows into this cluster are exactly-once (transactions on the target).",
                   differs="preparing is read as disabled (no rolling upgrade of Connect workers here)")),
    _option("exactly.once.group", STRING, None, "The consumer group on the target that holds the source offsets "
            "(exactly-once).", OURS, field="mirror.exactly_once_group_option", shown="the source group.id"),
    _option("shutdown.timeout.ms", INT, 30000, "How long a clean stop may wait for the target to acknowledge "
            "queued records before it exits without committing them.", OURS, field="mirror.shutdown_timeout_ms",
            validator=at_least(0),
            **_mm2(scopes=(TOP,), doc="How long a clean stop waits for the targets.", mm2=False)),

    # MirrorMaker 2's topic capabilities and consumer failover, with its property names; off by default.
    _option("replication.policy.class", CLASS, None, "How target topics are named: identity (names unchanged), "
            "default (MirrorMaker 2's <source alias><separator><topic>) or a Python class by dotted path. Given, "
            "MirrorMaker 2's topic rules apply too: internal topics and cycles are never mirrored.", MM2,
            field="replication.policy", shown="none (MirrorMaker v1: names unchanged, no MirrorMaker 2 rules)",
            notes="`default` needs both cluster aliases. A Python class has `format_remote_topic(source_alias, "
                  "topic)`, `topic_source(topic)` and `upstream_topic(topic)` (subclass "
                  "`mirror_maker.replication.policies.ReplicationPolicy`); the Java class names of the two built-in "
                  "policies are accepted too.",
            **_mm2(default=DEFAULT_POLICY, doc="How remote topics are named: MirrorMaker 2's Default or "
                   "IdentityReplicationPolicy, or a Python class by dotted path.")),
    _option("replication.policy.separator", STRING, ".", "The separator of the default policy's remote topic "
            "names.", MM2, field="replication.separator", validator=non_empty,
            notes="Also in its internal topic names.", **_mm2(doc="The default policy's separator.")),
    _option("source.cluster.alias", STRING, "source", "The source cluster's alias.", MM2,
            field="replication.source_alias", validator=cluster_alias,
            notes="Names remote topics and detects cycles: left at their defaults, mirrors A->B and B->A would "
                  "loop topics, so the default policy needs both aliases. mm2.properties: the flow's source "
                  "alias."),
    _option("target.cluster.alias", STRING, "target", "The target cluster's alias (a topic whose source it is, by "
            "the policy, is a cycle).", MM2, field="replication.target_alias", validator=cluster_alias,
            notes="mm2.properties: the flow's target alias."),
    _option("replication.factor", INT, None, "The replication factor of the target topics the mirror creates.",
            MM2, field="replication.replication_factor", shown="the target broker's", validator=at_least(1),
            **_mm2(default=2, value=_broker_default,
                   doc="Replication factor of the remote topics the flow creates (-1: the broker's default).")),
    _option("refresh.topics.enabled", BOOLEAN, False, "true: a target topic grows to its source topic's partition "
            "count, and the new partitions are mirrored from their start.", MM2, field="replication.refresh_topics",
            notes="Never shrinks; the new partitions are mirrored from their start, whatever auto.offset.reset says.",
            **_mm2(default=True, doc="Remote topics grow with their source topics' partitions.")),
    _option("refresh.topics.interval.seconds", INT, 600, "How often partition counts are compared.", MM2,
            field="replication.refresh_topics_interval_s", validator=at_least(1),
            **_mm2(doc="How often topics and partitions are listed.")),
    _option("sync.topic.configs.enabled", BOOLEAN, False, "true: target topics are created with their source "
            "topic's non-default configs and kept in sync.", MM2, field="replication.sync_topic_configs",
            notes="A non-default source value is set, one at its default on the source is deleted on the target "
                  "(`use.defaults.from=target`, incremental API); read-only, sensitive and static-broker values "
                  "are never copied.",
            **_mm2(default=True, doc="Remote topics keep their source topics' configs.")),
    _option("sync.topic.configs.interval.seconds", INT, 600, "How often topic configs are synced.", MM2,
            field="replication.sync_topic_configs_interval_s", validator=at_least(1),
            **_mm2(doc="How often configs are synced.")),
    _option("config.properties.exclude", LIST, DEFAULT_CONFIG_EXCLUDE, "Comma-separated regexes of topic configs "
            "never synced.", MM2, field="replication.config_exclude", validator=regex_list,
            shown="MirrorMaker 2's (throttled replicas, message.timestamp.*, unclean.leader.election.enable, "
                  "min.insync.replicas)", **_mm2(doc="Topic configs never synced.",
                                                 aliases=("config.properties.blacklist",))),
    _option("sync.topic.acls.enabled", BOOLEAN, False, "true: the source's literal topic ACLs are copied to the "
            "target topics (never ALLOW WRITE, ALLOW ALL as READ, DENY as it is).", MM2,
            field="replication.sync_topic_acls",
            notes="The LITERAL ACLs of the mirrored topics, as MirrorMaker 2 copies them: ALLOW WRITE is left out "
                  "(only the mirror writes there), and a DENY left behind would widen access on the target.",
            **_mm2(default=True, doc="The source's literal topic ACLs are copied to the remote topics.")),
    _option("sync.topic.acls.interval.seconds", INT, 600, "How often topic ACLs are synced.", MM2,
            field="replication.sync_topic_acls_interval_s", validator=at_least(1),
            **_mm2(doc="How often ACLs are synced.")),
    _option("emit.offset-syncs.enabled", BOOLEAN, False, "true: (source offset, target offset) pairs of mirrored "
            "records go to MirrorMaker 2's offset-syncs topic (needs the source partition kept: "
            "PartitionPreservingHandler, or --use.raw.bytes).", MM2, field="replication.emit_offset_syncs",
            notes="docs/mirror-maker-2.md.", **_mm2(default=True, doc="Offset syncs are written.")),
    _option("offset-syncs.topic.location", STRING, "source", "source or target: the cluster of the offset-syncs "
            "topic.", MM2, field="replication.offset_syncs_location", choices=("source", "target"),
            **_mm2(doc="The cluster of the offset-syncs topic.")),
    _option("offset.lag.max", INT, 100, "How far the target offset may move past the last offset sync before "
            "another.", MM2, field="replication.offset_lag_max", validator=at_least(0),
            notes="0: a sync for every record, as in MirrorMaker 2.",
            **_mm2(doc="How far a remote partition may move past its last offset sync.")),
    _option("emit.checkpoints.enabled", BOOLEAN, False, "true: source consumer groups' offsets, translated, go to "
            "<source alias>.checkpoints.internal on the target.", MM2, field="replication.emit_checkpoints",
            **_mm2(default=True, doc="Source groups' offsets, translated, go to <source>.checkpoints.internal on "
                   "the target.")),
    _option("emit.checkpoints.interval.seconds", INT, 60, "How often checkpoints are written.", MM2,
            field="replication.emit_checkpoints_interval_s", validator=at_least(1), **_mm2()),
    _option("groups", LIST, ".*", "Comma-separated regexes of the consumer groups checkpointed.", MM2,
            field="replication.groups", validator=regex_list, **_mm2(doc="The consumer groups checkpointed.")),
    _option("groups.exclude", LIST, DEFAULT_GROUPS_EXCLUDE, "Comma-separated regexes of groups never "
            "checkpointed.", MM2, field="replication.groups_exclude", validator=regex_list,
            notes="mm2.properties: the flows' own groups are never checkpointed either.",
            **_mm2(doc="Groups never checkpointed.", aliases=("groups.blacklist",))),
    _option("sync.group.offsets.enabled", BOOLEAN, False, "true: translated offsets are committed to the target's "
            "groups while they have no active member there (never backwards).", MM2,
            field="replication.sync_group_offsets",
            **_mm2(doc="Translated offsets are committed to groups with no active member on the target.")),
    _option("sync.group.offsets.interval.seconds", INT, 60, "How often group offsets are synced.", MM2,
            field="replication.sync_group_offsets_interval_s", validator=at_least(1), **_mm2()),
    _option("emit.heartbeats.enabled", BOOLEAN, False, "true: heartbeats (source alias, target alias, time) go to "
            "the target's heartbeats topic.", MM2, field="replication.emit_heartbeats",
            **_mm2(default=True, doc="Heartbeats go to the target's heartbeats topic (also for a pair whose flow "
                   "is not enabled, as MirrorMaker 2 does).")),
    _option("emit.heartbeats.interval.seconds", INT, 1, "How often heartbeats are written.", MM2,
            field="replication.emit_heartbeats_interval_s", validator=at_least(1), **_mm2()),

    # Spark mode.
    _option("spark", FLAG, False, "Run the streams as tasks of one Spark job (PySpark: pip install "
            "'kafka-mirror-maker[spark]').", SPARK, notes="docs/spark.md."),
    _option("spark.master", STRING, None, "The Spark master URL (spark://host:port, yarn, k8s://...).", SPARK,
            field="spark.master", shown="local[<num.streams>]",
            notes="Or spark-submit's `--master`; a `local[K]` with K below the streams is refused at once."),
    _option("spark.conf", STRING, (), "key=value: A Spark setting; repeat the option for several.", SPARK,
            field="spark.conf", repeatable=True),
    _option("spark.py.files", STRING, None, "Comma-separated .py/.zip/.egg files the executors need (plugin "
            "modules that only this machine has are shipped without it).", SPARK, field="spark.py_files"),
    _option("spark.max.restarts", INT, 3, "How often in a row the driver restarts the job after a worker died or "
            "stopped on its own.", SPARK, field="spark.max_restarts", validator=at_least(0),
            notes="A job that ran 5 minutes resets the count."),

    # mm2.properties only: the clusters, the flows, and what MirrorMaker 2 has that the command line has not.
    _file("clusters", LIST, None, (TOP,), "The cluster aliases.", required=True),
    _file("bootstrap.servers", STRING, None, (CLUSTER,), "A cluster's brokers, as <alias>.bootstrap.servers (for "
          "every alias).", required=True),
    _file("enabled", BOOLEAN, False, CONNECTOR, "<source>-><target>.enabled = true runs the flow; at the top "
          "level, every pair MirrorMaker 2 runs (every pair unless emit.heartbeats.enabled = false)."),
    _file("config.providers", LIST, "", (TOP,), "Kafka's config providers (${provider:path:key} values anywhere "
          "in the file: file, env and dir)."),
    _file("topics", LIST, ".*", CONNECTOR, "Topics to mirror: comma-separated regexes, full match.",
          validator=regex_list),
    _file("replication.policy.internal.topic.separator.enabled", BOOLEAN, True, CONNECTOR,
          "false: MirrorMaker 2's internal topics (offset syncs, checkpoints) keep '.' in their names whatever "
          "replication.policy.separator says.", "replication.internal_separator_enabled"),
    _file("topics.exclude", LIST, DEFAULT_TOPICS_EXCLUDE, CONNECTOR, "Topics never mirrored; wins over topics.",
          validator=regex_list, aliases=("topics.blacklist",)),
    _file("topic.filter.class", CLASS, DEFAULT_TOPIC_FILTER, CONNECTOR, "Only MirrorMaker 2's default (topics, "
          "topics.exclude): a Java class cannot run here.",
          validator=only(DEFAULT_TOPIC_FILTER, "a Java TopicFilter cannot run here; use topics and topics.exclude")),
    _file("group.filter.class", CLASS, DEFAULT_GROUP_FILTER, CONNECTOR, "Only MirrorMaker 2's default (groups, "
          "groups.exclude): a Java class cannot run here.",
          validator=only(DEFAULT_GROUP_FILTER, "a Java GroupFilter cannot run here; use groups and groups.exclude")),
    _file("config.property.filter.class", CLASS, DEFAULT_CONFIG_FILTER, CONNECTOR, "Only MirrorMaker 2's default "
          "(config.properties.exclude): a Java class cannot run here.",
          validator=only(DEFAULT_CONFIG_FILTER, "a Java ConfigPropertyFilter cannot run here; use "
                         "config.properties.exclude")),
    _file("forwarding.admin.class", CLASS, DEFAULT_FORWARDING_ADMIN, CONNECTOR, "Only Kafka's ForwardingAdmin "
          "(topics, partitions, configs and ACLs created through the admin API): a Java class cannot run here.",
          validator=only(DEFAULT_FORWARDING_ADMIN, "a Java ForwardingAdmin cannot run here: topics, configs and "
                         "ACLs are created through the admin API")),
    _file("heartbeats.replication.enabled", BOOLEAN, True, CONNECTOR,
          "Heartbeats topics are mirrored whatever topics says (only true is supported).",
          differs="false is not supported (one WARN): heartbeats topics are always mirrored"),
    _file("offset-syncs.topic.replication.factor", INT, 3, CONNECTOR,
          "Replication factor of the offset-syncs topic (-1: the broker's default).",
          "replication.offset_syncs_replication_factor", ours=None, validator=replication_factor),
    _file("checkpoints.topic.replication.factor", INT, 3, CONNECTOR,
          "Replication factor of the checkpoints topic (-1: the broker's default).",
          "replication.checkpoints_replication_factor", ours=None, validator=replication_factor),
    _file("heartbeats.topic.replication.factor", INT, 3, CONNECTOR,
          "Replication factor of the heartbeats topic (-1: the broker's default).",
          "replication.heartbeats_replication_factor", ours=None, validator=replication_factor),
    _file("use.incremental.alter.configs", STRING, "requested", CONNECTOR,
          "Configs are always synced with the incremental API (never is not supported).",
          choices=("requested", "required", "never"),
          differs="never is not supported (one WARN): configs are synced with the incremental API"),
    _file("refresh.groups.enabled", BOOLEAN, True, CONNECTOR,
          "Groups are listed again at every checkpoint here, so new groups are always found.",
          differs="groups are listed at every checkpoint whatever it says"),
    _file("refresh.groups.interval.seconds", INT, 600, CONNECTOR, "See refresh.groups.enabled."),
    # MirrorMakerConfig.workerConfig takes the top level's offset.storage.* over the target cluster's.
    _file("offset.storage.topic", STRING, None, (TOP, CLUSTER),
          "Kafka Connect's offsets topic, where Kafka's MirrorMaker 2 keeps a flow's progress "
          "(mm2-offsets.<source>.internal by default): read and kept current, so that either tool takes a flow "
          "over where the other left it.",
          differs="read at each flow start, and written as the flow commits (by the node holding its election)"),
    _file("offset.storage.partitions", INT, 25, (TOP, CLUSTER),
          "The partitions of offset.storage.topic where this tool creates it (as Kafka Connect would).",
          validator=at_least(1)),
    _file("offset.storage.replication.factor", INT, 3, (TOP, CLUSTER),
          "The replication factor of offset.storage.topic where this tool creates it (-1: the broker's default).",
          validator=replication_factor),
)

BY_NAME: Dict[str, Option] = {option.name: option for option in OPTIONS}
#: The options mm2.properties gives, by key.
BY_KEY: Dict[str, Option] = {option.prop.key: option for option in OPTIONS if option.prop is not None}
#: Kafka 3.x's deprecated keys, by key, to the option they name.
BY_ALIAS: Dict[str, Option] = {alias: option for option in OPTIONS if option.prop is not None
                               for alias in option.prop.aliases}


def prop_option(key: str) -> Optional[Option]:
    """The option an mm2.properties key (or a deprecated key of it) gives, if any."""
    return BY_KEY.get(key) or BY_ALIAS.get(key)


def command_line(group: Optional[str] = None) -> Iterator[Option]:
    """The options of ``kafka-mirror-maker`` (of one group), in declaration order."""
    return (o for o in OPTIONS if o.cli and (group is None or o.group == group))


def fields(kind: str) -> Iterator[Option]:
    """The options that feed a field of ``kind`` (mirror, replication, spark)."""
    return (o for o in OPTIONS if o.field and o.field.partition(".")[0] == kind)


def defaults(kind: str) -> Dict[str, object]:
    """Field name -> default, for the fields of ``kind``: the config objects' defaults."""
    return {o.attr: o.default for o in fields(kind)}


# Rules between options.

@dataclass(frozen=True)
class Needs:
    """``option`` means something only with ``switch`` true: given without it, one WARN, ignored
    (a MirrorMaker 2 user expects the switch on, as it is by default there)."""

    option: str
    switch: str


@dataclass(frozen=True)
class Implies:
    """``feature`` needs ``needed``, as in MirrorMaker 2. On the command line the feature turns
    ``needed`` on unless it is given as false (one error line); in mm2.properties, where both are
    on by default, the feature is off where ``needed`` is (a WARN when the feature was asked for),
    as MirrorMaker 2's connector would not run."""

    feature: str
    needed: str


@dataclass(frozen=True)
class OnlyWith:
    """``option`` given without ``switch``: one error line, exit 1."""

    option: str
    switch: str


@dataclass(frozen=True)
class Excludes:
    """Not both: one error line, exit 1, with the reason."""

    option: str
    other: str
    reason: str


RULES = (
    *(Needs(option, switch) for option, switch in (
        ("refresh.topics.interval.seconds", "refresh.topics.enabled"),
        ("sync.topic.configs.interval.seconds", "sync.topic.configs.enabled"),
        ("config.properties.exclude", "sync.topic.configs.enabled"),
        ("sync.topic.acls.interval.seconds", "sync.topic.acls.enabled"),
        ("offset-syncs.topic.location", "emit.offset-syncs.enabled"),
        ("offset.lag.max", "emit.offset-syncs.enabled"),
        ("emit.checkpoints.interval.seconds", "emit.checkpoints.enabled"),
        ("groups", "emit.checkpoints.enabled"),
        ("groups.exclude", "emit.checkpoints.enabled"),
        ("sync.group.offsets.interval.seconds", "sync.group.offsets.enabled"),
        ("emit.heartbeats.interval.seconds", "emit.heartbeats.enabled"))),
    # In the order a feature's need is followed: checkpoints need offset syncs, then group offset
    # sync needs checkpoints (the command line turns them on in the reverse order).
    Implies("emit.checkpoints.enabled", "emit.offset-syncs.enabled"),
    Implies("sync.group.offsets.enabled", "emit.checkpoints.enabled"),
    OnlyWith("exactly.once.group", "exactly.once"),
    OnlyWith("spark.master", "spark"),
    OnlyWith("spark.conf", "spark"),
    OnlyWith("spark.py.files", "spark"),
    Excludes("exactly.once", "use.raw.bytes", "the raw path's producer is not transactional"),
)


def rules(kind) -> Iterator:
    return (rule for rule in RULES if isinstance(rule, kind))


def excludes(option: str, other: str) -> Excludes:
    return next(r for r in rules(Excludes) if (r.option, r.other) == (option, other))


# What mm2.properties may hold that no option above is.

#: MirrorMaker 2 settings this tool does not have: one WARN each, naming why.
UNSUPPORTED: Dict[str, str] = {
    "consumer.poll.timeout.ms": "the streams poll as MirrorMaker v1 does",
    "admin.timeout.ms": "admin requests have their own bounded timeouts",
    "metric.reporters": "metrics are served on metrics.port (Prometheus)",
    "add.source.alias.to.metrics": "removed in Kafka 4.0; the source label is always there",
}

#: Kafka Connect's own settings (its worker group, internal topics, converters, REST server): a
#: process without Connect has nothing to do with them (one INFO line). Matched as prefixes.
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
