"""MirrorMaker 2's topic options (``--replication.policy.class`` and the sync options), checked
and frozen; what they do lives in the ``replication`` package. MirrorMaker 2's property names and
defaults, except that every sync is off by default here (MirrorMaker v1's behaviour)."""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, replace
from typing import Optional, Pattern

from ..errors import ConfigError

log = logging.getLogger("mirror_maker.config")

#: MirrorMaker 2's ``config.properties.exclude`` default (DefaultConfigPropertyFilter).
DEFAULT_CONFIG_EXCLUDE = ("follower\\.replication\\.throttled\\.replicas, "
                          "leader\\.replication\\.throttled\\.replicas, "
                          "message\\.timestamp\\.difference\\.max\\.ms, message\\.timestamp\\.type, "
                          "unclean\\.leader\\.election\\.enable, min\\.insync\\.replicas")
#: MirrorMaker 2's ``groups.exclude`` default (DefaultGroupFilter).
DEFAULT_GROUPS_EXCLUDE = "console-consumer-.*, connect-.*, __.*"
#: The names that choose MirrorMaker 2's DefaultReplicationPolicy.
DEFAULT_POLICY_NAMES = ("default", "org.apache.kafka.connect.mirror.DefaultReplicationPolicy")


@dataclass(frozen=True)
class ReplicationOptions:
    #: None: MirrorMaker v1 (names unchanged, no MirrorMaker 2 topic rules).
    policy: Optional[str] = None
    separator: str = "."
    source_alias: str = "source"
    target_alias: str = "target"
    sync_topic_configs: bool = False
    sync_topic_configs_interval_s: int = 600
    config_exclude: str = DEFAULT_CONFIG_EXCLUDE
    refresh_topics: bool = False
    refresh_topics_interval_s: int = 600
    sync_topic_acls: bool = False
    sync_topic_acls_interval_s: int = 600
    #: For the target topics the mirror creates (None: the target broker's default).
    replication_factor: Optional[int] = None
    #: For MirrorMaker 2's internal topics (None: as ``replication_factor``).
    offset_syncs_replication_factor: Optional[int] = None
    checkpoints_replication_factor: Optional[int] = None
    heartbeats_replication_factor: Optional[int] = None
    # Consumer failover (MirrorMaker 2's offset syncs, checkpoints, group offset sync, heartbeats).
    emit_offset_syncs: bool = False
    offset_syncs_location: str = "source"
    offset_lag_max: int = 100
    emit_checkpoints: bool = False
    emit_checkpoints_interval_s: int = 60
    groups: str = ".*"
    groups_exclude: str = DEFAULT_GROUPS_EXCLUDE
    sync_group_offsets: bool = False
    sync_group_offsets_interval_s: int = 60
    emit_heartbeats: bool = False
    emit_heartbeats_interval_s: int = 1

    def internal_replication_factor(self, topic: str) -> Optional[int]:
        """The replication factor of MirrorMaker 2's ``offset-syncs``, ``checkpoints`` or
        ``heartbeats`` topic (None: the broker's default)."""
        own = getattr(self, f"{topic.replace('-', '_')}_replication_factor")
        return own if own is not None else self.replication_factor

    @property
    def config_exclude_pattern(self) -> Pattern[str]:
        return compile_list(self.config_exclude, "--config.properties.exclude")

    @property
    def syncs(self) -> bool:
        """Whether a background job runs (topic syncs, checkpoints, heartbeats)."""
        return (self.sync_topic_configs or self.refresh_topics or self.sync_topic_acls or self.emit_checkpoints
                or self.emit_heartbeats)

    @property
    def groups_pattern(self) -> Pattern[str]:
        return compile_list(self.groups, "--groups")

    @property
    def groups_exclude_pattern(self) -> Pattern[str]:
        return compile_list(self.groups_exclude, "--groups.exclude")


