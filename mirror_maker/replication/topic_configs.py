"""Topic configs as MirrorMaker 2 syncs them (``MirrorSourceConnector.targetConfig`` with the
incremental API and ``use.defaults.from=target``): a source topic's config that is not at its
default is SET on the target topic; one at its default on the source is DELETEd on the target
(the target's default then applies). Never copied: read-only and sensitive entries, values from
the source broker's static configuration, and ``--config.properties.exclude``.
"""

from __future__ import annotations

import logging
from typing import Dict, List, Optional, Pattern, Tuple

from confluent_kafka import KafkaException
from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ConfigSource, ResourceType

from ..clients.admin import REQUEST_TIMEOUT_S

log = logging.getLogger("mirror_maker.replication")

#: Where a value that counts as "set" on a topic comes from.
_NOT_DEFAULT = (ConfigSource.DYNAMIC_TOPIC_CONFIG, ConfigSource.DYNAMIC_BROKER_CONFIG,
                ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)


def _source(entry: ConfigEntry) -> ConfigSource:
    """Where the value comes from (described entries carry the enum's number)."""
    return entry.source if isinstance(entry.source, ConfigSource) else ConfigSource(entry.source)


def copied(entries: Dict[str, ConfigEntry], exclude: Pattern[str]) -> Dict[str, Optional[str]]:
    """What a source topic's configs ask of its target topic: name -> value to SET, or None to
    DELETE (at its default on the source)."""
    wanted: Dict[str, Optional[str]] = {}
    for name, entry in entries.items():
        if entry.is_read_only or entry.is_sensitive or _source(entry) == ConfigSource.STATIC_BROKER_CONFIG:
            continue
        if exclude.fullmatch(name):
            continue
        wanted[name] = entry.value if _source(entry) in _NOT_DEFAULT else None
    return wanted


def changes(wanted: Dict[str, Optional[str]], target: Dict[str, ConfigEntry]) -> List[Tuple[str, Optional[str]]]:
    """The operations that make ``target`` match ``wanted``: (name, value) SETs and (name, None)
    DELETEs of what is set on the target topic; nothing for what already matches."""
    ops = []
    for name, value in sorted(wanted.items()):
        current = target.get(name)
        set_on_topic = current is not None and _source(current) == ConfigSource.DYNAMIC_TOPIC_CONFIG
        if value is not None and not (set_on_topic and current.value == value):
            ops.append((name, value))
        elif value is None and set_on_topic:
            ops.append((name, None))
    return ops


class TopicConfigs:
    """Reads topic configs on both clusters and applies the difference to the target."""

    def __init__(self, source_admin, target_admin, exclude: Pattern[str]) -> None:
        self._source = source_admin
        self._target = target_admin
        self._exclude = exclude

    def for_new_topic(self, source_topic: str) -> Dict[str, str]:
        """The configs a target topic created for ``source_topic`` gets: its non-default ones
        (none when they cannot be read now; the next sync brings them)."""
        try:
            entries = self.describe(self._source, [source_topic]).get(source_topic, {})
        except KafkaException as exc:
            log.warning("Cannot read the configs of source topic %s (%s); its target topic gets them at "
                        "the next sync", source_topic, exc.args[0].str())
            return {}
        return {name: value for name, value in copied(entries, self._exclude).items() if value is not None}

    def sync(self, pairs: List[Tuple[str, str]]) -> int:
        """Bring each (source topic, target topic) pair's configs in line; how many topics changed."""
        if not pairs:
            return 0
        source = self.describe(self._source, sorted({src for src, _ in pairs}))
        target = self.describe(self._target, sorted({dst for _, dst in pairs}))
        resources = []
        for src, dst in pairs:
            if src not in source or dst not in target:
                continue
            ops = changes(copied(source[src], self._exclude), target[dst])
            if not ops:
                continue
            resources.append(ConfigResource(ResourceType.TOPIC, dst, incremental_configs=[
                ConfigEntry(name, value, incremental_operation=AlterConfigOpType.DELETE if value is None
                            else AlterConfigOpType.SET) for name, value in ops]))
            log.info("Syncing the configs of target topic %s with source topic %s: %s", dst, src,
                     ", ".join(f"{name}={value}" if value is not None else f"{name} (default)"
                               for name, value in ops))
        if not resources:
            return 0
        changed = 0
        futures = self._target.incremental_alter_configs(resources, request_timeout=REQUEST_TIMEOUT_S)
        for resource, future in futures.items():
            try:
                future.result()
                changed += 1
            except KafkaException as exc:
                log.warning("Cannot change the configs of target topic %s: %s", resource.name, exc.args[0].str())
        return changed

    @staticmethod
    def describe(admin, topics: List[str]) -> Dict[str, Dict[str, ConfigEntry]]:
        """Each topic's config entries (a topic that cannot be described is left out)."""
        futures = admin.describe_configs([ConfigResource(ResourceType.TOPIC, t) for t in topics],
                                         request_timeout=REQUEST_TIMEOUT_S)
        described = {}
        for resource, future in futures.items():
            try:
                described[resource.name] = future.result()
            except KafkaException as exc:
                log.debug("cannot describe %s: %s", resource.name, exc)
        return described
