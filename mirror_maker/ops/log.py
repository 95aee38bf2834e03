"""Logging like Kafka's tools: ``[timestamp] LEVEL message (logger)`` on stderr.

librdkafka's own log lines are routed into Python logging under
``mirror_maker.librdkafka.<client.id>`` so they share the format and the level.
"""

from __future__ import annotations

import logging
import os
import re
import sys
import threading
import time
from typing import Dict, Optional

from ..callbacks import client_callback
from ..redaction import redact

FORMAT = "[%(asctime)s] %(levelname)s %(message)s (%(name)s)"
LEVEL_ENV = "MIRROR_MAKER_LOG_LEVEL"
LEVELS = ("DEBUG", "INFO", "WARN", "WARNING", "ERROR")


def resolve_level(option: Optional[str]) -> int:
    """The level from the option, else the environment variable, else INFO."""
    name = (option or os.environ.get(LEVEL_ENV) or "INFO").strip().upper()
    if name == "WARN":
        name = "WARNING"
    if name not in LEVELS:
        from ..errors import ConfigError

        raise ConfigError(f"log level '{name}' is not one of DEBUG, INFO, WARN, ERROR")
    return getattr(logging, name)


class KafkaFormatter(logging.Formatter):
    """Kafka's layout and level names (WARN, not WARNING); no secret of the configuration."""

    def format(self, record: logging.LogRecord) -> str:
        text = redact(super().format(record))
        if record.levelno == logging.WARNING:
            prefix_end = text.find("] WARNING ")
            if prefix_end >= 0:
                text = text[:prefix_end] + "] WARN " + text[prefix_end + len("] WARNING "):]
        return text


def configure_logging(level: int) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(KafkaFormatter(FORMAT))
    root = logging.getLogger()
    for existing in list(root.handlers):
        if getattr(existing, "_mirror_maker", False):
            root.removeHandler(existing)
    handler._mirror_maker = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(level)


class LibrdkafkaFilter(logging.Filter):
    """Keeps librdkafka's lines readable during an outage.

    librdkafka logs every failed reconnect (several a second) at ERROR. A broker being away is
    a warning until it hurts delivery (which the mirror reports itself), and the same line
    repeated adds nothing: repeats are shown once per ``window_s`` with a count.
    """

    def __init__(self, window_s: float = 30.0, clock=time.monotonic) -> None:
        super().__init__()
        self._window_s = window_s
        self._clock = clock
        self._seen: Dict[str, list] = {}
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        # A broker away is a warning until it hurts delivery; a fatal error (FATAL, TXNERR, a
        # fenced producer's ADDPARTS...) reaches the mirror through the client's API and is
        # reported there, as the one ERROR line naming what is wrong.
        if record.levelno >= logging.ERROR:
            record.levelno, record.levelname = logging.WARNING, "WARNING"
        if message.startswith("FAIL ") or _said_by_the_mirror(message):
            # One broker's connection failing (a restart, a move): the mirror says it once per
            # cluster side (clients.client_errors), and each client's own line is detail.
            record.levelno, record.levelname = logging.INFO, "INFO"
        if record.levelno < logging.INFO:
            return True  # librdkafka's debug contexts were asked for: every line, unfolded
        # Per client: the same line from two consumers is two events (e.g. each one's LeaveGroup).
        key = record.name + "|" + re.sub(r"\d+", "#", message)
        now = self._clock()
        with self._lock:
            entry = self._seen.get(key)
            if entry is not None and now - entry[0] < self._window_s:
                entry[1] += 1
                return False
            repeats = entry[1] if entry is not None else 0
            self._seen[key] = [now, 0]
            if len(self._seen) > 1000:
                self._seen = {k: v for k, v in self._seen.items() if now - v[0] < self._window_s}
        if repeats:
            record.msg, record.args = f"{message} (and {repeats} similar lines)", None
        return True


def _said_by_the_mirror(message: str) -> bool:
    """What the mirror reports itself in its own line: a transaction's failure ("Transaction
    aborted (...)", or the ERROR line of a fatal one), a fatal error, and a producer id retried
    while the coordinator settles the last transaction (the renewal's lines, the stall report)."""
    return (message.startswith(("TXNERR ", "FATAL "))  # (a fatal one: the mirror's ERROR line names it)
            or (message.startswith("GETPID ") and message.endswith(": retrying")))


_FILTER = LibrdkafkaFilter()


class ClientLogger:
    """What a confluent client's ``logger`` setting gets: its ``log`` calls reach the logger once a
    pending error is out (``callbacks``: logging takes its handlers' locks)."""

    def __init__(self, logger: logging.Logger) -> None:
        self.logger = logger

    @client_callback
    def log(self, level: int, msg: str, *args) -> None:
        self.logger.log(level, msg, *args)


def librdkafka_logger(client_id: str) -> ClientLogger:
    """The logger a confluent client's ``logger`` setting should get."""
    logger = logging.getLogger(f"mirror_maker.librdkafka.{client_id}")
    if _FILTER not in logger.filters:
        logger.addFilter(_FILTER)
    return ClientLogger(logger)
