"""Reading mm2.properties as MirrorMaker 2's ``MirrorMakerConfig`` does: the cluster aliases, then
each key sorted into its scope (top level, ``<alias>.``, ``<source>-><target>.``), typed and
checked by the option spec (``config.spec``), with MirrorMaker 2's precedence.

Every problem before anything connects is one line: a malformed file, a missing or unknown alias,
a bad value is a :class:`ConfigError` (exit 1); a setting this tool does not have is one WARN naming
it, a Kafka Connect internal one INFO line; nothing is dropped silently.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from ..config import providers, spec
from ..config.properties import load_properties
from ..config.spec import BOOLEAN, CLUSTER, FLOW, INT, TOP
from ..errors import ConfigError

log = logging.getLogger("mirror_maker.dedicated")

#: The client roles a cluster's settings may be given for (``us-west.consumer.fetch.max.bytes``).
ROLES = ("consumer", "producer", "admin")


def resolve_config_providers(props: Dict[str, str], path: str = "mm2.properties") -> Dict[str, str]:
    """Kafka's config providers (``config.providers``, ``${file:path:key}``, ...), resolved in the
    whole file before it is read, as ``MirrorMakerConfig.transform`` does (``config.providers``
    itself goes with them)."""
    return providers.resolve(props, f"mm2.properties {path}")


@dataclass
class Mm2File:
    """The file's keys by scope (prefixes stripped), and typed look-ups with MirrorMaker 2's precedence."""

    path: str
    clusters: List[str]
    top: Dict[str, str] = field(default_factory=dict)
    cluster: Dict[str, Dict[str, str]] = field(default_factory=dict)
    flow: Dict[Tuple[str, str], Dict[str, str]] = field(default_factory=dict)

    def value(self, key: str, source: Optional[str] = None, target: Optional[str] = None):
        """A setting of the spec for the flow ``source->target``, typed and checked: its value at
        the first of its scopes that gives it (a connector setting: the flow's, else the top
        level's; a worker setting: the target cluster's), else MirrorMaker 2's default."""
        option = spec.BY_KEY[key]
        found = self._raw(option, source, target)
        return option.prop.default if found is None else self._typed(option, *found)

    def _raw(self, option: spec.Option, source: Optional[str], target: Optional[str]) -> Optional[Tuple[str, str]]:
        """(text, the key as the file spells it) where the file gives the setting for this flow; a
        Kafka 3.x key only where the key itself is not given at any scope, as Kafka 3.x's
        ``ConfigUtils.translateDeprecatedConfigs`` reads the flow's merged settings."""
        where = {FLOW: (self.flow.get((source, target), {}), f"{source}->{target}."),
                 CLUSTER: (self.cluster.get(target, {}), f"{target}."), TOP: (self.top, "")}
        for key in (option.prop.key, *option.prop.aliases):
            for scope in option.prop.scopes:
                settings, prefix = where[scope]
                if key in settings:
                    return settings[key], prefix + key
        return None

    def field(self, key: str, source: Optional[str] = None, target: Optional[str] = None):
        """What the setting becomes in its config field (``exactly.once.source.support = enabled``:
        True; a replication factor of -1: None, the broker's)."""
        value, convert = self.value(key, source, target), spec.BY_KEY[key].prop.value
        return convert(value) if convert is not None else value

    def fields(self, kind: str, source: Optional[str] = None, target: Optional[str] = None):
        """Field name -> value, for every setting of the file that feeds a field of ``kind``."""
        return {o.attr: self.field(o.prop.key, source, target) for o in spec.fields(kind) if o.prop is not None}

    def given(self, key: str, source: Optional[str] = None, target: Optional[str] = None) -> bool:
        """Whether the file sets ``key`` for this flow at any scope the spec reads it at."""
        return self._raw(spec.BY_KEY[key], source, target) is not None

    def _typed(self, option: spec.Option, raw: str, shown: str):
        prop, text = option.prop, raw.strip()
        kind, choices = prop.type or option.type, prop.choices or option.choices
        if kind == BOOLEAN:
            if text.lower() not in ("true", "false"):
                raise ConfigError(f"{self.path}: {shown} = '{raw}' is not true or false")
            value = text.lower() == "true"
        elif kind == INT:
            try:
                value = int(text)
            except ValueError:
                raise ConfigError(f"{self.path}: {shown} = '{raw}' is not a whole number") from None
        elif choices:
            value = text.lower()
            if value not in choices:
                raise ConfigError(f"{self.path}: {shown} = '{raw}' is not one of {', '.join(choices)}")
        else:
            value = text
        problem = option.problem(prop.value(value) if prop.value is not None else value)
        if problem:
            raise ConfigError(f"{self.path}: {shown} = {problem}")
        return value

    def enabled_pairs(self) -> List[Tuple[str, str]]:
        """The pairs that mirror: MirrorMaker 2 runs a pair's connectors if its flow is enabled
        there (``<source>-><target>.enabled``, else a top-level ``enabled``)."""
        return [pair for pair in self.heartbeat_pairs() if self.value("enabled", *pair)]

    def heartbeat_pairs(self) -> List[Tuple[str, str]]:
        """MirrorMaker 2's herders: every pair whose own ``enabled`` is true or whose heartbeats
        are on (``MirrorMakerConfig.clusterPairs``, which reads no top-level ``enabled``), so a
        cluster that is only ever a source still gets the heartbeats that tell its consumers
        (through the mirrored ``heartbeats`` topic) where it is mirrored to."""
        return [(s, t) for s in self.clusters for t in self.clusters
                if s != t and (self.flow.get((s, t), {}).get("enabled", "").strip().lower() == "true"
                               or self.value("emit.heartbeats.enabled", s, t))]


