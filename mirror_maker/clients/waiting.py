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
from typing import Callable, Optional

_local = threading.local()


def register(keep_alive: Optional[Callable[[], None]]) -> None:
    """What this thread does at each step of a wait for the target (None: nothing)."""
    _local.keep_alive = keep_alive


def serve() -> None:
    keep_alive = getattr(_local, "keep_alive", None)
    if keep_alive is not None:
        keep_alive()
