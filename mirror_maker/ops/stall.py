"""Whether the mirror makes progress while records wait: a stream stuck behind a target that does
not answer (or a call that does not return) must show as stalled, never as "lag 0".

Progress is the target's acknowledgement of records (for exactly-once: of records in the open
transaction too, as commits come once per commit interval) or a commit; records wait when some are queued for the target, or the source holds records not
yet mirrored (lag). No progress for ``threshold_s`` while records wait is a stall: the status
line says so, ``mirrormaker_stalled_seconds`` counts its age and /ready answers 503.
"""

from __future__ import annotations

import time
from typing import Callable, Optional

#: No progress for this long while records wait is a stall.
STALL_S = 15.0


class ProgressWatch:
    def __init__(self, threshold_s: float = STALL_S, clock: Callable[[], float] = time.monotonic) -> None:
        self._threshold_s = threshold_s
        self._clock = clock
        self._mark: Optional[tuple] = None
        self._moved_at = clock()

    def look(self, totals: dict) -> float:
        """Seconds stalled (0 when progressing or when nothing waits), from a status snapshot."""
        now = self._clock()
        mark = (totals.get("acked", 0), totals.get("delivered", 0), totals.get("commits", 0))
        waiting = totals.get("queued", 0) > 0 or totals.get("lag", 0) > 0
        if self._mark is None:
            self._mark = mark  # the first look: the start is the last progress
        if mark != self._mark or not waiting:
            self._mark, self._moved_at = mark, now
            return 0.0
        stalled = now - self._moved_at
        return stalled if stalled >= self._threshold_s else 0.0
