"""The command lines: Kafka's MirrorMaker options and our extensions (``command``, with the
``translate-offsets`` subcommand), MirrorMaker 2's dedicated mode (``dedicated``:
``connect-mirror-maker mm2.properties``), validation, and exit codes. ``options`` makes the click
options and ``--help`` from ``config.spec``; ``reference`` makes docs/configuration.md's tables.

Both parse and validate everything before connecting; ``exit_codes`` is the one place that maps
errors and outcomes to exit statuses. May import every other subpackage; nothing imports it but
``__main__`` and the two ``bin/`` scripts (and ``exit_codes``, which the engine, the Spark driver
and the dedicated mode's supervisor use for the constants).
"""

from .command import main

__all__ = ["main"]
