"""Replication policies: how a source topic is named on the target, and which topics are
mirrored at all, with MirrorMaker 2's rules (``ReplicationPolicy``, ``DefaultReplicationPolicy``,
``IdentityReplicationPolicy`` and ``MirrorSourceConnector.shouldReplicateTopic``/``isCycle``).

A policy is any object with ``format_remote_topic(source_alias, topic)``, ``topic_source(topic)``
(the alias a remote topic came from, or None) and ``upstream_topic(topic)`` (its name one hop up,
or None); the rest has defaults here (:class:`ReplicationPolicy`). ``--replication.policy.class``
takes ``identity``, ``default`` or a dotted path to such a class.
"""

from __future__ import annotations

import re
from typing import Dict, Optional

from ..errors import PluginLoadError
from ..plugins import _resolve

HEARTBEATS_TOPIC = "heartbeats"


class ReplicationPolicy:
    """MirrorMaker 2's ``ReplicationPolicy`` interface with its default methods. Subclass it
    for a policy of your own (or give a class with the three naming methods)."""

    separator = "."
    internal_separator = "."

    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        raise NotImplementedError

    def topic_source(self, topic: str) -> Optional[str]:
        raise NotImplementedError

    def upstream_topic(self, topic: str) -> Optional[str]:
        source = self.topic_source(topic)
        return None if source is None else topic[len(source) + len(self.separator):]

    def original_topic(self, topic: str) -> str:
        """The topic's name where it was first written, through every hop."""
        seen = set()
        while topic not in seen:
            seen.add(topic)
            upstream = self.upstream_topic(topic)
            if upstream is None or upstream == topic:
                return topic
            topic = upstream
        return topic

    # MirrorMaker 2's internal topics
    def heartbeats_topic(self) -> str:
        return HEARTBEATS_TOPIC

    def offset_syncs_topic(self, cluster_alias: str) -> str:
        sep = self.internal_separator
        return f"mm2-offset-syncs{sep}{cluster_alias}{sep}internal"

    def checkpoints_topic(self, cluster_alias: str) -> str:
        sep = self.internal_separator
        return f"{cluster_alias}{sep}checkpoints{sep}internal"

    def is_heartbeats_topic(self, topic: str) -> bool:
        return self.original_topic(topic) == self.heartbeats_topic()

    def is_checkpoints_topic(self, topic: str) -> bool:
        sep = self.internal_separator
        return topic.endswith(f"{sep}checkpoints{sep}internal")

    def is_mm2_internal_topic(self, topic: str) -> bool:
        return topic.endswith(f"{self.internal_separator}internal")

    def is_internal_topic(self, topic: str) -> bool:
        """Never mirrored: MirrorMaker 2's own topics, ``__*`` and ``.*`` names, ``*.internal``
        and ``*-internal`` (Connect's and Streams' internal topics)."""
        return (self.is_mm2_internal_topic(topic) or topic.startswith(("__", "."))
                or topic.endswith((".internal", "-internal")))


class DefaultReplicationPolicy(ReplicationPolicy):
    """``<source alias><separator><topic>``; a name with the separator in it is a remote topic
    whose source is the part before the first separator (so ``my.topic`` comes from ``my``)."""

    def __init__(self, separator: str = ".", internal_separator_enabled: bool = True) -> None:
        if not separator:
            raise PluginLoadError("--replication.policy.separator must not be empty")
        self.separator = separator
        self.internal_separator = separator if internal_separator_enabled else "."

    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        return f"{source_alias}{self.separator}{topic}"

    def topic_source(self, topic: str) -> Optional[str]:
        parts = _java_split(topic, self.separator)
        return parts[0] if len(parts) >= 2 else None


class IdentityReplicationPolicy(DefaultReplicationPolicy):
    """Topic names unchanged (MirrorMaker v1's naming), except heartbeats topics, which keep the
    default policy's prefix. It cannot tell a remote topic by its name: it cannot stop cycles."""

    def __init__(self, separator: str = ".", internal_separator_enabled: bool = True,
                 source_alias: Optional[str] = None) -> None:
        super().__init__(separator, internal_separator_enabled)
        self.source_alias = source_alias

    def _heartbeat_like(self, topic: str) -> bool:
        return topic.endswith(self.heartbeats_topic())

    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        return super().format_remote_topic(source_alias, topic) if self._heartbeat_like(topic) else topic

    def topic_source(self, topic: str) -> Optional[str]:
        return super().topic_source(topic) if self._heartbeat_like(topic) else self.source_alias

    def upstream_topic(self, topic: str) -> Optional[str]:
        return super().upstream_topic(topic) if self._heartbeat_like(topic) else topic


def _java_split(text: str, separator: str):
    """Java's ``Pattern.quote(sep).split(text)``: trailing empty pieces dropped."""
    parts = text.split(separator)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


_BUILT_IN = {"identity": IdentityReplicationPolicy, "default": DefaultReplicationPolicy,
             "org.apache.kafka.connect.mirror.IdentityReplicationPolicy": IdentityReplicationPolicy,
             "org.apache.kafka.connect.mirror.DefaultReplicationPolicy": DefaultReplicationPolicy}
_REQUIRED = ("format_remote_topic", "topic_source", "upstream_topic")


