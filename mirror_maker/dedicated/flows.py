"""From a read mm2.properties to the flows this node runs: for each pair of clusters, the same
``MirrorMakerConfig`` the MirrorMaker v1 command line builds, with MirrorMaker 2's defaults
(the default replication policy, partitions kept, offset syncs, checkpoints, heartbeats, topic,
config and ACL syncs on) and MirrorMaker 2's precedence for client settings:

* the flow's source consumer: ``<source>-><target>.consumer.*`` below the top level's connection
  and security settings, below ``<source>.<connection or security setting>``, below
  ``<source>.consumer.*`` (``MirrorConnectorConfig.sourceConsumerConfig`` over
  ``MirrorMakerConfig.clusterProps``); ``auto.offset.reset`` defaults to earliest, and
  ``enable.auto.commit`` is always false;
* the flow's producer (Kafka Connect's worker producer on the target): the top level's connection
  and security settings, below the target's, below ``<target>.producer.*``, below
  ``<source>-><target>.producer.override.*``.

Names an operator can predict: the flow's consumer group on the source is ``mm2-<source>-><target>``
(``<source>-><target>.consumer.group.id`` or ``<source>.consumer.group.id`` to choose another);
its singletons are elected in ``mm2-<source>-><target>-singletons`` on the target (``election``).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, replace
from typing import Dict, List, Optional, Pattern, Sequence, Tuple

import regex

from ..config import spec
from ..config.client_conf import build_admin_overrides, build_consumer_conf, settle_transactions
from ..config.mirror_config import MirrorMakerConfig, config_from_properties
from ..config.replication import build_replication_options, compile_list, follow_partitions
from ..errors import ConfigError, PluginLoadError
from ..replication.policies import cycle_warning, topic_rules
from .election import election_group
from .mm2_file import Mm2File

log = logging.getLogger("mirror_maker.dedicated")

#: MirrorMaker 2 keeps each record's source partition.
PARTITION_KEEPING_HANDLER = "mirror_maker.handlers.PartitionPreservingHandler"


def flow_group(source: str, target: str) -> str:
    return f"mm2-{source}->{target}"


@dataclass(frozen=True)
class Flow:
    source: str
    target: str
    #: False: a pair whose flow is not enabled, run for its heartbeats only (MirrorMaker 2's herder).
    enabled: bool
    config: MirrorMakerConfig
    #: librdkafka settings of a consumer of the target: the singleton election's.
    election_conf: Dict[str, str]
    #: Where Kafka's MirrorMaker 2 keeps this flow's progress, on the target (``takeover``), and
    #: the partitions and replication factor (None: the broker's) it has where this tool creates it.
    connect_offsets_topic: str = ""
    connect_offsets_partitions: int = 25
    connect_offsets_replication_factor: Optional[int] = 3

    @property
    def name(self) -> str:
        return f"{self.source}->{self.target}"


@dataclass(frozen=True)
class RunSettings:
    """The process's own settings (our extensions, top level only)."""

    metrics_port: Optional[int]
    metrics_bind: str
    status_interval_ms: int
    shutdown_timeout_ms: int


def _per_process(option: spec.Option) -> bool:
    """Our settings of the whole process (the top level only), not of each flow."""
    return option.prop.scopes == (spec.TOP,)


def run_settings(file: Mm2File) -> RunSettings:
    return RunSettings(**{o.attr: file.field(o.prop.key) for o in spec.fields("mirror")
                          if o.prop is not None and _per_process(o)})


