"""MirrorMaker 2's topic options (``--replication.policy.class`` and the sync options), checked
and frozen; what they do lives in the ``replication`` package. MirrorMaker 2's property names and
defaults, except that every sync is off by default here (MirrorMaker v1's behaviour)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional, Pattern

from ..errors import ConfigError

#: MirrorMaker 2's ``config.properties.exclude`` default (DefaultConfigPropertyFilter).
DEFAULT_CONFIG_EXCLUDE = ("follower\\.replication\\.throttled\\.replicas, "
                          "leader\\.replication\\.throttled\\.replicas, "
                          "message\\.timestamp\\.difference\\.max\\.ms, message\\.timestamp\\.type, "
                          "unclean\\.leader\\.election\\.enable, min\\.insync\\.replicas")


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

    @property
    def config_exclude_pattern(self) -> Pattern[str]:
        return compile_list(self.config_exclude, "--config.properties.exclude")

    @property
    def syncs(self) -> bool:
        return self.sync_topic_configs or self.refresh_topics or self.sync_topic_acls


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


def build_replication_options(policy, separator, source_alias, target_alias, sync_topic_configs,
                              sync_topic_configs_interval_s, config_exclude, refresh_topics,
                              refresh_topics_interval_s, sync_topic_acls, sync_topic_acls_interval_s,
                              replication_factor) -> ReplicationOptions:
    for option, value in (("--sync.topic.configs.interval.seconds", sync_topic_configs_interval_s),
                          ("--refresh.topics.interval.seconds", refresh_topics_interval_s),
                          ("--sync.topic.acls.interval.seconds", sync_topic_acls_interval_s)):
        if value < 1:
            raise ConfigError(f"{option}: {value} is not a positive number of seconds")
    if replication_factor is not None and replication_factor < 1 and replication_factor != -1:
        raise ConfigError(f"--replication.factor: {replication_factor} is not a positive number")
    if not separator:
        raise ConfigError("--replication.policy.separator must not be empty")
    for option, alias in (("--source.cluster.alias", source_alias), ("--target.cluster.alias", target_alias)):
        if not alias or alias.strip() != alias:
            raise ConfigError(f"{option}: '{alias}' is not a cluster alias")
    if source_alias == target_alias:
        raise ConfigError(f"--source.cluster.alias and --target.cluster.alias are both '{source_alias}'")
    options = ReplicationOptions(policy, separator, source_alias, target_alias, sync_topic_configs,
                                 sync_topic_configs_interval_s, config_exclude, refresh_topics,
                                 refresh_topics_interval_s, sync_topic_acls, sync_topic_acls_interval_s,
                                 replication_factor)
    options.config_exclude_pattern  # a bad list fails here
    return options