def load_policy(name: str, separator: str = ".", source_alias: Optional[str] = None,
                internal_separator_enabled: bool = True):
    """The policy ``--replication.policy.class`` names; a bad one is a :class:`PluginLoadError`
    (one line, exit 1)."""
    option = "--replication.policy.class"
    built_in = _BUILT_IN.get(name)
    if built_in is IdentityReplicationPolicy:
        return IdentityReplicationPolicy(separator, internal_separator_enabled, source_alias=source_alias)
    if built_in is not None:
        return built_in(separator, internal_separator_enabled)
    cls = _resolve(name, "replication policy", option)
    try:
        policy = cls() if isinstance(cls, type) else cls
    except Exception as exc:
        raise PluginLoadError(f"{option}: building {name} failed: {type(exc).__name__}: {exc}") from None
    missing = [m for m in _REQUIRED if not callable(getattr(policy, m, None))]
    if missing:
        raise PluginLoadError(f"{option}: '{name}' has no {', '.join(missing)} "
                              f"(a replication policy needs {', '.join(_REQUIRED)})")
    if not isinstance(policy, ReplicationPolicy):  # the defaults of the interface for the rest
        policy = _WithDefaults(policy)
    return policy


class _WithDefaults(ReplicationPolicy):
    """A user's policy with only the naming methods, completed by the interface's defaults."""

    def __init__(self, policy) -> None:
        self._policy = policy
        self.separator = getattr(policy, "separator", ".")
        self.internal_separator = getattr(policy, "internal_separator", ".")

    def format_remote_topic(self, source_alias, topic):
        return self._policy.format_remote_topic(source_alias, topic)

    def topic_source(self, topic):
        return self._policy.topic_source(topic)

    def upstream_topic(self, topic):
        return self._policy.upstream_topic(topic)

    def __getattr__(self, name):
        return getattr(self._policy, name)


class TopicRules:
    """Naming and selection for one flow source -> target.

    ``remote(topic)`` is the target topic of a source topic (cached: the hot path calls it once
    per run of records). ``replicable(topic)`` is MirrorMaker 2's ``shouldReplicateTopic``
    minus the topic filter (the include regex does that): heartbeats topics are always taken,
    internal topics and cycles never. Without ``--replication.policy.class`` (``mm2_rules``
    false) every topic the include regex matches is mirrored, as by MirrorMaker v1.
    """

    def __init__(self, policy, source_alias: str, target_alias: str, mm2_rules: bool) -> None:
        self.policy = policy
        self.source_alias = source_alias
        self.target_alias = target_alias
        self.mm2_rules = mm2_rules
        self._names: Dict[str, str] = {}

    def remote(self, topic: str) -> str:
        name = self._names.get(topic)
        if name is None:
            name = self._names[topic] = self.policy.format_remote_topic(self.source_alias, topic)
        return name

    @property
    def detects_cycles(self) -> bool:
        """False for the identity policy: its remote topics keep their names, so nothing tells a
        topic mirrored from the target apart from the source's own (MirrorMaker 2's warning too)."""
        return self.mm2_rules and not isinstance(self.policy, IdentityReplicationPolicy)

    def is_cycle(self, topic: str) -> bool:
        """The topic came from the target cluster (by the policy), at any hop."""
        seen = set()
        while topic is not None and topic not in seen:
            seen.add(topic)
            source = self.policy.topic_source(topic)
            if source is None:
                return False
            if source == self.target_alias:
                return True
            upstream = self.policy.upstream_topic(topic)
            if upstream is None or upstream == topic:
                return False  # identity-like policies cannot tell
            topic = upstream
        return False

    def selects(self, pattern: "re.Pattern[str]", topic: str) -> bool:
        """Whether ``topic`` is mirrored: the include regex (or, with MirrorMaker 2's rules, a
        heartbeats topic), and with those rules not internal and not a cycle."""
        if not self.mm2_rules:
            return bool(pattern.fullmatch(topic))
        return ((bool(pattern.fullmatch(topic)) or self.policy.is_heartbeats_topic(topic))
                and not self.policy.is_internal_topic(topic) and not self.is_cycle(topic))


class UnchangedNames(ReplicationPolicy):
    """MirrorMaker v1's naming, without a policy: every name as it is (heartbeats too)."""

    def format_remote_topic(self, source_alias: str, topic: str) -> str:
        return topic

    def topic_source(self, topic: str) -> Optional[str]:
        return None


def topic_rules(options) -> TopicRules:
    """The rules of a run's :class:`~mirror_maker.config.replication.ReplicationOptions`."""
    if options.policy is None:
        return TopicRules(UnchangedNames(), options.source_alias, options.target_alias, mm2_rules=False)
    policy = load_policy(options.policy, options.separator, options.source_alias,
                         options.internal_separator_enabled)
    return TopicRules(policy, options.source_alias, options.target_alias, mm2_rules=True)


def cycle_warning(rules: TopicRules) -> Optional[str]:
    """The start-up WARN for a policy that cannot detect cycles (MirrorMaker 2's documentation
    says the same of its IdentityReplicationPolicy); None when the policy can."""
    if not rules.mm2_rules or rules.detects_cycles:
        return None
    return (f"The identity replication policy cannot detect cycles: a flow {rules.source_alias}->"
            f"{rules.target_alias} next to one in the other direction mirrors every record back and forth; "
            f"keep such flows one-way")
