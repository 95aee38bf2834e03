"""Reading Java ``.properties`` files, the format MirrorMaker's users already have.

Parsing is jproperties' (comments with ``#``/``!``, ``=``/``:``/whitespace separators, line
continuations, escapes, ``\\uXXXX``). Files are read as UTF-8, falling back to ISO-8859-1
(what ``java.util.Properties.load`` uses) when they are not valid UTF-8.
"""

from __future__ import annotations

from typing import Dict

from jproperties import ParseError, Properties

from ..errors import ConfigError


def load_properties(path: str, option: str) -> Dict[str, str]:
    """Return the file's key/value pairs; every problem is a one-line :class:`ConfigError`."""
    try:
        with open(path, "rb") as handle:
            data = handle.read()
    except FileNotFoundError:
        raise ConfigError(f"{option}: file not found: {path}") from None
    except IsADirectoryError:
        raise ConfigError(f"{option}: is a directory, not a properties file: {path}") from None
    except OSError as exc:
        raise ConfigError(f"{option}: cannot read {path}: {exc.strerror}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("iso-8859-1")
    return parse_properties(text, f"{option} {path}")


def parse_properties(text: str, source: str) -> Dict[str, str]:
    props = Properties()
    try:
        props.load(text, "utf-8")
    except ParseError as exc:
        raise ConfigError(f"{source}: malformed properties: {_line_of(exc)}") from None
    result = {}
    for key, value in props.properties.items():
        if not key:
            raise ConfigError(f"{source}: malformed properties: a line has a value but no key")
        result[key] = value
    return result


def _line_of(exc: ParseError) -> str:
    message = str(exc)
    return message.replace("Parse error in <unknown>", "line").strip()
