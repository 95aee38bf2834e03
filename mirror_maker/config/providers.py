"""Kafka's config providers: ``${provider:[path:]key}`` values in any properties file.

A file names its providers and their classes, as the Java client reads them (``AbstractConfig``,
``ConfigTransformer``)::

    config.providers=file,env,dir
    config.providers.file.class=org.apache.kafka.common.config.provider.FileConfigProvider
    config.providers.env.class=org.apache.kafka.common.config.provider.EnvVarConfigProvider
    config.providers.env.param.allowlist.pattern=KAFKA_.*
    config.providers.dir.class=org.apache.kafka.common.config.provider.DirectoryConfigProvider
    config.providers.dir.param.allowed.paths=/run/secrets
    sasl.jaas.config=... password="${file:/etc/kafka/secrets.properties:password}";
    ssl.key.password=${env:KAFKA_KEY_PASSWORD}
    ssl.truststore.password=${dir:/run/secrets:truststore-password}

Kafka's three providers are built in, with their parameters (``allowed.paths``,
``allowlist.pattern``) and their rules (a path is checked after normalisation, component by
component; a directory's files are read whole, as UTF-8). Another provider class (a vault's) is
one error line: Java classes cannot run here. A ``-Dorg.apache.kafka.automatic.config.providers``
in ``KAFKA_OPTS`` limits the classes as it does for Kafka's tools.

Where Kafka leaves a variable as it is (its path is not allowed, its key is missing, its provider
is not configured) and the Java client then sends the placeholder itself, as a password for
instance, this is one error line naming the property and the provider: a placeholder is never a
value anyone meant. Errors never show a resolved value.

:func:`resolve` is the one entry point, for the consumer and producer files and MirrorMaker 2's
``mm2.properties`` alike.
"""

from __future__ import annotations

import os
import re
from pathlib import PurePosixPath
from typing import Callable, Dict, Iterable, List, Mapping, Optional

from ..errors import ConfigError

CONFIG_PROVIDERS = "config.providers"
#: Kafka's ConfigTransformer.DEFAULT_PATTERN: ``${provider:[path:]key}``.
VARIABLE = re.compile(r"\$\{([^}]*?):(([^}]*?):)?([^}]*?)\}")
AUTOMATIC_PROVIDERS_PROPERTY = "org.apache.kafka.automatic.config.providers"

FILE_CLASS = "org.apache.kafka.common.config.provider.FileConfigProvider"
ENV_CLASS = "org.apache.kafka.common.config.provider.EnvVarConfigProvider"
DIRECTORY_CLASS = "org.apache.kafka.common.config.provider.DirectoryConfigProvider"


class _AllowedPaths:
    """Kafka's ``AllowedPaths``: absolute, existing roots; a path is allowed when, normalised, it
    lies under one of them (component by component: /etc/kafka-x is not under /etc/kafka)."""

    def __init__(self, value: Optional[str], where: str) -> None:
        self.roots: Optional[List[PurePosixPath]] = None
        if value:
            self.roots = []
            for entry in value.split(","):
                root = PurePosixPath(os.path.normpath(entry))
                if not root.is_absolute():
                    raise ConfigError(f"{where}: path {root} is not absolute")
                if not os.path.exists(str(root)):
                    raise ConfigError(f"{where}: path {root} does not exist")
                self.roots.append(root)

    def check(self, path: str) -> Optional[str]:
        """The path to read, or None when it lies outside every allowed root."""
        if self.roots is None:
            return path
        normal = PurePosixPath(os.path.normpath(path))
        if any(normal.parts[:len(root.parts)] == root.parts for root in self.roots):
            return str(normal)
        return None


class _PathProvider:
    """What the file and directory providers share: ``allowed.paths``, checked for every path."""

    usage = ""

    def __init__(self, params: Mapping[str, str], where: str, environ: Mapping[str, str]) -> None:
        self._allowed = _AllowedPaths(params.get("allowed.paths"), f"{where}.param.allowed.paths")

    def _checked(self, path: str) -> str:
        if not path:
            raise ConfigError(f"needs a path: {self.usage}")
        allowed = self._allowed.check(path)
        if allowed is None:
            raise ConfigError(f"the path {path} is not in its allowed.paths")
        return allowed


class _FileProvider(_PathProvider):
    """``${file:/path/to/file.properties:key}``: a key of a Java properties file."""

    usage = "${file:/path/to/file.properties:key}"

    def get(self, path: str, keys: Iterable[str]) -> Dict[str, str]:
        from .properties import parse_properties

        try:
            with open(self._checked(path), encoding="utf-8") as handle:
                data = parse_properties(handle.read(), path)
        except (OSError, UnicodeDecodeError):
            raise ConfigError(f"could not read properties from file {path}") from None
        return {key: data[key] for key in keys if key in data}


class _EnvProvider:
    """``${env:NAME}``: an environment variable, if its name matches ``allowlist.pattern``."""

    def __init__(self, params: Mapping[str, str], where: str, environ: Mapping[str, str]) -> None:
        from .topics import compile_java_regex

        pattern = params.get("allowlist.pattern", ".*")
        try:
            allow = compile_java_regex(pattern)
        except ConfigError as exc:
            raise ConfigError(f"{where}.param.allowlist.pattern: {exc}") from None
        self._variables = {name: value for name, value in environ.items() if allow.fullmatch(name)}

    def get(self, path: str, keys: Iterable[str]) -> Dict[str, str]:
        if path:
            raise ConfigError(f"a path is not supported (got '{path}'): ${{env:NAME}}")
        return {key: self._variables[key] for key in keys if key in self._variables}