def plan_flows(file: Mm2File, targets: Optional[Sequence[str]] = None) -> List[Flow]:
    """Every pair this node runs: enabled flows, and pairs run for their heartbeats only, whose
    target is one of ``targets`` (``--clusters``; all clusters when None)."""
    if targets:
        unknown = [t for t in targets if t not in file.clusters]
        if unknown:
            raise ConfigError(f"--clusters: {', '.join(unknown)} not in clusters ({', '.join(file.clusters)})")
    chosen = set(targets or file.clusters)
    pairs = [pair for pair in file.heartbeat_pairs() if pair[1] in chosen]
    enabled = set(file.enabled_pairs())
    if not pairs:
        raise ConfigError(f"{file.path}: no source->target replication flows"
                          + (f" into {', '.join(sorted(chosen))}" if targets else "")
                          + ": enable one with <source>-><target>.enabled = true")
    if not enabled & set(pairs):
        log.warning("%s: no flow into %s is enabled: only heartbeats are written", file.path,
                    ", ".join(sorted(chosen)))
    builder = _Builder(file)
    once = _Once()  # a cluster's client settings are checked once per flow: each note logged once
    loggers = [logging.getLogger(name) for name in ("mirror_maker.config", "mirror_maker.translate")]
    for logger in loggers:
        logger.addFilter(once)
    try:
        flows = [builder.flow(source, target, (source, target) in enabled) for source, target in pairs]
    finally:
        for logger in loggers:
            logger.removeFilter(once)
    groups: Dict[Tuple[str, str], str] = {}
    for flow in flows:
        if flow.enabled:
            key = (flow.source, flow.config.group_id)
            if key in groups:
                raise ConfigError(f"{file.path}: flows {groups[key]} and {flow.name} would share the consumer "
                                  f"group {flow.config.group_id} on {flow.source}: give each its own")
            groups[key] = flow.name
    return flows


class _Once(logging.Filter):
    def __init__(self) -> None:
        super().__init__()
        self._seen = set()

    def filter(self, record: logging.LogRecord) -> bool:
        key = (record.levelno, record.getMessage())
        if key in self._seen:
            return False
        self._seen.add(key)
        return True


