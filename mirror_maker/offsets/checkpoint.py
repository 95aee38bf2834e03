"""Flush, then commit: the only place where the no-data-loss commit rule lives.

A stream records ``offset + 1`` per partition after a record's outputs were handed to the sink
(or after the handler filtered it out). A commit first flushes the sink (the shared producer, the
stream's own); only if every queued record was acknowledged, and no fatal failure happened, does
it commit those offsets synchronously. So a committed offset never passes an undelivered record.
A stream with nothing pending does not flush (it would only wait for the other streams'
records), and only partitions the stream still owns are committed.

Where offsets go is behind the committer (``committer.OffsetCommitter`` commits them to the
source group; exactly-once commits them on the target inside the transaction). A committer whose
commit makes the records visible (a transaction) commits every pending partition at once: a
transaction holds them all, and committing some offsets of it would leave records visible whose
offsets are not committed.

Each partition's last committed offset is kept (its start, before the first commit): a rewind goes
back there, and an offset not committed for ``REFRESH_S`` is committed again with the next commit,
so that it never expires while its partition is idle (offsets in a group without members, as
exactly-once keeps on the target, expire ``offsets.retention.minutes`` after their last commit).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable, Dict, Iterable, Optional

from ..records import TopicPartition
from ..engine.state import RunState

log = logging.getLogger("mirror_maker.checkpoint")

#: An idle partition's offset is committed again after this long (Kafka's offsets.retention.minutes
#: is 7 days by default; a day leaves room for brokers set lower).
REFRESH_S = 24 * 3600.0
#: A commit (its flush and the commit itself) this slow is told in an INFO line, at most one per
#: SLOW_COMMIT_LOG_S and stream: a target slow to acknowledge or to commit shows there, split in
#: its two parts, before it shows as lag.
SLOW_COMMIT_S = 2.0
SLOW_COMMIT_LOG_S = 30.0


class SlowCommits:
    """Commits slower than SLOW_COMMIT_S, summed up in one line at most every SLOW_COMMIT_LOG_S:
    how many since the last line, and where the slowest one's time went."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._count = 0
        self._slowest = (0.0, 0.0)
        self._next = 0.0

    def took(self, flush_s: float, commit_s: float) -> None:
        """A commit that completed; the slow ones held back are told once the quiet time has
        passed, at the next commit, slow or not."""
        if flush_s + commit_s >= SLOW_COMMIT_S:
            self._count += 1
            if flush_s + commit_s > sum(self._slowest):
                self._slowest = (flush_s, commit_s)
        now = self._clock()
        if not self._count or now < self._next:
            return
        flush_s, commit_s = self._slowest
        log.info("[%s] %d commit%s took %.0f s or more since the last such line; the slowest %.1f s: %.1f s "
                 "waiting for the target's acknowledgements, %.1f s committing",
                 threading.current_thread().name, self._count, "" if self._count == 1 else "s", SLOW_COMMIT_S,
                 flush_s + commit_s, flush_s, commit_s)
        self._count, self._slowest, self._next = 0, (0.0, 0.0), now + SLOW_COMMIT_LOG_S