class _DirectoryProvider(_PathProvider):
    """``${dir:/path/to/dir:file}``: the whole content of a regular file in a directory (as a
    Kubernetes secret is mounted)."""

    usage = "${dir:/path/to/dir:file}"

    def get(self, path: str, keys: Iterable[str]) -> Dict[str, str]:
        directory = self._checked(path)
        if not os.path.isdir(directory):
            raise ConfigError(f"{path} is not a directory")
        found = {}
        for key in keys:
            file = os.path.join(directory, key)
            if os.sep in key or not os.path.isfile(file):
                continue
            try:
                with open(file, "rb") as handle:
                    found[key] = handle.read().decode("utf-8")
            except (OSError, UnicodeDecodeError):
                raise ConfigError(f"could not read file {file}") from None
        return found


PROVIDERS: Dict[str, Callable[..., object]] = {
    FILE_CLASS: _FileProvider,
    ENV_CLASS: _EnvProvider,
    DIRECTORY_CLASS: _DirectoryProvider,
}


def _automatic_providers(java_properties: Mapping[str, str]) -> Optional[set]:
    value = java_properties.get(AUTOMATIC_PROVIDERS_PROPERTY)
    return None if value is None else {name.strip() for name in value.split(",")}


def _build_providers(props: Mapping[str, str], source: str, environ: Mapping[str, str],
                     java_properties: Mapping[str, str]) -> Dict[str, object]:
    allowed = _automatic_providers(java_properties)
    providers = {}
    for name in (n.strip() for n in props[CONFIG_PROVIDERS].split(",")):
        if not name:
            continue
        class_key = f"{CONFIG_PROVIDERS}.{name}.class"
        class_name = props.get(class_key, "").strip()
        if not class_name:
            raise ConfigError(f"{source}: {CONFIG_PROVIDERS} names '{name}' but {class_key} is missing")
        if allowed is not None and class_name not in allowed:
            raise ConfigError(f"{source}: {class_key}: {class_name} is not allowed by the system property "
                              f"{AUTOMATIC_PROVIDERS_PROPERTY} in KAFKA_OPTS")
        factory = PROVIDERS.get(class_name)
        if factory is None:
            raise ConfigError(f"{source}: {class_key}: config provider {class_name} is not supported "
                              f"(a Java class cannot run here; these are built in: {', '.join(PROVIDERS)})")
        prefix = f"{CONFIG_PROVIDERS}.{name}.param."
        params = {key[len(prefix):]: value for key, value in props.items()
                  if key.startswith(prefix) and len(key) > len(prefix)}
        providers[name] = factory(params, f"{source}: {CONFIG_PROVIDERS}.{name}", environ)
    return providers


def _is_provider_setting(key: str) -> bool:
    return key == CONFIG_PROVIDERS or key.startswith(CONFIG_PROVIDERS + ".")


def resolve(props: Mapping[str, str], source: str = "properties",
            environ: Optional[Mapping[str, str]] = None,
            java_properties: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """``props`` with every ``${provider:[path:]key}`` replaced, and without the
    ``config.providers*`` settings themselves (they configure this, not a client).

    Without ``config.providers`` nothing is replaced, as in Kafka. ``source`` names the file in
    error lines; ``environ`` (default ``os.environ``) serves the env provider; ``java_properties``
    are the ``-D`` system properties of ``KAFKA_OPTS`` (default: read from the environment).
    Raises a one-line :class:`ConfigError` naming the property and the provider.
    """
    if CONFIG_PROVIDERS not in props:
        return dict(props)
    if java_properties is None:
        from .java_options import system_properties

        java_properties = system_properties()
    providers = _build_providers(props, source, os.environ if environ is None else environ, java_properties)
    settings = {key: value for key, value in props.items() if not _is_provider_setting(key)}
    # As Kafka's ConfigTransformer: each provider is asked once per path, for all its keys.
    wanted: Dict[tuple, set] = {}
    first_user: Dict[tuple, str] = {}
    for key, value in settings.items():
        for match in VARIABLE.finditer(value or ""):
            name_path = (match.group(1), match.group(3) or "")
            wanted.setdefault(name_path, set()).add(match.group(4))
            first_user.setdefault(name_path, key)
    lookups: Dict[tuple, Dict[str, str]] = {}
    for (name, path), keys in wanted.items():
        provider = providers.get(name)
        if provider is None:
            continue  # reported below, with the property that names it
        try:
            lookups[(name, path)] = provider.get(path, keys)
        except ConfigError as exc:
            raise ConfigError(f"{source}: {first_user[(name, path)]}: the '{name}' config provider: {exc}") from None

    def replace(key: str, match: "re.Match[str]") -> str:
        name, path, variable = match.group(1), match.group(3) or "", match.group(4)
        if name not in providers:
            raise ConfigError(f"{source}: {key}: ${{{name}:...}} names a config provider that "
                              f"{CONFIG_PROVIDERS} does not list")
        found = lookups[(name, path)].get(variable)
        if found is None:
            where = f" in {path}" if path else ""
            raise ConfigError(f"{source}: {key}: the '{name}' config provider has no value for "
                              f"'{variable}'{where}")
        return found

    return {key: VARIABLE.sub(lambda match, key=key: replace(key, match), value) if value else value
            for key, value in settings.items()}
