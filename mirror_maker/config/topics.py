"""Topic selection: ``--include``/``--whitelist`` to a regex exactly as Kafka builds it.

Kafka (``TopicFilter``) trims the string, turns commas into ``|``, deletes every space, strips
leading and trailing quotes, compiles a *Java* regex and requires a full match. The few Java
constructs Python spells differently are translated; one that cannot be is a startup error.
"""

from __future__ import annotations

import re
from typing import Callable, Iterable, List, Optional, Pattern

from ..errors import ConfigError

#: Topics the broker flags internal; skipped unless ``exclude.internal.topics=false``.
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})

_POSIX_CLASSES = {
    "Lower": "a-z", "Upper": "A-Z", "ASCII": "\\x00-\\x7F", "Alpha": "a-zA-Z", "Digit": "0-9",
    "Alnum": "a-zA-Z0-9", "Punct": "!-/:-@\\[-`{-~", "Graph": "!-~", "Print": " -~",
    "Blank": " \\t", "Cntrl": "\\x00-\\x1F\\x7F", "XDigit": "0-9a-fA-F", "Space": " \\t\\n\\x0B\\f\\r",
    "L": "^\\W\\d_", "IsAlphabetic": "^\\W\\d_", "IsDigit": "\\d", "N": "\\d",
}


def kafka_include_string(raw: str) -> str:
    """Apply Kafka's textual clean-up of the include string (section 2.1 of the reference)."""
    text = raw.strip().replace(",", "|").replace(" ", "")
    return text.lstrip("\"'").rstrip("\"'")


def _unquote(regex: str) -> str:
    r"""Java's ``\Q...\E`` literal quoting becomes escaped text."""
    return re.sub(r"\\Q(.*?)(?:\\E|$)", lambda m: re.escape(m.group(1)), regex, flags=re.S)


def _inline_flags(regex: str) -> str:
    """Java allows ``(?i)`` anywhere and it applies from there on; Python only at the start.

    A top-level flag group in the middle becomes a scoped group around the rest of the pattern.
    Java's ``u`` (Unicode case) is what Python does already; ``d`` (Unix lines) has no equivalent.
    """
    depth, i = 0, 0
    while i < len(regex):
        char = regex[i]
        if char == "\\":
            i += 2
            continue
        if char == "[":
            close = regex.find("]", i + 2)
            i = (close if close > 0 else len(regex)) + 1
            continue
        match = re.match(r"\(\?([a-zA-Z]+)\)", regex[i:])
        if match:
            flags = match.group(1).replace("u", "")
            if "d" in flags or not set(flags) <= set("imsx"):
                raise ConfigError(f"the include regex uses the Java flag group {match.group(0)}, "
                                  "which has no Python equivalent here")
            rest = regex[i + match.end():]
            if i == 0 and depth == 0:
                return (f"(?{flags})" if flags else "") + _inline_flags(rest)
            if depth == 0:
                inner = _inline_flags(rest)
                return regex[:i] + (f"(?{flags}:{inner})" if flags else inner)
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        i += 1
    return regex


def _translate_java(regex: str) -> str:
    regex = _inline_flags(_unquote(regex))
    regex = regex.replace("\\z", "\\Z")
    regex = re.sub(r"\(\?<([A-Za-z][A-Za-z0-9]*)>", r"(?P<\1>", regex)
    regex = re.sub(r"\\k<([A-Za-z][A-Za-z0-9]*)>", r"(?P=\1)", regex)

    def posix(match: "re.Match[str]") -> str:
        negate, name = match.group(1) == "P", match.group(2)
        if name.startswith("Is") and name not in _POSIX_CLASSES:
            name = name[2:]
        body = _POSIX_CLASSES.get(name)
        if body is None:
            raise ConfigError(f"the include regex uses \\{match.group(1)}{{{match.group(2)}}}, "
                              "which has no Python equivalent here")
        if body.startswith("^"):
            return f"[{body[1:]}]" if negate else f"[{body}]"
        return f"[^{body}]" if negate else f"[{body}]"

    return re.sub(r"\\([pP])\{(\w+)\}", posix, regex)


def compile_include(raw: str) -> Pattern[str]:
    """Compile the include string; raises a one-line :class:`ConfigError` when invalid."""
    cleaned = kafka_include_string(raw)
    if not cleaned:
        raise ConfigError("--include: the topic regex is empty")
    try:
        return re.compile(_translate_java(cleaned))
    except ConfigError as exc:
        raise ConfigError(f"--include: {exc}") from None
    except re.error as exc:
        raise ConfigError(f"--include: {cleaned} is an invalid regex: {exc}") from None


def select_topics(
    pattern: Pattern[str], topics: Iterable[str], exclude_internal: bool = True,
    selects: Optional[Callable[[Pattern[str], str], bool]] = None,
) -> List[str]:
    """The topics the pattern fully matches (or ``selects(pattern, topic)`` says are mirrored:
    MirrorMaker 2's rules), broker-internal ones left out unless asked for."""
    return sorted(
        topic
        for topic in topics
        if (selects(pattern, topic) if selects else pattern.fullmatch(topic))
        and not (exclude_internal and topic in INTERNAL_TOPICS)
    )
