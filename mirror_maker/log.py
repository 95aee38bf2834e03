"""Logging like Kafka's tools: ``[timestamp] LEVEL message (logger)`` on stderr.

librdkafka's own log lines are routed into Python logging under
``mirror_maker.librdkafka.<client.id>`` so they share the format and the level.
"""

from __future__ import annotations

import logging
import os
import sys
from typing import Optional

FORMAT = "[%(asctime)s] %(levelname)s %(message)s (%(name)s)"
LEVEL_ENV = "MIRROR_MAKER_LOG_LEVEL"
LEVELS = ("DEBUG", "INFO", "WARN", "WARNING", "ERROR")


def resolve_level(option: Optional[str]) -> int:
    """The level from the option, else the environment variable, else INFO."""
    name = (option or os.environ.get(LEVEL_ENV) or "INFO").strip().upper()
    if name == "WARN":
        name = "WARNING"
    if name not in LEVELS:
        from .errors import ConfigError

        raise ConfigError(f"log level '{name}' is not one of DEBUG, INFO, WARN, ERROR")
    return getattr(logging, name)


class KafkaFormatter(logging.Formatter):
    """Kafka's layout and level names (WARN, not WARNING)."""

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
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


def librdkafka_logger(client_id: str) -> logging.Logger:
    """The logger a confluent client's ``logger`` setting should get."""
    return logging.getLogger(f"mirror_maker.librdkafka.{client_id}")
