"""The mirror's one frozen configuration, built from the command line and the two properties files.

Nothing here connects to a cluster: the files are read (``properties``), each turned into client
settings (``client_conf``) and the include string compiled (``topics``); the options' defaults
are the spec's (``spec``), and their validators ran where they were read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Optional, Pattern

from ..errors import ConfigError
from . import spec
from .client_conf import build_consumer_conf, build_producer_conf, parse_int
from .properties import load_properties
from .replication import ReplicationOptions
from .topics import compile_include

DEFAULT_BATCH_SIZE = 500  # Java's max.poll.records default


#: The defaults of the options, from the spec.
_DEFAULTS = spec.defaults("mirror")


@dataclass(frozen=True)
class MirrorMakerConfig:
    """Everything a run needs, validated; runtime objects read nothing else."""

    consumer: Dict[str, str]
    producer: Dict[str, str]
    include: Pattern[str]
    num_streams: int = _DEFAULTS["num_streams"]
    offset_commit_interval_ms: int = _DEFAULTS["offset_commit_interval_ms"]
    abort_on_send_failure: bool = _DEFAULTS["abort_on_send_failure"]
    message_handler: Optional[str] = _DEFAULTS["message_handler"]
    message_handler_args: Optional[str] = _DEFAULTS["message_handler_args"]
    rebalance_listener: Optional[str] = _DEFAULTS["rebalance_listener"]
    rebalance_listener_args: Optional[str] = _DEFAULTS["rebalance_listener_args"]
    # From the properties files (client settings the mirror reads itself).
    batch_size: int = DEFAULT_BATCH_SIZE
    exclude_internal_topics: bool = True
    topic_refresh_ms: int = 300000
    sync_send: bool = False
    max_block_ms: Optional[int] = None
    # Ours.
    shutdown_timeout_ms: int = _DEFAULTS["shutdown_timeout_ms"]
    metrics_port: Optional[int] = _DEFAULTS["metrics_port"]
    metrics_bind: str = _DEFAULTS["metrics_bind"]
    status_interval_ms: int = _DEFAULTS["status_interval_ms"]
    exit_when_caught_up: bool = _DEFAULTS["exit_when_caught_up"]
    #: --use.raw.bytes: whole batches instead of records (the shallow package).
    use_raw_bytes: bool = _DEFAULTS["use_raw_bytes"]
    #: --exactly.once: transactions on the target, offsets stored there (engine.exactly_once).
    exactly_once: bool = _DEFAULTS["exactly_once"]
    #: The target's consumer group holding the source offsets (default: the source group.id).
    exactly_once_group_option: Optional[str] = _DEFAULTS["exactly_once_group_option"]
    #: MirrorMaker 2's topic capabilities (the replication package).
    replication: ReplicationOptions = ReplicationOptions()
    #: librdkafka settings laid over the source's and the target's admin clients (mm2.properties'
    #: ``<alias>.admin.*``; their connection and security come from the consumer and the producer).
    source_admin: Dict[str, str] = field(default_factory=dict)
    target_admin: Dict[str, str] = field(default_factory=dict)

    def source_admin_conf(self) -> Dict[str, str]:
        """What an admin client of the source is made of (``clients.admin.admin_client``)."""
        return {**self.consumer, **self.source_admin}

    def target_admin_conf(self) -> Dict[str, str]:
        return {**self.producer, **self.target_admin}

    @property
    def shutdown_timeout_s(self) -> float:
        return self.shutdown_timeout_ms / 1000.0

    @property
    def group_id(self) -> str:
        return self.consumer["group.id"]

    @property
    def incremental_rebalance(self) -> bool:
        """Whether a rebalance hands out and takes back only the partitions that move (so the
        consumer must use incremental_assign): the cooperative-sticky assignor, or Kafka 4's
        consumer group protocol (``group.protocol=consumer``, KIP-848), where the broker assigns."""
        if self.consumer.get("group.protocol", "classic").strip().lower() == "consumer":
            return True
        strategies = self.consumer.get("partition.assignment.strategy", "range,roundrobin")
        return [s.strip() for s in strategies.split(",") if s.strip()] == ["cooperative-sticky"]

    @property
    def exactly_once_group(self) -> str:
        return self.exactly_once_group_option or self.group_id

    @property
    def transaction_timeout_ms(self) -> int:
        """Long enough for one commit interval (three, with a minute at least), within the
        broker's default transaction.max.timeout.ms of 15 minutes."""
        return min(900000, max(60000, 3 * self.offset_commit_interval_ms))

    @property
    def producer_batch_bytes(self) -> int:
        """The most the producer puts in one batch: librdkafka's batch.size, capped by its
        message.max.bytes (both default to 1,000,000)."""
        return min(int(self.producer.get("batch.size", 1000000)),
                   int(self.producer.get("message.max.bytes", 1000000)))

    @property
    def max_poll_interval_s(self) -> float:
        """How long a consumer may go without polling before it leaves the group (librdkafka's
        and Java's default: 5 minutes); a rebalance callback must finish well within it."""
        return int(self.consumer.get("max.poll.interval.ms", 300000)) / 1000.0

    def consumer_conf(self, index: int) -> Dict[str, str]:
        """The librdkafka settings of thread ``index``'s consumer (client.id forced as Kafka does)."""
        conf = dict(self.consumer)
        conf["client.id"] = f"{self.group_id}-{index}"
        if "group.instance.id" in conf:
            conf["group.instance.id"] = f"{conf['group.instance.id']}-{index}"
        return conf


def build_config(consumer_config: str, producer_config: str, include: str, include_option: str = "--include",
                 **options) -> MirrorMakerConfig:
    """Read, translate and validate everything; nothing here connects to a cluster. ``options``
    are ``MirrorMakerConfig`` fields, each already checked by its option's validator;
    ``include_option`` is the option ``include`` was given with, for its error line."""
    consumer_props = load_properties(consumer_config, "--consumer.config")
    producer_props = load_properties(producer_config, "--producer.config")
    return config_from_properties(
        consumer_props, producer_props, compile_include(include, include_option), f"--consumer.config {consumer_config}",
        f"--producer.config {producer_config}", **options)


def config_from_properties(consumer_props: Dict[str, str], producer_props: Dict[str, str], include: Pattern[str],
                           consumer_source: str, producer_source: str, **options) -> MirrorMakerConfig:
    """The config of Java client settings given as dicts (``consumer_source`` and
    ``producer_source`` name where they came from in error lines): the properties files of
    MirrorMaker v1's command line, or one flow of MirrorMaker 2's mm2.properties."""
    consumer, consumer_engine = build_consumer_conf(consumer_props, consumer_source)
    producer, producer_engine = build_producer_conf(producer_props, producer_source)

    producer_type = producer_engine.get("producer.type", "async").strip().lower()
    if producer_type not in ("sync", "async"):
        raise ConfigError(f"{producer_source}: producer.type must be sync or async, not '{producer_type}'")
    max_block = producer_engine.get("max.block.ms")
    return MirrorMakerConfig(
        consumer=consumer,
        producer=producer,
        include=include,
        batch_size=parse_int(consumer_engine.get("max.poll.records", DEFAULT_BATCH_SIZE), "max.poll.records", 1),
        exclude_internal_topics=consumer_engine.get("exclude.internal.topics", "true").strip().lower() != "false",
        topic_refresh_ms=parse_int(consumer.get("topic.metadata.refresh.interval.ms", 300000), "metadata.max.age.ms",
                                   1),
        sync_send=producer_type == "sync",
        max_block_ms=parse_int(max_block, "max.block.ms") if max_block is not None else None,
        **options,
    )