class Checkpoint:
    """One stream's pending offsets and its flush-then-commit cycle."""

    def __init__(self, sink, committer, state: RunState, interval_ms: int, clock=time.monotonic, metrics=None,
                 owned: Callable[[TopicPartition], bool] = lambda tp: True, refresh_s: float = REFRESH_S) -> None:
        """``owned`` says whether the stream still owns a partition (a record of a partition
        revoked meanwhile must never move the group's offset, backwards or forwards)."""
        self._sink = sink
        self._owned = owned
        self._committer = committer
        self._state = state
        self._interval_s = interval_ms / 1000.0
        self._clock = clock
        self._metrics = metrics
        self._refresh_s = refresh_s
        self._last_commit = clock()
        self.pending: Dict[TopicPartition, int] = {}
        #: Each owned partition's last committed offset (or its start): where a rewind goes.
        self.committed: Dict[TopicPartition, int] = {}
        self._committed_at: Dict[TopicPartition, float] = {}
        #: How often each partition was discarded (revoked or lost): a commit whose flush served a
        #: rebalance commits no offset taken before it, even of a partition assigned back since
        #: (its records not acknowledged then were dropped with it).
        self._discards: Dict[TopicPartition, int] = {}
        self._slow = SlowCommits()

    def restart_timer(self) -> None:
        """The next commit is due an interval from now (after a rollback's recovery too)."""
        self._last_commit = self._clock()

    def due(self) -> bool:
        return self._clock() - self._last_commit > self._interval_s

    def started(self, positions: Dict[TopicPartition, int]) -> None:
        """Partitions taken over at these positions (committed, or resolved just now). When an
        offset read from the store was committed is not known (days ago, maybe): each is
        refreshed with the commit one interval later, so that its expiry is never closer than
        ``refresh_s``."""
        due = self._clock() - self._refresh_s + self._interval_s
        for tp, offset in positions.items():
            self.committed[tp] = offset
            self._committed_at[tp] = due

    def discards(self, tp: TopicPartition) -> int:
        """How often ``tp`` was discarded (revoked or lost): whoever took work of it before a wait
        that serves the group compares this after it."""
        return self._discards.get(tp, 0)

    def discard(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            self._discards[tp] = self._discards.get(tp, 0) + 1
            self.pending.pop(tp, None)
            self.committed.pop(tp, None)
            self._committed_at.pop(tp, None)

    def commit(self, partitions: Optional[Iterable[TopicPartition]] = None,
               deadline: Optional[float] = None) -> bool:
        """Flush the sink, then commit (only ``partitions``, if given, unless the committer's
        commit is atomic).

        Returns False, committing nothing, when the flush did not complete by ``deadline`` (a
        ``time.monotonic()`` value; the stop's deadline when stopping) or a fatal failure has been
        recorded. Commit retries end at the deadline too. A transactional committer may raise
        ``TransactionAborted``: nothing was committed, the caller goes back to ``committed``.
        """
        try:
            return self._commit(partitions, deadline)
        finally:
            # The next commit is due an interval after this one ended, as MirrorMaker v1 times
            # it: timed from its start, a target whose commits take longer than the interval (a
            # transaction coordinator just back from an outage) got one commit per batch, each
            # paying the whole cost for a few hundred records.
            self.restart_timer()

    def _commit(self, partitions: Optional[Iterable[TopicPartition]], deadline: Optional[float]) -> bool:
        now = self._clock()
        if self._state.failed:
            log.info("Exiting on send failure, skip committing offsets.")
            return False
        started = time.monotonic()
        wanted = None if partitions is None or getattr(self._committer, "makes_visible", False) else set(partitions)
        offsets = {tp: off for tp, off in self.pending.items() if (wanted is None or tp in wanted) and self._owned(tp)}
        if not offsets and not self._stale(now) and not self._sink.needs_commit():
            return True  # nothing of this stream's is waiting: no flush, which would wait for others'
        deadline = self._state.deadline if deadline is None else deadline
        discards = {tp: self.discards(tp) for tp in offsets}
        if not self._sink.flush(deadline):
            return False
        flushed = time.monotonic()
        # The flush served the group while it waited: a partition revoked meanwhile is not ours,
        # and one assigned back since starts again from the group's offset.
        offsets = {tp: off for tp, off in offsets.items()
                   if self._owned(tp) and self.discards(tp) == discards[tp]}
        offsets.update({tp: self.committed[tp] for tp in self._stale(now) if tp not in offsets})
        committed = self._committer.commit(offsets, deadline)
        self._slow.took(flushed - started, time.monotonic() - flushed)
        for tp, offset in committed.items():
            if self.pending.get(tp) == offset:
                del self.pending[tp]
            if self._owned(tp):
                self.committed[tp] = offset
                self._committed_at[tp] = now
        if self._metrics is not None:
            self._metrics.committed(time.monotonic() - started)
        return True

    def _stale(self, now: float):
        """Owned partitions whose offset was last committed ``refresh_s`` ago or more."""
        return [tp for tp, at in self._committed_at.items()
                if now - at >= self._refresh_s and tp in self.committed and self._owned(tp)]
