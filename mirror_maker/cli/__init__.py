"""The command line: Kafka's options and our extensions, validation, and exit codes.

``command`` parses and validates everything before connecting and is the one place that maps
errors and outcomes to exit statuses (``exit_codes``). May import every other subpackage; nothing
imports it but ``__main__`` and ``bin/kafka-mirror-maker.py`` (and ``exit_codes``, which the
engine and the Spark driver use for the constants).
"""

from .command import main

__all__ = ["main"]