class _Builder:
    """Builds each pair's config."""

    def __init__(self, file: Mm2File) -> None:
        self.file = file
        self.run = run_settings(file)

    def flow(self, source: str, target: str, enabled: bool) -> Flow:
        file, name = self.file, f"{source}->{target}"
        consumer_props = self._client_props("consumer", source, (source, target))
        consumer_props.setdefault("auto.offset.reset", "earliest")  # MirrorMaker 2's default, not Java's
        consumer_props["enable.auto.commit"] = "false"
        consumer_props.setdefault("group.id", flow_group(source, target))
        producer_props = self._client_props("producer", target, (source, target))
        mirror_fields = {o.attr: file.field(o.prop.key, source, target) for o in spec.fields("mirror")
                         if o.prop is not None and not _per_process(o)}
        raw = mirror_fields["use_raw_bytes"]
        exactly_once = mirror_fields["exactly_once"] = enabled and mirror_fields["exactly_once"]
        for option in spec.OPTIONS:  # the flow's settings that feed no field: so that each one is checked too
            if option.prop is not None and option.field is None and spec.FLOW in option.prop.scopes:
                file.value(option.prop.key, source, target)
        replication = self._replication(source, target)
        include = self._include(source, target)
        if exactly_once and raw:
            raise ConfigError(f"{file.path}: {name}: exactly.once.source.support = enabled with use.raw.bytes is "
                              f"not supported: {spec.excludes('exactly.once', 'use.raw.bytes').reason}")
        config = config_from_properties(
            consumer_props, producer_props, include, f"{file.path} ({source}.consumer)",
            f"{file.path} ({target}.producer)", message_handler=None if raw else PARTITION_KEEPING_HANDLER,
            replication=replication, shutdown_timeout_ms=self.run.shutdown_timeout_ms, status_interval_ms=0,
            metrics_port=None, **mirror_fields)
        config = settle_transactions(config)
        refresh_ms = replication.refresh_topics_interval_s * 1000 if replication.refresh_topics else None
        config = replace(config, consumer=follow_partitions(config.consumer, replication),
                         topic_refresh_ms=min(config.topic_refresh_ms, refresh_ms or config.topic_refresh_ms),
                         source_admin=self._admin_overrides(source), target_admin=self._admin_overrides(target))
        election_props = self._client_props("consumer", target, (source, target))
        election_props["group.id"] = election_group(source, target)
        election_conf, _engine = build_consumer_conf(election_props, f"{file.path} ({target}.consumer)")
        # MirrorMakerConfig.workerConfig: the target's worker setting, else the top level's, else its default.
        offsets_topic = file.value("offset.storage.topic", source, target) or f"mm2-offsets.{source}.internal"
        offsets_factor = file.value("offset.storage.replication.factor", source, target)
        return Flow(source, target, enabled, config, election_conf, offsets_topic,
                    file.value("offset.storage.partitions", source, target),
                    None if offsets_factor == -1 else offsets_factor)

    def _client_props(self, role: str, cluster: str, pair: Tuple[str, str]) -> Dict[str, str]:
        """The Java client settings of ``role`` on ``cluster`` for the flow ``pair``, with MirrorMaker
        2's precedence (the module docstring)."""
        file = self.file
        flow = file.flow.get(pair, {})
        props: Dict[str, str] = {}
        if role == "consumer":
            props.update(_stripped(flow, "consumer."))
        props.update({k: v for k, v in file.top.items() if spec.is_client_setting(k)})
        props.update({k: v for k, v in file.cluster.get(cluster, {}).items() if spec.is_client_setting(k)})
        props.update(_stripped(file.cluster.get(cluster, {}), f"{role}."))
        if role == "producer":
            props.update(_stripped(flow, "producer.override."))
        return props

    def _admin_overrides(self, cluster: str) -> Dict[str, str]:
        """``<cluster>.admin.*``, for every admin client of that cluster."""
        return build_admin_overrides(_stripped(self.file.cluster.get(cluster, {}), "admin."),
                                     f"{self.file.path} ({cluster}.admin)")

    def _include(self, source: str, target: str) -> Pattern[str]:
        """MirrorMaker 2's DefaultTopicFilter as one full-match pattern: ``topics`` minus
        ``topics.exclude``."""
        file, name = self.file, f"{source}->{target}"
        topics = compile_list(file.value("topics", source, target), f"{file.path}: {name} topics")
        exclude = compile_list(file.value("topics.exclude", source, target), f"{file.path}: {name} topics.exclude")
        return regex.compile(f"(?!(?:{exclude.pattern})\\Z)(?:{topics.pattern})")

    def _replication(self, source: str, target: str):
        file, name = self.file, f"{source}->{target}"
        given = file.fields("replication", source, target)
        # Our own consumer groups on the source are never checkpointed.
        ours = [flow_group(source, t) for t in file.clusters if t != source]
        ours += [election_group(s, source) for s in file.clusters if s != source]
        given["groups_exclude"] = ", ".join(filter(None, [given["groups_exclude"], *map(re.escape, ours)]))
        self._dependencies(given, source, target)
        if not file.value("heartbeats.replication.enabled", source, target):
            log.warning("%s: %s: heartbeats.replication.enabled = false is not supported: heartbeats topics are "
                        "always mirrored", file.path, name)
        if file.value("use.incremental.alter.configs", source, target) == "never":
            log.warning("%s: %s: use.incremental.alter.configs = never is not supported: configs are synced with "
                        "the incremental API", file.path, name)
        given.update(source_alias=source, target_alias=target, mirror_maker_2_creation=True)
        try:
            options = build_replication_options(**given)
            rules = topic_rules(options)
        except PluginLoadError as exc:
            message = str(exc).replace("--replication.policy.class: ", "")
            raise ConfigError(f"{file.path}: {name} replication.policy.class: {message}") from None
        warning = cycle_warning(rules)
        if warning:
            log.warning("%s", warning)
        return options

    def _dependencies(self, given: dict, source: str, target: str) -> None:
        """As MirrorMaker 2: checkpoints need offset syncs and group offset sync needs checkpoints;
        without them the checkpoint connector does not run there, and the rest of the flow does
        (a WARN when the feature was asked for)."""
        file, name = self.file, f"{source}->{target}"
        for rule in spec.rules(spec.Implies):
            feature, needed = spec.BY_NAME[rule.feature], spec.BY_NAME[rule.needed]
            if given[feature.attr] and not given[needed.attr]:
                given[feature.attr] = False
                if file.given(feature.prop.key, source, target):
                    log.warning("%s: %s: %s = true needs %s = true, which is false for this flow: off", file.path,
                                name, feature.prop.key, needed.prop.key)


def _stripped(props: Dict[str, str], prefix: str) -> Dict[str, str]:
    return {k[len(prefix):]: v for k, v in props.items() if k.startswith(prefix) and len(k) > len(prefix)}
