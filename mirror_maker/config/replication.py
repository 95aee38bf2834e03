"""MirrorMaker 2's topic options (``--replication.policy.class`` and the sync options), checked
and frozen; what they do lives in the ``replication`` package. Declared in ``spec`` with MirrorMaker
2's property names; every sync is off by default here (MirrorMaker v1's behaviour)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Optional, Pattern

from ..errors import ConfigError
from . import spec

log = logging.getLogger("mirror_maker.config")

#: The names that choose MirrorMaker 2's DefaultReplicationPolicy.
DEFAULT_POLICY_NAMES = ("default", spec.DEFAULT_POLICY)
#: The defaults, from the spec (MirrorMaker v1's behaviour: every sync off).
_DEFAULTS = spec.defaults("replication")


@dataclass(frozen=True)
class ReplicationOptions:
    #: None: MirrorMaker v1 (names unchanged, no MirrorMaker 2 topic rules).
    policy: Optional[str] = _DEFAULTS["policy"]
    separator: str = _DEFAULTS["separator"]
    internal_separator_enabled: bool = _DEFAULTS["internal_separator_enabled"]
    source_alias: str = _DEFAULTS["source_alias"]
    target_alias: str = _DEFAULTS["target_alias"]
    sync_topic_configs: bool = _DEFAULTS["sync_topic_configs"]
    sync_topic_configs_interval_s: int = _DEFAULTS["sync_topic_configs_interval_s"]
    #: The dedicated mode: target topics are created with their source topic's configs and grown
    #: to its partitions whatever the sync options say, as MirrorMaker 2's ``MirrorSourceConnector``
    #: does at every start (``computeAndCreateTopicPartitions``); the command line does so only
    #: with --sync.topic.configs.enabled and --refresh.topics.enabled.
    mirror_maker_2_creation: bool = False
    config_exclude: str = _DEFAULTS["config_exclude"]
    refresh_topics: bool = _DEFAULTS["refresh_topics"]
    refresh_topics_interval_s: int = _DEFAULTS["refresh_topics_interval_s"]
    sync_topic_acls: bool = _DEFAULTS["sync_topic_acls"]
    sync_topic_acls_interval_s: int = _DEFAULTS["sync_topic_acls_interval_s"]
    #: For the target topics the mirror creates (None: the target broker's default).
    replication_factor: Optional[int] = _DEFAULTS["replication_factor"]
    #: For MirrorMaker 2's internal topics (None: as ``replication_factor``; -1: the broker's default).
    offset_syncs_replication_factor: Optional[int] = _DEFAULTS["offset_syncs_replication_factor"]
    checkpoints_replication_factor: Optional[int] = _DEFAULTS["checkpoints_replication_factor"]
    heartbeats_replication_factor: Optional[int] = _DEFAULTS["heartbeats_replication_factor"]
    # Consumer failover (MirrorMaker 2's offset syncs, checkpoints, group offset sync, heartbeats).
    emit_offset_syncs: bool = _DEFAULTS["emit_offset_syncs"]
    offset_syncs_location: str = _DEFAULTS["offset_syncs_location"]
    offset_lag_max: int = _DEFAULTS["offset_lag_max"]
    emit_checkpoints: bool = _DEFAULTS["emit_checkpoints"]
    emit_checkpoints_interval_s: int = _DEFAULTS["emit_checkpoints_interval_s"]
    groups: str = _DEFAULTS["groups"]
    groups_exclude: str = _DEFAULTS["groups_exclude"]
    sync_group_offsets: bool = _DEFAULTS["sync_group_offsets"]
    sync_group_offsets_interval_s: int = _DEFAULTS["sync_group_offsets_interval_s"]
    emit_heartbeats: bool = _DEFAULTS["emit_heartbeats"]
    emit_heartbeats_interval_s: int = _DEFAULTS["emit_heartbeats_interval_s"]

    def internal_replication_factor(self, topic: str) -> Optional[int]:
        """The replication factor of MirrorMaker 2's ``offset-syncs``, ``checkpoints`` or
        ``heartbeats`` topic (None: the broker's default)."""
        own = getattr(self, f"{topic.replace('-', '_')}_replication_factor")
        if own == -1:
            return None
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
    """MirrorMaker 2's LIST of regexes (``spec.regex_list_pattern``); ``option`` names it in the error line."""
    problem = spec.regex_list(value)
    if problem:
        raise ConfigError(f"{option}: {problem}")
    return spec.regex_list_pattern(value)


def build_replication_options(**given) -> ReplicationOptions:
    """The options as given (each valid by itself: the spec's validators ran where they were read),
    checked together: one line naming what is wrong."""
    if given.get("policy") in DEFAULT_POLICY_NAMES and (given.get("source_alias") is None
                                                        or given.get("target_alias") is None):
        raise ConfigError("--replication.policy.class default needs both --source.cluster.alias and "
                          "--target.cluster.alias: left at source and target, mirrors A->B and B->A cannot "
                          "tell each other's remote topics and mirror them back and forth")
    options = ReplicationOptions(**{k: v for k, v in given.items() if v is not None})
    if options.source_alias == options.target_alias:
        raise ConfigError(f"--source.cluster.alias and --target.cluster.alias are both '{options.source_alias}'")
    return options