def read_mm2_file(path: str) -> Mm2File:
    """The file, read and sorted; see the module docstring for what is an error."""
    props = resolve_config_providers(load_properties(path, "mm2.properties"), path)
    return parse(props, path)


def parse(props: Dict[str, str], path: str = "mm2.properties") -> Mm2File:
    clusters_raw = props.get("clusters", "")
    clusters = [alias.strip() for alias in clusters_raw.split(",") if alias.strip()]
    if not clusters:
        raise ConfigError(f"{path}: clusters is missing: list the cluster aliases, e.g. clusters = A, B")
    for alias in clusters:
        if "->" in alias or any(c.isspace() for c in alias):
            raise ConfigError(f"{path}: clusters: '{alias}' is not a cluster alias")
    if len(set(clusters)) != len(clusters):
        raise ConfigError(f"{path}: clusters lists an alias twice: {clusters_raw}")
    file = Mm2File(path, clusters)
    aliases = sorted(clusters, key=len, reverse=True)  # the longest prefix wins: us-west before us
    notes = _Notes(path)
    for key, value in props.items():
        if key == "clusters":
            continue
        scope, where, name = _scope_of(key, aliases, path)
        if scope == FLOW:
            file.flow.setdefault(where, {})[name] = value
        elif scope == CLUSTER:
            file.cluster.setdefault(where, {})[name] = value
        else:
            file.top[name] = value
        notes.check(scope, key, name)
    for alias in clusters:
        if not file.cluster.get(alias, {}).get("bootstrap.servers", "").strip():
            raise ConfigError(f"{path}: {alias}.bootstrap.servers is missing (every alias in clusters needs it)")
    notes.log()
    return file


