"""Flush, then commit: the only place where the no-data-loss commit rule lives.

A thread records ``offset + 1`` per partition after a record's outputs were handed to the
producer (or after the handler filtered it out). A commit first flushes the *shared*
producer; only if every queued record was acknowledged, and no fatal failure happened, does it
commit those offsets synchronously. So a committed offset never passes an undelivered record.
A thread with nothing pending does not flush (it would only wait for the other threads'
records), and only partitions the thread still owns are committed.

Where offsets go is behind the committer (``committer.OffsetCommitter`` commits them to the
source group), so an exactly-once mode can commit them inside the target's transaction instead.
"""

from __future__ import annotations

import logging
import time
from typing import Callable, Dict, Iterable, Optional

from ..clients.producer import MirrorProducer
from ..records import TopicPartition
from .committer import OffsetCommitter
from ..engine.state import RunState

log = logging.getLogger("mirror_maker.checkpoint")


class Checkpoint:
    """One mirror thread's pending offsets and its flush-then-commit cycle."""

    def __init__(
        self,
        producer: MirrorProducer,
        committer: OffsetCommitter,
        state: RunState,
        interval_ms: int,
        clock=time.monotonic,
        metrics=None,
        owned: Callable[[TopicPartition], bool] = lambda tp: True,
    ) -> None:
        """``owned`` says whether the thread still owns a partition (a record of a partition
        revoked meanwhile must never move the group's offset, backwards or forwards)."""
        self._producer = producer
        self._owned = owned
        self._committer = committer
        self._state = state
        self._interval_s = interval_ms / 1000.0
        self._clock = clock
        self._metrics = metrics
        self._last_commit = clock()
        self.pending: Dict[TopicPartition, int] = {}

    def due(self) -> bool:
        return self._clock() - self._last_commit > self._interval_s

    def discard(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            self.pending.pop(tp, None)

    def commit(self, partitions: Optional[Iterable[TopicPartition]] = None,
               deadline: Optional[float] = None) -> bool:
        """Flush the shared producer, then commit (only ``partitions``, if given).

        Returns False, committing nothing, when the flush did not complete by ``deadline`` (a
        ``time.monotonic()`` value; the stop's deadline when stopping) or a fatal failure has been
        recorded. Commit retries end at the deadline too.
        """
        self._last_commit = self._clock()
        if self._state.failed:
            log.info("Exiting on send failure, skip committing offsets.")
            return False
        started = time.monotonic()
        wanted = set(partitions) if partitions is not None else None
        offsets = {tp: off for tp, off in self.pending.items()
                   if (wanted is None or tp in wanted) and self._owned(tp)}
        if not offsets:
            return True  # nothing of this thread's is waiting: no flush, which would wait for others'
        deadline = self._state.deadline if deadline is None else deadline
        if not self._producer.flush(deadline):
            return False
        committed = self._committer.commit(offsets, deadline)
        for tp, offset in committed.items():
            if self.pending.get(tp) == offset:
                del self.pending[tp]
        if self._metrics is not None:
            self._metrics.committed(time.monotonic() - started)
        return True
