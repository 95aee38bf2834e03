"""Loading ``--message.handler`` and ``--consumer.rebalance.listener`` by dotted path.

The Kafka contract (``CoreUtils.createObject``): with an args string the class is built with that
single string, unsplit; without it, with no arguments. The KIP-3 contract (no-argument
constructor, then ``init(args)``) works too. Everything that can go wrong is a one-line
:class:`PluginLoadError`, raised before any connection is made.
"""

from __future__ import annotations

import inspect
import os
import pkgutil
import sys
from typing import Any, Optional

from .errors import PluginLoadError
from .handlers import FunctionHandler, is_raw_handler

_JAVA_PREFIXES = ("org.", "com.", "kafka.", "io.", "net.")


def _resolve(path: str, what: str, option: str) -> Any:
    if not path or path.strip() != path:
        raise PluginLoadError(f"{option}: '{path}' is not a dotted Python path")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        return pkgutil.resolve_name(path)
    except (ImportError, AttributeError, ValueError) as exc:
        hint = ""
        if path.startswith(_JAVA_PREFIXES) and ":" not in path:
            hint = f" (a Java class cannot be used here: write the {what} as a Python class)"
        raise PluginLoadError(f"{option}: cannot load '{path}': {exc}{hint}") from None
    except Exception as exc:  # the module itself raised while importing
        raise PluginLoadError(
            f"{option}: importing '{path}' failed: {type(exc).__name__}: {exc}"
        ) from None


def _accepts_positional(cls: type, count: int) -> bool:
    try:
        signature = inspect.signature(cls)
    except (TypeError, ValueError):
        return True
    try:
        signature.bind(*(["x"] * count))
    except TypeError:
        return False
    return True


def _build(target: Any, args: Optional[str], option: str) -> Any:
    try:
        if args is None:
            return target()
        if _accepts_positional(target, 1):
            return target(args)
        if hasattr(target, "init") and _accepts_positional(target, 0):
            instance = target()
            instance.init(args)
            return instance
    except Exception as exc:
        raise PluginLoadError(
            f"{option}: building {target.__name__} failed: {type(exc).__name__}: {exc}"
        ) from None
    raise PluginLoadError(
        f"{option}: {target.__name__} takes neither one string argument nor "
        f"a no-argument constructor with init(args)"
    )


def load_handler(path: str, args: Optional[str] = None, raw: bool = False):
    """Load and build the message handler named by ``--message.handler`` (``raw``: for
    ``--use.raw.bytes``, where a handler decides per batch with ``handle_batch``)."""
    option = "--message.handler"
    target = _resolve(path, "message handler", option)
    if inspect.isclass(target):
        handler = _build(target, args, option)
    elif callable(target) and not hasattr(target, "handle") and not hasattr(target, "handle_batch"):
        if raw:
            raise PluginLoadError(f"{option}: '{path}' is a function; with --use.raw.bytes the handler is "
                                  f"a class with handle_batch(batch)")
        if args is not None:
            raise PluginLoadError(
                f"{option}: '{path}' is a function; --message.handler.args needs a class"
            )
        return FunctionHandler(target)
    else:
        handler = target
    if raw and not is_raw_handler(handler):
        raise PluginLoadError(f"{option}: '{path}' handles records; with --use.raw.bytes a handler decides "
                              f"per batch and never sees records: write handle_batch(batch) (KIP-712)")
    if not raw and not callable(getattr(handler, "handle", None)):
        hint = " (it has handle_batch: run it with --use.raw.bytes)" if is_raw_handler(handler) else ""
        raise PluginLoadError(f"{option}: '{path}' has no handle(record) method{hint}")
    return handler


def load_listener(path: str, args: Optional[str] = None):
    """Load and build the rebalance listener named by ``--consumer.rebalance.listener``."""
    option = "--consumer.rebalance.listener"
    target = _resolve(path, "rebalance listener", option)
    listener = _build(target, args, option) if inspect.isclass(target) else target
    callbacks = ("on_partitions_assigned", "on_partitions_revoked", "on_partitions_lost")
    if not any(callable(getattr(listener, name, None)) for name in callbacks):
        raise PluginLoadError(f"{option}: '{path}' has none of {', '.join(callbacks)}")
    return listener