def follow_partitions(consumer: dict, options: ReplicationOptions) -> dict:
    """With ``--refresh.topics.enabled``, the consumer group notices a source topic's new
    partitions within the refresh interval too: librdkafka's group leader sees them only at its
    proactive metadata refresh (``topic.metadata.refresh.interval.ms``, 5 minutes by default)."""
    if not options.refresh_topics:
        return consumer
    interval_ms = options.refresh_topics_interval_s * 1000
    current = int(consumer.get("topic.metadata.refresh.interval.ms", 300000))
    return {**consumer, "topic.metadata.refresh.interval.ms": str(min(current, interval_ms))}


def compile_list(value: str, option: str) -> Pattern[str]:
    """MirrorMaker 2's LIST of regexes: comma-separated, trimmed, joined with ``|``, full match;
    an empty list matches nothing."""
    entries = [entry.strip() for entry in value.split(",") if entry.strip()]
    if not entries:
        return re.compile(r"(?!)")
    try:
        return re.compile("|".join(f"(?:{entry})" for entry in entries))
    except re.error as exc:
        raise ConfigError(f"{option}: {value} is an invalid regex list: {exc}") from None


def build_replication_options(**given) -> ReplicationOptions:
    """The options as given (None: not given), checked: one line naming what is wrong.

    As in MirrorMaker 2, checkpoints need offset syncs and group offset sync needs checkpoints:
    the switch a feature needs is turned on with it unless it was turned off explicitly."""
    if given.get("policy") in DEFAULT_POLICY_NAMES and (given.get("source_alias") is None
                                                        or given.get("target_alias") is None):
        raise ConfigError("--replication.policy.class default needs both --source.cluster.alias and "
                          "--target.cluster.alias: left at source and target, mirrors A->B and B->A cannot "
                          "tell each other's remote topics and mirror them back and forth")
    options = ReplicationOptions(**{k: v for k, v in given.items() if v is not None})
    for feature, needed, feature_option, needed_option in (
            ("sync_group_offsets", "emit_checkpoints", "--sync.group.offsets.enabled", "--emit.checkpoints.enabled"),
            ("emit_checkpoints", "emit_offset_syncs", "--emit.checkpoints.enabled", "--emit.offset-syncs.enabled")):
        if getattr(options, feature) and not getattr(options, needed):
            if given.get(needed) is False:
                raise ConfigError(f"{feature_option} true needs {needed_option} true, which is given as false")
            options = replace(options, **{needed: True})
    for option, value in (("--sync.topic.configs.interval.seconds", options.sync_topic_configs_interval_s),
                          ("--refresh.topics.interval.seconds", options.refresh_topics_interval_s),
                          ("--sync.topic.acls.interval.seconds", options.sync_topic_acls_interval_s),
                          ("--emit.checkpoints.interval.seconds", options.emit_checkpoints_interval_s),
                          ("--sync.group.offsets.interval.seconds", options.sync_group_offsets_interval_s),
                          ("--emit.heartbeats.interval.seconds", options.emit_heartbeats_interval_s),
                          ("--offset.lag.max", options.offset_lag_max)):
        if value < 1:
            raise ConfigError(f"{option}: {value} is not a positive number")
    for option, factor in (("--replication.factor", options.replication_factor),
                           ("offset-syncs.topic.replication.factor", options.offset_syncs_replication_factor),
                           ("checkpoints.topic.replication.factor", options.checkpoints_replication_factor),
                           ("heartbeats.topic.replication.factor", options.heartbeats_replication_factor)):
        if factor is not None and factor < 1:
            raise ConfigError(f"{option}: {factor} is not a positive number")
    if not options.separator:
        raise ConfigError("--replication.policy.separator must not be empty")
    for option, alias in (("--source.cluster.alias", options.source_alias),
                          ("--target.cluster.alias", options.target_alias)):
        if not alias or alias.strip() != alias:
            raise ConfigError(f"{option}: '{alias}' is not a cluster alias")
    if options.source_alias == options.target_alias:
        raise ConfigError(f"--source.cluster.alias and --target.cluster.alias are both '{options.source_alias}'")
    if options.offset_syncs_location not in ("source", "target"):
        raise ConfigError(f"--offset-syncs.topic.location: '{options.offset_syncs_location}' is not source or target")
    for pattern in ("config_exclude_pattern", "groups_pattern", "groups_exclude_pattern"):
        getattr(options, pattern)  # a bad list fails here
    return options