def _scope_of(key: str, aliases: List[str], path: str):
    """(scope, alias or (source, target), the key without its prefix)."""
    option = spec.prop_option(key)
    if option is not None and TOP in option.prop.scopes:
        return TOP, None, key
    if "->" in key:
        for source in aliases:
            if key.startswith(source + "->"):
                rest = key[len(source) + 2:]
                for target in aliases:
                    if rest.startswith(target + ".") and target != source:
                        return FLOW, (source, target), rest[len(target) + 1:]
        raise ConfigError(f"{path}: {key}: not a flow between two clusters listed in clusters "
                          f"({', '.join(sorted(aliases))}): an unknown alias?")
    for alias in aliases:
        if key.startswith(alias + "."):
            return CLUSTER, alias, key[len(alias) + 1:]
    first, _, rest = key.partition(".")
    if rest == "bootstrap.servers" or rest.startswith(tuple(f"{role}." for role in ROLES)) \
            or spec.is_client_setting(rest):
        raise ConfigError(f"{path}: {key}: '{first}' is not one of the clusters ({', '.join(sorted(aliases))})")
    return TOP, None, key


class _Notes:
    """What the file has that this tool does not use: one WARN (unsupported) or INFO (Kafka
    Connect's own) line each, logged once the whole file is read."""

    def __init__(self, path: str) -> None:
        self._path = path
        self._warnings: List[str] = []
        self._connect: List[str] = []
        self._renamed: List[str] = []

    def check(self, scope: str, key: str, name: str) -> None:
        option = spec.prop_option(name)
        if option is not None:
            if name in option.prop.aliases:
                self._renamed.append(f"{key} (as {option.prop.key})")
            if scope not in option.prop.scopes:
                where = {TOP: "at the top level", CLUSTER: "per cluster (<alias>.)", FLOW: "per flow (<a>-><b>.)"}
                allowed = " or ".join(where[s] for s in option.prop.scopes)
                self._warnings.append(f"{key}: MirrorMaker 2 reads {name} only {allowed}: ignored here")
            return
        if name in spec.UNSUPPORTED:
            self._warnings.append(f"{key} is not supported: {spec.UNSUPPORTED[name]}")
            return
        role, _, client_key = name.partition(".")
        if scope == TOP and spec.is_client_setting(name):
            return  # every cluster's clients, below the cluster's own value
        if scope == CLUSTER and (spec.is_client_setting(name) or (role in ROLES and client_key)):
            return
        if scope == FLOW and ((role == "consumer" and client_key) or name.startswith("producer.override.")):
            return
        if role in ROLES and client_key:
            self._warnings.append(_client_note(scope, key, role))
            return
        if spec.connect_only(name):
            self._connect.append(key)
            return
        if scope == CLUSTER:
            alias = key[:-len(name) - 1]
            self._warnings.append(f"{key}: MirrorMaker 2 gives a cluster's clients only where it is and how to log "
                                  f"in from <alias>.<setting>; use {alias}.consumer.{name} or "
                                  f"{alias}.producer.{name}: ignored")
            return
        self._warnings.append(f"{key} is not a MirrorMaker 2 setting this tool knows: ignored")

    def log(self) -> None:
        for warning in self._warnings:
            log.warning("%s: %s", self._path, warning)
        if self._renamed:
            log.info("%s: Kafka 3.x's names, removed in Kafka 4.0, are read where the new name is not given: %s",
                     self._path, ", ".join(sorted(self._renamed)))
        if self._connect:
            log.info("%s: Kafka Connect's own settings, not needed without Connect, are ignored: %s",
                     self._path, ", ".join(sorted(self._connect)))


def _client_note(scope: str, key: str, role: str) -> str:
    if role == "admin":
        return f"{key}: MirrorMaker 2 reads admin client settings only per cluster (<alias>.admin.*): ignored"
    if scope == FLOW and role == "producer":
        return (f"{key}: MirrorMaker 2 gives flow-level producer settings only to its offset-syncs producer; "
                f"the flow's producer reads <target>.producer.* and <source>-><target>.producer.override.*: "
                f"ignored")
    return f"{key}: client settings are read as <alias>.{role}.* (and <source>-><target>.consumer.*): ignored"
