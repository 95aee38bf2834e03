"""The optional parts of the package (its extras), and the one line naming one that is missing.

Only what a feature needs is installed with it: ``raw`` (batch CRCs, for ``--use.raw.bytes``),
``jks`` (JKS key and trust stores), ``spark`` (``--spark``), ``embedded`` (the demo's brokers).
A feature asked for without its extra is a configuration error (exit 1, before anything
connects) that says what to install.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from .errors import ConfigError


def install_hint(extra: str) -> str:
    return f"pip install 'kafka-mirror-maker[{extra}]'"


def require(extra: str, module: str, feature: str) -> ModuleType:
    """``module``, imported; a one-line :class:`ConfigError` naming ``extra`` when it is missing."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ConfigError(f"{feature} needs the '{extra}' extra, which is not installed "
                          f"({module} is missing): {install_hint(extra)}") from None
