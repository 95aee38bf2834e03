"""The secrets of this run's configuration, kept out of every line the process writes.

The configuration never logs a secret's value itself (``config.translate.shown``), but a secret
can still reach a line another way: librdkafka quotes a value in its own errors ("Invalid value
\"...\" for configuration property ..."), an exception names what it could not parse, a user's
plugin logs a setting. So ``config`` registers every secret it reads (passwords, JAAS entries,
client secrets, provider results for such keys), and the log formatter and the one error line
(``ops.log``, ``cli``) replace each one with ``[hidden]``.

Values shorter than ``MIN_LENGTH`` are not replaced: hiding every "ab" in every line would make
the log unreadable, and such a value is no secret worth the name.
"""

from __future__ import annotations

import re
import threading
from typing import List, Optional, Pattern

HIDDEN = "[hidden]"
MIN_LENGTH = 4

_lock = threading.Lock()
_secrets: List[str] = []
#: One alternation of every secret, longest first (a secret that contains another is hidden
#: whole), ignoring case: a line may quote a value lower-cased (e.g. "acks=...").
_pattern: Optional[Pattern[str]] = None


def register(*values: object) -> None:
    """Remember secret values (strings; anything else is ignored) for :func:`redact`."""
    global _pattern
    with _lock:
        for value in values:
            if isinstance(value, str) and len(value) >= MIN_LENGTH and value not in _secrets:
                _secrets.append(value)
        if _secrets:
            ordered = sorted(_secrets, key=len, reverse=True)
            _pattern = re.compile("|".join(re.escape(secret) for secret in ordered), re.IGNORECASE)


def redact(text: str) -> str:
    """``text`` with every registered secret replaced by ``[hidden]``."""
    pattern = _pattern
    return text if pattern is None else pattern.sub(HIDDEN, text)


def forget_all() -> None:
    """For tests: a fresh process's empty registry."""
    global _pattern
    with _lock:
        _secrets.clear()
        _pattern = None
