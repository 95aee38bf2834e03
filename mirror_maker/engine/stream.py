"""One mirror stream (``mirrormaker-thread-{i}``): source → handler → sink → committer.

The same loop serves every mode and every Spark task. A mode only supplies parts (``parts.py``):
how partitions are owned (the source group, or exactly-once's static shards), how they are read
(records, or raw batches with a record path), where records go (the shared producer, a
transactional producer, the raw producer) and where offsets go (the source group, or the
target inside the transaction). Everything a guarantee rests on is written here once: where a
partition starts and where it goes on after a reset (``positions``), the commit rule (flush,
then commit: ``Checkpoint``), a rewind to the last commit after a rolled-back transaction, what a
rebalance commits, the stop bound, the lag and the "at its end" view of the status line.

A stream never exits the process: failures go to :class:`RunState` and every stream stops.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import Callable, Dict, List, Optional

from confluent_kafka import OFFSET_INVALID, KafkaError, KafkaException

from ..clients import waiting
from ..clients.client_errors import AUTHORIZATION_CODES
from ..errors import ClientFailed, ListenerFailed, MirrorFailure
from ..offsets.checkpoint import Checkpoint
from ..offsets.transactional import ProducerUnusable, TransactionAborted
from ..records import TopicPartition
from ..replication.offset_syncs import SyncingCommitter

log = logging.getLogger("mirror_maker.worker")

#: How long one read may wait for a first record. librdkafka's Python consumer has no wakeup(),
#: so this is the longest a stop waits for an idle stream to notice it; a busy one never waits.
POLL_TIMEOUT_S = 0.05
LAG_UPDATE_S = 0.2
#: A revoke's flush may take this share of max.poll.interval.ms: the whole group waits for this
#: member's rebalance callback, and a member that takes longer than that is thrown out of it.
REVOKE_SHARE_OF_POLL_INTERVAL = 0.5
#: While a wait for the target blocks the loop, the group is served once the wait has lasted a
#: quarter of max.poll.interval.ms (librdkafka's shortest is 1 s), at most this long: serving it
#: pauses the partitions, which drops what librdkafka fetched ahead, so not at every short wait.
KEEP_ALIVE_SHARE_OF_POLL_INTERVAL = 0.25
KEEP_ALIVE_MAX_S = 5.0


class StreamLog(logging.LoggerAdapter):
    def process(self, msg, kwargs):
        return f"[{self.extra['name']}] {msg}", kwargs


def describe(tps) -> str:
    if not tps:
        return "no partitions"
    return ", ".join(f"{tp.topic}-{tp.partition}" for tp in sorted(tps))


class Stream(threading.Thread):
    """One stream of a mirror; ``mode`` builds its parts inside the thread (``parts.Mode``)."""

    def __init__(self, index: int, mode, shared) -> None:
        super().__init__(name=f"mirrormaker-thread-{index}", daemon=True)
        self.index = index
        self._mode = mode
        self._shared = shared
        self._config = shared.config
        self._state = shared.state
        self._metrics = shared.metrics
        self.log = StreamLog(log, {"name": self.name})
        self.parts = None
        self._checkpoint: Optional[Checkpoint] = None
        self.assigned: set = set()
        #: Assigned partitions read to their end (and, where a commit makes records visible,
        #: committed): what --exit.when.caught.up and the status line read.
        self.at_end: set = set()
        #: The next offset of each assigned partition the stream has not handed over yet.
        self.positions: Dict[TopicPartition, int] = {}
        self._next_lag_update = 0.0
        #: A bounded run read everything (or a start position waits to be made durable): commit now.
        self._commit_now = False
        #: True once this stream took part in a rebalance (even with no partitions).
        self.rebalanced = False
        #: ``time.monotonic()`` of the last loop round: /ready checks the loop is not stuck.
        self.last_progress = time.monotonic()
        #: --emit.offset-syncs.enabled: this stream's OffsetSyncWriter (set by the runner).
        self.offset_syncs = None
        self._keeping_alive = False
        self._keep_alive_s = min(KEEP_ALIVE_MAX_S, self._config.max_poll_interval_s * KEEP_ALIVE_SHARE_OF_POLL_INTERVAL)
        self._in_rebalance = 0

    # -- lifecycle ---------------------------------------------------------------------

    def run(self) -> None:
        self.log.info("Starting mirror maker thread %s", self.name)
        try:
            parts = self._mode.build(self)
            if parts is None:
                return  # a stop came during the set-up
            self.attach(parts)
            waiting.register(self.keep_alive)
            self._loop()
        except MirrorFailure as exc:
            self._state.fail(exc)
        except KafkaException as exc:
            self._state.fail(ClientFailed(f"{self.name}: {exc.args[0].str()}"))
        except Exception as exc:  # anything unexpected stops the mirror, as in Kafka
            self.log.debug("stream failure", exc_info=True)
            self._state.fail(ClientFailed(f"{self.name} failed: {type(exc).__name__}: {exc}"))
        finally:
            self._finish()

    def attach(self, parts) -> None:
        """The stream's parts, and its checkpoint over their sink and committer."""
        committer, interval_ms = parts.committer, self._config.offset_commit_interval_ms
        if self.offset_syncs is not None:
            committer = SyncingCommitter(committer, self.offset_syncs)
            interval_ms = min(interval_ms, self.offset_syncs.interval_ms)
        self._checkpoint = Checkpoint(parts.sink, committer, self._state, interval_ms,
                                      metrics=self._metrics, owned=self.assigned.__contains__)
        self.parts = parts

    @property
    def checkpoint(self) -> Optional[Checkpoint]:
        return self._checkpoint

    def acknowledged(self) -> int:
        """Records this stream's own producers had acknowledged (the shared one counts its own)."""
        return self.parts.sink.acknowledged() if self.parts is not None else 0

    def delivered(self) -> int:
        """Records this stream's own producers had delivered, in a committed transaction or not."""
        return self.parts.sink.delivered() if self.parts is not None else 0

    def waiting(self) -> int:
        """Records this stream's own producers hold for the target (the shared one counts its own)."""
        return self.parts.sink.waiting() if self.parts is not None else 0

    def _finish(self) -> None:
        parts = self.parts
        try:
            if self._checkpoint is not None:
                if self._state.failed:
                    self.log.info("Exiting on send failure, skip committing offsets.")
                else:
                    self.log.info("Flushing producer and committing consumer offsets.")
                    self.commit(deadline=self._state.deadline)
        except MirrorFailure as exc:
            self._state.fail(exc)
        except Exception as exc:
            self.log.debug("final commit failed", exc_info=True)
            self.log.warning("final commit failed: %s", exc)
        finally:
            waiting.register(None)  # closing: the group is left, nothing to keep
            if parts is not None:
                parts.close(self._state.deadline)
            self.log.info("Mirror maker thread stopped")

    # -- the loop ----------------------------------------------------------------------

    def _loop(self) -> None:
        parts, checkpoint, state = self.parts, self._checkpoint, self._state
        bounded = self._config.exit_when_caught_up
        batch_size = self._config.batch_size
        while not state.stopping:
            self.last_progress = time.monotonic()
            if not parts.membership.follow():
                state.wait(POLL_TIMEOUT_S)
                continue
            read = parts.source.read()
            parts.sink.serve()
            # A bounded run's last batch may be short: look at the lag now, so that a commit that
            # makes its records visible happens in this round, not after the timer.
            if self.last_progress >= self._next_lag_update or (bounded and read < batch_size):
                self._next_lag_update = self.last_progress + LAG_UPDATE_S
                self.update_lag()
            if (checkpoint.due() or self._commit_now or parts.sink.needs_commit()
                    or parts.sink.joins_commit()) and not state.stopping:
                self._commit_now = False
                self.commit()

    def keep_alive(self) -> None:
        """While a wait for the target blocks the loop (``clients.waiting``): keep the stream's
        place in the source group, once the loop has not polled for a quarter of
        max.poll.interval.ms (at most KEEP_ALIVE_MAX_S). The source pauses its partitions (nothing
        is read meanwhile; reading goes on where it stopped) and serves the group; a rebalance it
        serves is handled as in the loop (a revoke flushes and commits first). Static shards
        (exactly-once) are in no group: nothing to keep."""
        now = time.monotonic()
        if (self._keeping_alive or self._in_rebalance or self.parts is None or self._state.stopping
                or now - self.last_progress < self._keep_alive_s or not self.parts.membership.in_group):
            return
        self._keeping_alive = True
        try:
            self.parts.source.keep_alive()
            self.last_progress = time.monotonic()
        finally:
            self._keeping_alive = False

    def commit(self, partitions: Optional[List[TopicPartition]] = None, deadline: Optional[float] = None) -> bool:
        """Flush, then commit (``Checkpoint``); a commit the committer rolled back (an aborted
        transaction) sends the stream back to the last committed offsets."""
        try:
            return self._checkpoint.commit(partitions, deadline)
        except TransactionAborted as aborted:
            self._rolled_back(aborted)
            self._checkpoint.restart_timer()  # a new producer's start may have taken longer than the interval
            return False

    def _rolled_back(self, aborted: TransactionAborted) -> None:
        """Nothing since the last commit reached the target: read it again from there. A refused
        record behind it makes the sink send one record at a time, so that the refused one is
        known by its source offset: it stops the mirror (abort on send failure), or is counted
        and skipped."""
        self.log.warning("Transaction aborted (%s); back to the offsets committed on the target", aborted)
        if self.offset_syncs is not None:
            self.offset_syncs.rolled_back()
        refused = self.parts.sink.rolled_back(aborted)
        if isinstance(aborted, ProducerUnusable) and not self._state.stopping and self.assigned:
            # The last commit's outcome is the target's to say: one that was not confirmed (or
            # whose next transaction could not begin) may have gone through, and the new
            # producer's start has settled it.
            self._checkpoint.committed.update(self.parts.starts.committed(sorted(self.assigned)))
        self.rewind()
        if refused:
            self.parts.sink.track()

    def rewind(self) -> None:
        """Every assigned partition back to its last committed offset (where it started, before
        its first commit): a rewind never goes through auto.offset.reset."""
        self._checkpoint.pending.clear()
        positions = {tp: self._checkpoint.committed[tp] for tp in self.assigned if tp in self._checkpoint.committed}
        self.parts.source.rewind(positions)
        self.positions.update(positions)

    # -- what the source hands over ----------------------------------------------------

    def record(self, runs: List, advance: bool = True) -> None:
        """Once per run of records handed to the sink: the pending offset (only for a partition
        this stream still owns: a record of a partition revoked meanwhile must not move its
        offset), the offset syncs, the counts, bytes and ages (from the run's first and last
        record; timestamps grow along a partition). ``advance`` False: the source moves the
        pending offset itself (raw mode's record path, at the end of a range)."""
        pending, assigned, syncs = self._checkpoint.pending, self.assigned, self.offset_syncs
        for topic, partition, first, last, count, nbytes, written in runs:
            tp = TopicPartition(topic, partition)
            if tp in assigned:
                # Not back behind a reset the same batch reported after these records (librdkafka
                # queues it behind the records of the fetch before): that offset is gone.
                if advance and last.offset() + 1 > self.positions.get(tp, -1):
                    pending[tp] = self.positions[tp] = last.offset() + 1
                if syncs is not None and written:  # records the target does not hold get no sync
                    syncs.record(tp, first.offset(), last.offset(), written, exact=written == count)
            self._metrics.consumed_run(tp, count, nbytes, first.timestamp()[1], last.timestamp()[1])

    def advance(self, tp: TopicPartition, next_offset: int) -> None:
        """Everything of ``tp`` before ``next_offset`` was handed over (or holds nothing to mirror)."""
        if tp in self.assigned:
            self._checkpoint.pending[tp] = self.positions[tp] = next_offset

    def consume_error(self, msg) -> None:
        """A consumer error the source met: a position to reset, a refused permission or a fatal
        error stop here; anything else librdkafka retries by itself."""
        err = msg.error()
        code = err.code()
        if code == KafkaError._PARTITION_EOF:
            return
        if code == KafkaError._AUTO_OFFSET_RESET and msg.topic() is not None:
            self.out_of_range(TopicPartition(msg.topic(), msg.partition()), msg.offset())
            return
        if code in AUTHORIZATION_CODES and self._shared.errors is not None:
            raise self._shared.errors.not_authorized(err, topic=msg.topic(), group=self._config.group_id)
        if err.fatal():
            raise ClientFailed(f"{self.name}: fatal consumer error: {err.str()}")
        self.log.warning("Consumer error (librdkafka retries it): %s", err.str())

    def out_of_range(self, tp: TopicPartition, position: Optional[int]) -> None:
        """The source does not hold ``position`` of ``tp`` (or librdkafka found no offset to start
        from: a negative offset, which a confluent Message gives as None): go on where
        auto.offset.reset says, make that position durable at once, and count what was lost
        (``positions``)."""
        if tp not in self.assigned:
            return
        if position is None or position < 0:
            starts, _ = self.parts.starts.resolve([tp])
            if tp not in starts:
                # Still unknown. librdkafka stopped fetching it (fetch state NONE) and reports it
                # no more: assigned again at INVALID, it reads the committed offset and reports again.
                self.parts.membership.restart({tp: OFFSET_INVALID})
                return
            new = starts[tp]
        else:
            new = self.parts.starts.reset(tp, position)
        self.parts.source.restart(tp, new)
        self.positions[tp] = new
        self._checkpoint.pending[tp] = new  # the records before it are gone: nothing left to mirror there
        self._checkpoint.committed.setdefault(tp, new)
        self._commit_now = True

    # -- partitions coming and going (called by the membership) --------------------------

    def partitions_assigned(self, tps: List[TopicPartition], assign: Callable[[Dict[TopicPartition, int]], None]) -> None:
        """New partitions: where each starts (``positions``), then ``assign`` makes the consumer
        fetch them from there, then the source takes them over and the user's listener hears it."""
        with self._rebalancing():
            self._partitions_assigned(tps, assign)

    def _partitions_assigned(self, tps, assign) -> None:
        self.assigned.update(tps)
        self.rebalanced = True
        self._metrics.rebalanced("assigned")
        self.log.info("Assigned %s", describe(tps))
        if not tps:
            assign({})
        elif self._state.stopping:
            # Served by the consumer's close after a stop: nothing more is mirrored, so no target
            # topic check or offset lookup, each of which waits for a cluster that may be away.
            assign({})
        else:
            self.prepare_targets(tps)
            # Resolving may fence a partition's last writer, whose abort marker then takes a target offset.
            starts, at_the_end = self.parts.starts.resolve(tps)
            if self.offset_syncs is not None:  # where their next records will land, before any goes out
                self.offset_syncs.assigned(tps)
            assign(starts)
            self.started(starts, at_the_end)
            self.parts.source.assigned(starts, tps)
        self._call_listener("on_partitions_assigned", tps)

    def started(self, starts: Dict[TopicPartition, int], at_the_end) -> None:
        """Partitions start at these positions (resolved at their assignment, or later by a source
        that could not read them then): where a rewind goes back to."""
        self.positions.update(starts)
        self._checkpoint.started(starts)
        if at_the_end:  # durable at once: a restart must not resolve them again, past what arrived
            self._checkpoint.pending.update({tp: starts[tp] for tp in at_the_end})
            self._commit_now = True

    def partitions_revoked(self, tps: List[TopicPartition]) -> None:
        """Partitions taken away in an orderly way: flush and commit them first (bounded), so
        that their next owner starts after what this stream mirrored."""
        with self._rebalancing():
            self._partitions_revoked(tps)

    def _partitions_revoked(self, tps: List[TopicPartition]) -> None:
        self.log.info("Revoked %s", describe(tps))
        if self._state.failed:
            self.log.info("Exiting on send failure, skip committing offsets.")
        elif not self.commit(tps, deadline=self._revoke_deadline()):
            self.log.warning("The revoked partitions' records were not all acknowledged in time; their offsets "
                             "are not committed, so their next owner mirrors them again")
        self._forget(tps)
        self._metrics.rebalanced("revoked")
        self._call_listener("on_partitions_revoked", tps)

    @contextlib.contextmanager
    def _rebalancing(self):
        """While a rebalance is handled (in a consumer callback, served by a consume call), a wait
        for the target must not serve the group itself: a consume call inside a consumer callback
        aborts the process in confluent-kafka (CallState_get: Assertion `cs != NULL')."""
        self._in_rebalance += 1
        try:
            yield
        finally:
            self._in_rebalance -= 1

    def partitions_lost(self, tps: List[TopicPartition]) -> None:
        with self._rebalancing():
            self._partitions_lost(tps)

    def _partitions_lost(self, tps: List[TopicPartition]) -> None:
        self.log.warning("Lost %s; their uncommitted offsets are discarded", describe(tps))
        self._forget(tps)
        self._metrics.rebalanced("lost")
        self._call_listener("on_partitions_lost", tps)

    def _forget(self, tps: List[TopicPartition]) -> None:
        if self.offset_syncs is not None:
            self.offset_syncs.forget(tps)
        self._checkpoint.discard(tps)
        self.assigned.difference_update(tps)
        self.at_end.difference_update(tps)
        for tp in tps:
            self.positions.pop(tp, None)
        self._metrics.forget_lag(tps)
        self.parts.source.forget(tps)

    def _revoke_deadline(self) -> float:
        """The flush on revoke holds up the whole group's rebalance: bound it by a share of
        max.poll.interval.ms (and by the stop's deadline when stopping)."""
        return self.within_stop(self._config.max_poll_interval_s * REVOKE_SHARE_OF_POLL_INTERVAL)

    def within_stop(self, seconds: float) -> float:
        """The deadline ``seconds`` from now, or the stop's deadline if that comes first."""
        bound = time.monotonic() + seconds
        stop = self._state.deadline
        return bound if stop is None else min(bound, stop)

    def prepare_targets(self, tps: List[TopicPartition]) -> None:
        """The target topics of these partitions exist (created with the source's partitions)."""
        wanted = {tp.topic: self.targets_of(tp.topic) for tp in tps}
        self._shared.target_topics.ensure(wanted)
        # A new source partition (the group sees it at its metadata refresh, whatever the topic
        # sync's interval) needs its target partition before its first record is sent there.
        keeps = "--use.raw.bytes" if self.parts.source.keeps_partitions else (
            "the message handler" if getattr(self._shared.handler, "keep_partition", False) else None)
        if keeps is not None:
            options = self._config.replication
            self._shared.target_topics.require_partitions(
                wanted, grow=options.refresh_topics or options.mirror_maker_2_creation, why=keeps)

    def targets_of(self, source_topic: str) -> List[str]:
        """The target topics of a source topic: the handler's names, as the policy names them."""
        target_topics = getattr(self._shared.handler, "target_topics", lambda topic: [topic])
        remote = self._shared.target_topics.remote
        return [remote(topic) for topic in target_topics(source_topic)]

    def target_of(self, source_topic: str) -> str:
        """The one target topic of a source topic (where exactly-once keeps its offsets)."""
        targets = self.targets_of(source_topic)
        if len(targets) != 1:
            raise ClientFailed(f"--exactly.once needs one target topic per source topic, and the message handler "
                               f"names {len(targets)} for {source_topic}: {', '.join(targets) or 'none'}")
        return targets[0]

    def _call_listener(self, method: str, tps: List[TopicPartition]) -> None:
        callback = getattr(self._shared.listener, method, None)
        if callback is None:
            return
        try:
            callback(tps)
        except Exception as exc:
            self.log.debug("listener failure", exc_info=True)
            raise ListenerFailed(f"rebalance listener {method} raised: {type(exc).__name__}: {exc}") from None

    # -- how far behind ------------------------------------------------------------------

    def update_lag(self) -> None:
        """Lag per assigned partition: the partition's end (the last stable offset under
        read_committed) minus the stream's position. A partition with lag 0 is "at its end" for
        ``--exit.when.caught.up``, where a commit makes records visible (a transaction) only once
        its records are committed, and never while records go one by one after a refusal. Only
        this thread may call it (confluent-kafka holds the GIL in its position calls)."""
        if not self.assigned or self.parts is None:
            return
        read_to_end = set()
        visible_on_commit = self.parts.committer.makes_visible
        committed = self._checkpoint.committed
        for tp, (position, end) in self.parts.source.ends(list(self.assigned), self.positions).items():
            known = self.positions.get(tp)
            if position is None or (known is not None and known > position):
                position = known
            if end is None or position is None or end < 0 or position < 0:
                continue
            if position >= end:
                read_to_end.add(tp)
            # Where a commit makes records visible, what is read but not committed is not mirrored yet.
            behind = committed.get(tp, position) if visible_on_commit else position
            self._metrics.set_lag(tp, max(0, end - behind))
        pending = self._checkpoint.pending
        if visible_on_commit:
            if self._config.exit_when_caught_up and self.assigned <= read_to_end and pending:
                self._commit_now = True  # every partition was read to its end: commit without waiting
            read_to_end = {tp for tp in read_to_end if tp not in pending}
        if self.parts.sink.tracking:
            read_to_end = set()
        self.at_end.intersection_update(read_to_end)
        self.at_end.update(read_to_end)
