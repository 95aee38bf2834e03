"""Topic selection: ``--include``/``--whitelist`` to a regex exactly as Kafka builds it.

Kafka (``TopicFilter``) trims the string, turns commas into ``|``, deletes every space, strips
leading and trailing quotes, compiles a *Java* regex and requires a full match. The Java
constructs Python spells differently are translated (named groups, ``\\p{...}``, ``\\Q...\\E``,
inline flags, nested and intersected classes) and compiled with the ``regex`` module, whose
possessive quantifiers and atomic groups are Java's on every Python version; a construct with no
translation is a startup error.
"""

from __future__ import annotations

import re
from typing import Callable, Iterable, List, Optional, Pattern, Tuple

import regex

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


def _posix(negate: bool, name: str) -> Tuple[str, bool]:
    """A Java ``\\p{name}`` (``\\P`` negates): its class body, and whether that body is negated."""
    original = name
    if name.startswith("Is") and name not in _POSIX_CLASSES:
        name = name[2:]
    body = _POSIX_CLASSES.get(name)
    if body is None:
        raise ConfigError(f"the regex uses \\{'P' if negate else 'p'}{{{original}}}, which has no Python "
                          "equivalent here")
    if body.startswith("^"):
        return body[1:], not negate
    return body, negate


def _union(body: str, nested: List[str]) -> str:
    """One character of ``[body]`` or of any nested class: a class, or an alternation of them."""
    parts = ([f"[{body}]"] if body else []) + nested
    if not parts:
        raise ConfigError("the regex has an empty character class")
    return parts[0] if len(parts) == 1 else f"(?:{'|'.join(parts)})"


def _character_class(regex: str, i: int) -> Tuple[str, int]:
    """The Java class starting at ``regex[i] == '['``, as a Python expression matching one
    character, and the index after it.

    Java classes nest (``[a-c[x-z]]``: a union) and intersect (``[a-z&&[^aeiou]]``), and a
    leading ``^`` negates the whole class (Java 9 and later). Python classes do neither: a union
    becomes an alternation, an intersection a lookahead per operand before the first operand
    (each consumes one character), a negation a negative lookahead before any character.
    """
    i += 1
    negated = regex.startswith("^", i)
    i += negated
    operands: List[str] = []
    body, nested, first = "", [], True
    while True:
        if i >= len(regex):
            raise ConfigError("the regex has an unclosed character class")
        char = regex[i]
        if char == "]" and not first:
            i += 1
            break
        first = False
        if char == "[":
            expression, i = _character_class(regex, i)
            nested.append(expression)
        elif regex.startswith("&&", i):
            operands.append(_union(body, nested))
            body, nested, i = "", [], i + 2
        elif char == "\\" and regex[i + 1:i + 2] in ("p", "P") and regex.startswith("{", i + 2):
            end = regex.find("}", i)
            class_body, class_negated = _posix(regex[i + 1] == "P", regex[i + 3:end])
            if class_negated:
                nested.append(f"[^{class_body}]")
            else:
                body += class_body
            i = end + 1
        elif char == "\\":
            body += regex[i:i + 2]
            i += 2
        else:
            # Literal in a Java class; escaped so that Python sees no set operation (&&, ||, ~~).
            body += "\\" + char if char in "&|~" else char
            i += 1
    operands.append(_union(body, nested))
    if len(operands) == 1 and not nested and negated:
        return f"[^{body}]", i
    expression = (operands[0] if len(operands) == 1
                  else "(?:" + "".join(f"(?={operand})" for operand in operands[1:]) + operands[0] + ")")
    return (f"(?:(?!{expression})[\\s\\S])" if negated else expression), i


def _translate_java(regex: str) -> str:
    """The Java regex in the ``regex`` module's syntax (which has possessive quantifiers and
    atomic groups on every Python version, where ``re`` has them from 3.11 on)."""
    regex = _inline_flags(_unquote(regex))
    out, i = [], 0
    while i < len(regex):
        char = regex[i]
        if char == "[":
            expression, i = _character_class(regex, i)
            out.append(expression)
            continue
        named = re.match(r"\(\?<([A-Za-z][A-Za-z0-9]*)>", regex[i:])
        if named:
            out.append(f"(?P<{named.group(1)}>")
            i += named.end()
            continue
        if char == "\\":
            escape = regex[i:i + 2]
            backreference = re.match(r"\\k<([A-Za-z][A-Za-z0-9]*)>", regex[i:])
            posix = re.match(r"\\([pP])\{(\w+)\}", regex[i:])
            if backreference:
                out.append(f"(?P={backreference.group(1)})")
                i += backreference.end()
            elif posix:
                body, negated = _posix(posix.group(1) == "P", posix.group(2))
                out.append(f"[^{body}]" if negated else f"[{body}]")
                i += posix.end()
            else:
                out.append("\\Z" if escape == "\\z" else escape)
                i += len(escape)
            continue
        out.append(char)
        i += 1
    return "".join(out)


class InvalidRegex(ConfigError):
    """A Java regex that is invalid or uses a construct with no translation; ``reason`` says
    what is wrong without the regex, for a message that names it its own way."""

    def __init__(self, java: str, reason: str) -> None:
        super().__init__(f"'{java}': {reason}")
        self.reason = reason


def compile_java_regex(java: str) -> "regex.Pattern[str]":
    """A Java regex compiled with the same meaning on every Python version; a one-line
    :class:`InvalidRegex` when it is invalid or uses a construct with no translation."""
    try:
        return regex.compile(_translate_java(java))
    except ConfigError as exc:  # a construct _translate_java refuses
        raise InvalidRegex(java, str(exc)) from None
    except regex.error as exc:
        raise InvalidRegex(java, f"invalid regex: {exc}") from None


def compile_include(raw: str, option: str = "--include") -> Pattern[str]:
    """Compile the include string; a one-line :class:`ConfigError` naming the option the user
    typed (``--include`` or ``--whitelist``) and its value when it is invalid."""
    cleaned = kafka_include_string(raw)
    if not cleaned:
        raise ConfigError(f"{option} '{raw}': the topic regex is empty")
    try:
        return compile_java_regex(cleaned)
    except InvalidRegex as exc:
        raise ConfigError(f"{option} '{raw}': {exc.reason}") from None


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
