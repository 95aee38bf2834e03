"""What every Python callback handed to a confluent client does before anything else.

After a fatal error, confluent-kafka may call the next callback (a purged record's delivery
report, a log line) with that error still pending in the thread. CPython raises a pending error
as a SystemError from the first call that checks for one, and ``with lock:`` checks right after
the lock's acquire has returned: the error then leaves the callback with the lock held, and every
later user of the lock waits for ever (seen with a fenced transactional producer, whose stream and
the status line then hung). So a callback first lets a pending error out while it holds nothing;
the client's call (flush, poll, consume) then raises it, and ``raised_fatal`` finds the cause.
"""

from __future__ import annotations

import contextlib
import functools
from typing import Callable, TypeVar

_NOTHING = contextlib.nullcontext()
F = TypeVar("F", bound=Callable)


def surface_pending_error() -> None:
    """Raise an error left pending in this thread, if any (as CPython's SystemError)."""
    # Entering a context manager calls its __enter__ through the one call path that checks for a
    # pending error on every Python version (the specialised calls of 3.11+ do not).
    with _NOTHING:
        pass


def client_callback(func: F) -> F:
    """``func`` as a confluent client's callback: a pending error is raised before it runs."""
    @functools.wraps(func)
    def callback(*args, **kwargs):
        surface_pending_error()
        return func(*args, **kwargs)
    return callback  # type: ignore[return-value]
