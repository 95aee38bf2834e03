"""What a stream does while it waits for the target: it keeps its place in the source group.

A wait for acknowledgements (a commit's flush, a full producer queue) blocks the stream's loop,
and librdkafka drops a member that has not polled for max.poll.interval.ms: its partitions move to
another member, which mirrors again everything since the last commit while this one's queued
records are still delivered. Each stream registers what keeps it in the group (pausing its
partitions and serving the group in consume calls); the producers call ``serve`` at every step of
their waits, whichever thread waits. A thread without a registration (the main thread's close)
does nothing.
"""

from __future__ import annotations

import threading
import time
from typing import Callable, Optional

_local = threading.local()
#: A wait for the target is logged this long after it began, then at doubling intervals.
FIRST_LOG_S = 10.0


def register(keep_alive: Optional[Callable[[], None]]) -> None:
    """What this thread does at each step of a wait for the target (None: nothing)."""
    _local.keep_alive = keep_alive


def serve() -> None:
    keep_alive = getattr(_local, "keep_alive", None)
    if keep_alive is not None:
        keep_alive()


class WaitLog:
    """When a long wait for acknowledgements is worth a line: at 10 s, then 30, 70, 150 s... The
    status line reports a stall every interval; a line per stream per 10 s only repeats it."""

    def __init__(self, first_s: float = FIRST_LOG_S, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._every = first_s
        self._next = clock() + first_s

    def due(self) -> bool:
        now = self._clock()
        if now < self._next:
            return False
        self._every *= 2
        self._next = now + self._every
        return True
