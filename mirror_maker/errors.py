"""Every error the mirror maker raises on purpose, in one hierarchy.

    MirrorMakerError
    ├── ConfigError            bad input found before connecting (exit 1)
    │   └── PluginLoadError    a handler or listener that cannot be loaded or built
    └── MirrorFailure          a fatal runtime failure (exit 255)
        ├── SendFailed         a record the target did not take, with abort.on.send.failure=true
        ├── HandlerFailed      the message handler raised on a record
        ├── ListenerFailed     the user's rebalance listener raised
        ├── NoOffsetForPartition  no valid offset to start from and auto.offset.reset=none
        └── ClientFailed       an unexpected consumer, producer or admin error

``cli.main`` is the one place that turns these into exit codes (see ``exit_codes``).
"""

from __future__ import annotations


class MirrorMakerError(Exception):
    """Base of every error raised on purpose; its message is one line meant for the user."""


class ConfigError(MirrorMakerError):
    """Bad input: a missing or malformed file, an invalid option value or regex."""


class PluginLoadError(ConfigError):
    """A ``--message.handler`` or ``--consumer.rebalance.listener`` that cannot be loaded or built."""


class MirrorFailure(MirrorMakerError):
    """A failure while mirroring that stops every thread without committing past it."""


class SendFailed(MirrorFailure):
    """The target refused a record, or the producer rejected it locally (e.g. too large)."""


class HandlerFailed(MirrorFailure):
    """The message handler raised an exception on a record."""


class ListenerFailed(MirrorFailure):
    """The user's rebalance listener raised an exception."""


class NoOffsetForPartition(MirrorFailure):
    """A partition has no committed offset, or its offset is out of range, and
    ``auto.offset.reset=none`` forbids guessing (Kafka's NoOffsetForPartitionException)."""


class ClientFailed(MirrorFailure):
    """A Kafka client error the mirror cannot recover from."""
