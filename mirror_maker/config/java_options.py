"""What Kafka's scripts pass the JVM in ``KAFKA_OPTS`` that a Java client reads: the JAAS file.

``kafka-run-class.sh`` expands ``$KAFKA_OPTS`` unquoted into the ``java`` command line, so its
``-Dname=value`` words are system properties. Two of them change what a client does:

* ``java.security.auth.login.config``: a JAAS file whose ``KafkaClient`` section logs a SASL
  client in when its properties file has no ``sasl.jaas.config`` (``JaasContext``);
* ``org.apache.kafka.automatic.config.providers`` (read by ``providers``).

The JAAS file's syntax is Java's ``ConfigFile``: sections ``Name { module flag key="value" ...; };``
with ``//`` and ``/* */`` comments.
"""

from __future__ import annotations

import os
import re
from typing import Dict, List, Mapping, Optional, Tuple

from ..errors import ConfigError

KAFKA_OPTS = "KAFKA_OPTS"
LOGIN_CONFIG = "java.security.auth.login.config"
CLIENT_SECTION = "KafkaClient"

_TOKEN = re.compile(r'\s+|//[^\n]*|/\*.*?\*/|"(?:[^"\\]|\\.)*"|[{};=]|[^\s{};="]+', re.S)


def system_properties(environ: Optional[Mapping[str, str]] = None) -> Dict[str, str]:
    """The ``-D`` system properties in ``KAFKA_OPTS`` (split on white space, as the shell does
    with an unquoted expansion; a later one wins, as in the JVM)."""
    environ = os.environ if environ is None else environ
    found = {}
    for word in environ.get(KAFKA_OPTS, "").split():
        if word.startswith("-D") and len(word) > 2:
            name, _, value = word[2:].partition("=")
            found[name] = value
    return found


def _tokens(text: str, path: str) -> List[Tuple[str, bool]]:
    """(token, quoted) pairs, comments and white space dropped."""
    tokens, position = [], 0
    while position < len(text):
        match = _TOKEN.match(text, position)
        if match is None:
            raise ConfigError(f"{LOGIN_CONFIG} {path}: unbalanced quotes")
        token, position = match.group(0), match.end()
        if token.isspace() or token.startswith(("//", "/*")):
            continue
        if token.startswith('"'):
            tokens.append((re.sub(r"\\(.)", r"\1", token[1:-1]), True))
        else:
            tokens.append((token, False))
    return tokens


def parse_jaas_file(text: str, path: str) -> Dict[str, List[Tuple[str, str, Dict[str, str]]]]:
    """Sections of a JAAS file: name -> [(login module, flag, options)]."""
    tokens, sections, i = _tokens(text, path), {}, 0

    def expect(what: str) -> str:
        nonlocal i
        if i >= len(tokens):
            raise ConfigError(f"{LOGIN_CONFIG} {path}: expected {what} at the end of the file")
        token, i = tokens[i][0], i + 1
        return token

    def syntax(what: str, got: str) -> ConfigError:
        return ConfigError(f"{LOGIN_CONFIG} {path}: expected {what}, found '{got}'")

    while i < len(tokens):
        name = expect("a section name")
        if expect("'{'") != "{":
            raise syntax("'{' after " + name, tokens[i - 1][0])
        entries = []
        while True:
            module = expect("a login module or '}'")
            if module == "}":
                break
            flag = expect("a control flag")
            if flag.lower() not in ("required", "requisite", "sufficient", "optional"):
                raise syntax(f"a control flag (required, ...) after {module}", flag)
            options = {}
            while True:
                key = expect("an option or ';'")
                if key == ";":
                    break
                if key in ("{", "}", "=") and not tokens[i - 1][1]:
                    raise syntax(f"an option or ';' ending {module}'s entry", key)
                if expect("'='") != "=":
                    raise syntax(f"'=' after {key}", tokens[i - 1][0])
                options[key] = expect(f"a value for {key}")
            entries.append((module, flag, options))
        if i < len(tokens) and tokens[i][0] == ";":
            i += 1
        sections[name] = entries
    return sections


def _quoted(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def client_login(environ: Optional[Mapping[str, str]] = None) -> Optional[Tuple[str, str]]:
    """The ``KafkaClient`` login of the JAAS file ``KAFKA_OPTS`` names, written as a
    ``sasl.jaas.config`` value, with the file's path; None when ``KAFKA_OPTS`` names none."""
    path = system_properties(environ).get(LOGIN_CONFIG)
    if path is None:
        return None
    path = path[1:] if path.startswith("=") else path  # "==path": only this file, as in Java
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as exc:
        raise ConfigError(f"{LOGIN_CONFIG} {path} (from {KAFKA_OPTS}): cannot read it: {exc.strerror}") from None
    entries = parse_jaas_file(text, path).get(CLIENT_SECTION)
    if not entries:
        raise ConfigError(f"{LOGIN_CONFIG} {path} (from {KAFKA_OPTS}): no '{CLIENT_SECTION}' section, which a "
                          "SASL client without sasl.jaas.config logs in with")
    if len(entries) != 1:
        raise ConfigError(f"{LOGIN_CONFIG} {path}: the '{CLIENT_SECTION}' section has {len(entries)} login "
                          "modules; one is supported")
    module, flag, options = entries[0]
    text = " ".join([module, flag, *(f"{key}={_quoted(value)}" for key, value in options.items())]) + ";"
    return text, path
