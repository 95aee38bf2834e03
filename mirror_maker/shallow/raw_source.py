"""Raw mode's source (``--use.raw.bytes``): whole batches from source partitions to the same
partitions of the target, in the one stream loop.

The stream's confluent consumer keeps the group and the commits exactly as in record mode, but
every partition it is assigned is paused right away: the raw fetcher reads them. Batches go to
the raw producer; a partition's pending offset is the offset after the last batch handed over,
committed only after the target acknowledged everything before it (a commit flushes the raw
producer first).

What raw mode cannot forward as it is (a position inside a batch, magic 0/1, a compacted batch
with offset holes, LogAppendTime, a batch larger than the target takes) goes through the record
path for that range (such batches in a row are one range): the raw producer is drained for the
partition first, then the consumer reads the range (librdkafka decompresses and filters it) and
the copier sends it to the same partition through the shared record producer; the consumer reads
on while the next fetch answer is a range again, and the record producer is flushed before the raw
path sends on that partition again (and before every commit). Order is kept. A range is done only
when positively so: a record at or past its last offset arrived, or as many records as its batches
hold (their record counts survive compaction); never because nothing came for a while, which is
also what a leader move looks like.
"""

from __future__ import annotations

import bisect
import time
from typing import Dict, List, Optional, Tuple

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from ..clients.polling import poll
from ..errors import HandlerFailed, MirrorFailure
from ..records import RawBatch, TopicPartition
from .fetcher import BUFFER_BATCHES, FETCH_WAIT_MS, SMALL_BATCHES, RawFetcher, Work

#: How long the record path may wait for its range before trying again later.
RECORD_PATH_TIMEOUT_S = 30.0
#: How long the record path waits for the partition's next fetch answer before it pauses.
NEXT_RANGE_WAIT_S = 0.2
#: How long the record path reads on from range to range before the loop has its turn again
#: (commits, the group, the other partitions).
RECORD_PATH_SLICE_S = 0.5
#: How often a partition whose start could not be read is tried again.
UNRESOLVED_RETRY_S = 1.0


class RawSink:
    """What a raw stream's commit flushes: its raw producer, then the record producer its
    record path uses (shared by every stream, as record mode's sink)."""

    tracking = False

    def __init__(self, raw, records) -> None:
        self.raw, self._records = raw, records

    def flush(self, deadline=None) -> bool:
        return self.raw.flush(deadline) and self._records.flush(deadline, for_commit=True)

    def serve(self) -> None:
        self.raw.pump()
        self._records.serve()

    def acknowledged(self) -> int:
        return self.raw.acked_records

    def delivered(self) -> int:
        return self.raw.acked_records

    def waiting(self) -> int:
        return self.raw.unacknowledged_records()

    def needs_commit(self) -> bool:
        return False

    def joins_commit(self) -> bool:
        """Another stream's commit waits for the shared record producer to empty: join it."""
        return self._records.commit_flush_waiting()

    def rolled_back(self, aborted) -> List[str]:
        return []

    def track(self) -> None:
        pass

    def close(self, deadline) -> None:
        pass  # the raw producer's connections close with the stream's selector; the record producer is shared


class RawSource:
    keeps_partitions = True

    def __init__(self, stream, consumer, membership, copier, fetcher: RawFetcher, raw, net, state, metrics,
                 handler, remote, targets_of, max_message_bytes: Dict[str, int], sync_send: bool) -> None:
        self._stream = stream
        self._consumer = consumer
        self._membership = membership
        self._copier = copier
        self._fetcher = fetcher
        self._raw = raw
        self._net = net
        self._state = state
        self._metrics = metrics
        self._handler = handler
        self._remote = remote
        self._targets_of = targets_of
        self._max_message_bytes = max_message_bytes
        self._records = copier.producer
        self._sync = sync_send
        #: Partitions whose record path records may not be acknowledged yet (``_records_acknowledged``).
        self._records_in_flight: set = set()
        #: Source topic -> the target topics the raw handler names for it (as the policy names them).
        self._declared: Dict[str, frozenset] = {}
        #: Assigned partitions whose start could not be read yet, and when to try again.
        self._unresolved: set = set()
        self._next_resolve = 0.0
        #: The partition the record path reads, and whether a wait for the target paused it.
        self._reading: Optional[TopicPartition] = None
        self._reading_paused = False

    # -- the loop's round ------------------------------------------------------------------

    def read(self) -> int:
        self._serve_group()
        self._resolve_starts()
        while self._fetcher.out_of_range:
            tp, position = self._fetcher.out_of_range.popitem()
            self._stream.out_of_range(tp, position)
        self._fetcher.fetch(self._raw.queued_bytes, self._raw.pending())
        # Fetched batches wait only for room in the producer's queue: while it is full, the poll
        # waits for the target's answers (it returns at the first) instead of spinning.
        busy = self._raw.queued_batches < BUFFER_BATCHES and any(self._fetcher.work.values())
        self._net.poll(timeout_ms=0 if busy else FETCH_WAIT_MS)
        return self._hand_over()  # sent by the sink's serve, next in the round

    def keep_alive(self) -> None:
        """Serve the group while the loop waits for the target: every partition is paused already,
        but the one the record path reads (paused too until its next read)."""
        if self._reading is not None and not self._reading_paused:
            self._reading_paused = True
            self._consumer.pause([KafkaTopicPartition(self._reading.topic, self._reading.partition)])
        self._serve_group()

    def _serve_group(self) -> None:
        """Keep the group (rebalance callbacks, heartbeats): every partition is paused, so the
        consumer returns nothing but what it had fetched before a pause (dropped: the raw
        fetcher reads it again) and errors."""
        for msg in self._consumer.consume(1000, 0):
            if msg.error() is not None and msg.error().code() != KafkaError._AUTO_OFFSET_RESET:
                self._stream.consume_error(msg)  # a reset here is an old range's: the raw fetcher has its own

    def _hand_over(self) -> int:
        """Hand what was fetched to the raw producer (or the record path), partition by partition,
        while the producer holds fewer than BUFFER_BATCHES batches for the target: one fetch
        answer can hold thousands of small batches, and what is not handed over waits in the
        fetcher (which fetches a partition again only once its queue is empty)."""
        handed = 0
        raw = self._raw
        for tp, queue in list(self._fetcher.work.items()):
            while queue and not self._state.failed:
                if raw.queued_batches >= BUFFER_BATCHES:
                    return handed
                item = queue[0]
                if item.records:
                    handed += self._record_path(tp, item)
                    break  # the fetcher starts again after the range the record path took
                if item.batch is not None and not self._records_acknowledged(tp):
                    break  # the record path's records go first
                if self._fetcher.work.get(tp) is not queue or not queue or queue[0] is not item:
                    break  # that wait served a revoke: the partition's queue is gone
                queue.popleft()
                self._fetcher.taken(item)
                if item.batch is not None:
                    self._forward(tp, item)
                    handed += item.batch.record_count
                self._stream.advance(tp, item.last + 1)
        return handed

    def _forward(self, tp: TopicPartition, item: Work) -> None:
        batch = item.batch
        described = batch.describe(tp.topic, tp.partition)
        target = self._handled(described)
        self._metrics.consumed_run(tp, batch.record_count, batch.size, batch.base_timestamp, batch.max_timestamp)
        if target is None:
            self._metrics.filtered(batch.record_count)
            return
        self._raw.send(target, tp.partition, batch, tp)
        if self._stream.offset_syncs is not None:  # a batch takes as many target offsets as it has records
            self._stream.offset_syncs.record(tp, batch.base_offset, batch.last_offset, batch.record_count)

    def _handled(self, described: RawBatch) -> Optional[str]:
        """The target topic the raw handler gives a batch (as the replication policy names it),
        or None: dropped."""
        try:
            target = self._handler.handle_batch(described)
        except MirrorFailure:
            raise
        except Exception as exc:
            raise HandlerFailed(f"message handler raised on the batch of {described.topic}-{described.partition} "
                                f"offsets {described.base_offset}..{described.last_offset}: "
                                f"{type(exc).__name__}: {exc}") from None
        if target is None:
            return None
        remote = self._remote(target)
        declared = self._declared.get(described.topic)
        if declared is None:
            declared = self._declared[described.topic] = frozenset(self._targets_of(described.topic))
        if remote not in declared:
            # Only the topics it names are created (the source's partitions) and their limits read:
            # a batch sent elsewhere waited for that topic, unnamed, for ever.
            raise HandlerFailed(f"message handler sent the batch of {described.topic}-{described.partition} "
                                f"offsets {described.base_offset}..{described.last_offset} to {target}, a topic "
                                f"its target_topics({described.topic!r}) does not name: name it there")
        return remote

    # -- the record path ---------------------------------------------------------------

    def _record_path(self, tp: TopicPartition, item: Work) -> int:
        """Mirror offsets ``item.first``..``item.last`` through the consumer and the record
        producer, in order with the raw path (see the module docstring); the raw path goes on
        from the batch after the range once the record producer's records are acknowledged
        (``_records_acknowledged``: not after each range, so that ranges in a row stream). While
        the next fetch answer begins with a range again (a compacted or LogAppendTime topic),
        the consumer reads on without a pause, seek and fresh fetch between them, for up to
        RECORD_PATH_SLICE_S. The raw handler decides for each batch of a range as for a batch
        the raw path forwards (``_routes``). Returns the records handed over."""
        consumer, started, handed = self._consumer, False, 0
        ahead: List = []  # messages the consumer returned past a range: the next range's
        slice_end = time.monotonic() + RECORD_PATH_SLICE_S
        owned = self._owner(tp)
        try:
            while item is not None:
                routes = self._routes(item)
                targets = sorted({(target, tp.partition) for _last, target in routes if target is not None})
                if not self._raw.flush(time.monotonic() + RECORD_PATH_TIMEOUT_S, partitions=targets):
                    return handed  # stopping, failed or the target away: the next round tries again
                if not owned():
                    return handed  # the wait served a revoke: the partition starts again elsewhere
                if not started:
                    started = True
                    self._start_reading(tp, item.read_from)
                    self._reading = tp
                done, count, ahead, after = self._read_range(tp, item, routes,
                                                             time.monotonic() + RECORD_PATH_TIMEOUT_S, ahead, owned)
                handed += count
                if done is None or not owned():
                    return handed  # reset (the stream moved the raw fetcher on already), or revoked
                if not done:
                    self._unfinished(tp, item, after)
                    return handed
                self._range_done(tp, item)
                item = self._next_range(tp, item.last) if time.monotonic() < slice_end else None
        finally:
            if started:
                consumer.pause([KafkaTopicPartition(tp.topic, tp.partition)])
            self._reading, self._reading_paused = None, False
        return handed

    def _owner(self, tp: TopicPartition):
        """Whether the stream still owns ``tp`` as it does now: not revoked or lost since, even if
        assigned back (its start is then the group's offset again, and what the record path
        handed over before belongs to no pending offset)."""
        stream, checkpoint = self._stream, self._stream.checkpoint
        discards = checkpoint.discards(tp)
        return lambda: tp in stream.assigned and checkpoint.discards(tp) == discards

    def _unfinished(self, tp: TopicPartition, item: Work, after: int) -> None:
        """A range the record path did not finish (its timeout, a stop, a failure): what it
        handed to the record producer stays done (committed after a flush, as every record path
        record), and the rest of the range is fetched again later; a long range on a slow target
        then moves on at every attempt instead of starting over."""
        if self._state.failed:
            return  # (after a failure nothing more is committed anyway)
        if after > item.first:
            self._stream.advance(tp, after)
        if not self._state.stopping:
            self._fetcher.refetch(tp, max(after, item.first))

    def _start_reading(self, tp: TopicPartition, offset: int) -> None:
        """Resume the partition in the consumer at ``offset``; librdkafka refuses a seek on a
        partition it stopped after a reset, which a new assignment starts again."""
        start = KafkaTopicPartition(tp.topic, tp.partition, offset)
        self._consumer.resume([start])
        try:
            self._consumer.seek(start)
        except KafkaException:
            self._membership.restart({tp: offset})
            self._pause_all_but(tp)
        self._wake_consumer_fetcher(start)
        self._records_in_flight.add(tp)

    def _pause_all_but(self, tp: TopicPartition) -> None:
        others = [KafkaTopicPartition(o.topic, o.partition) for o in self._stream.assigned if o != tp]
        if others:
            self._consumer.pause(others)

    def _routes(self, item: Work) -> List[Tuple[int, Optional[str]]]:
        """Where the records of a range go, batch by batch as the raw handler decides (KIP-712:
        per batch, never per record; None drops the batch): (a batch's last offset, its target
        topic), batches in a row with the same target as one."""
        routes: List[Tuple[int, Optional[str]]] = []
        for described in item.described:
            target = self._handled(described)
            if routes and routes[-1][1] == target:
                routes[-1] = (described.last_offset, target)
            else:
                routes.append((described.last_offset, target))
        return routes

    def _range_done(self, tp: TopicPartition, item: Work) -> None:
        self._metrics.raw_fallback(item.reason, item.batches)
        self._stream.log.debug("record path took %s-%d offsets %d..%d (%s, %d batches)", tp.topic, tp.partition,
                               item.first, item.last, item.reason, item.batches)
        self._stream.advance(tp, item.last + 1)  # committed after a flush of both producers
        queue = self._fetcher.work.get(tp)
        if queue and queue[0] is item:
            self._fetcher.taken(queue.popleft())  # what was fetched after the range follows it as it is
        else:
            self._fetcher.seek(tp, item.last + 1)

    def _next_range(self, tp: TopicPartition, after: int) -> Optional[Work]:
        """The range the record path takes next without pausing: the partition's next work, fetched
        now if none is queued, when it is a range (else None: the loop goes on)."""
        queue, fetcher = self._fetcher.work.get(tp), self._fetcher
        until = time.monotonic() + NEXT_RANGE_WAIT_S
        while (not queue and fetcher.ends.get(tp, 0) > after + 1  # else at the partition's end
               and tp in self._stream.assigned and not self._state.stopping and time.monotonic() < until):
            fetcher.fetch(self._raw.queued_bytes, self._raw.pending())
            self._net.poll(timeout_ms=10)
            queue = fetcher.work.get(tp)
        if queue and queue[0].records and queue[0].first > after:
            return queue[0]
        return None

    def _read_range(self, tp: TopicPartition, item: Work, routes: List[Tuple[int, Optional[str]]],
                    deadline: float, ahead: List, owned) -> Tuple[Optional[bool], int, List, int]:
        """Hand the range's records to the copier as the consumer returns them, ``ahead`` first,
        each to its batch's target (``routes``), while the stream ``owned`` the partition: whether
        the range is done (None: its records are gone, and the stream reset the partition), the
        records handed over, the messages returned past the range, and the offset after the last
        record handed over (``item.first`` when none was). Records before ``item.first`` (a start
        inside a batch) are counted, not mirrored; a record returned again is counted once (a
        range done by its count must have seen that many records)."""
        consumer, state, stream = self._consumer, self._state, self._stream
        lasts = [last for last, _target in routes]
        targets = [target for _last, target in routes]

        def route(offset: int) -> Optional[str]:
            return targets[min(bisect.bisect_left(lasts, offset), len(targets) - 1)]

        seen = handed = 0
        after, floor = item.first, item.read_from
        #: A backlog's offsets follow each other (``fetcher._backlog_ranges``): the offset its next
        #: record must have; a record past it means the consumer skipped some, never "done".
        expect = item.first if item.reason == SMALL_BATCHES else None
        while owned() and not state.stopping and time.monotonic() < deadline:
            if self._reading_paused:  # a wait for the target paused it: on from where it was
                self._reading_paused = False
                consumer.resume([KafkaTopicPartition(tp.topic, tp.partition)])
            messages, ahead = ahead or poll(consumer, 500, 0.05), []
            mine, past, gap = [], [], False
            for index, msg in enumerate(messages):
                if msg.error() is not None:
                    if msg.error().code() == KafkaError._AUTO_OFFSET_RESET:
                        if msg.topic() == tp.topic and msg.partition() == tp.partition:
                            stream.out_of_range(tp, msg.offset())
                            return None, handed, [], after
                        continue  # another partition's is stale, as in _serve_group: the raw fetcher has its own
                    stream.consume_error(msg)
                    continue
                if msg.partition() != tp.partition or msg.topic() != tp.topic or msg.offset() < floor:
                    continue  # another partition's, or before the range, or returned again
                if expect is not None and msg.offset() != expect and expect <= item.last:
                    gap = True
                    break
                if msg.offset() > item.last:
                    past = messages[index:]  # what follows is the raw path's, from the batch after the range
                    break
                seen += 1
                floor = msg.offset() + 1
                if msg.offset() >= item.first:
                    mine.append(msg)
                    if expect is not None:
                        expect += 1
            runs = self._copier.copy(mine, route=route)
            stream.record(runs, advance=False)
            copied = sum(run[4] for run in runs)
            handed += copied
            if runs:
                after = runs[-1][3].offset() + 1
            if copied < len(mine) or state.failure is not None:
                return False, handed, [], after  # a stop or a failure ended the copy: the range is not done
            if gap:
                stream.log.warning("The consumer skipped from %s-%d offset %d to %d in a range with no gaps; "
                                   "reading it again from %d", tp.topic, tp.partition, expect, msg.offset(), after)
                return False, handed, [], after
            if past or (mine and mine[-1].offset() == item.last) or (item.expected is not None
                                                                      and seen >= item.expected):
                return True, handed, past, after
        return False, handed, [], after

    def _records_acknowledged(self, tp: TopicPartition) -> bool:
        """Whether the raw path may send for ``tp``: the record producer's records before it are
        acknowledged (flushed now where the record path sent some; a flush that does not end in
        time leaves the batch for the next round)."""
        if tp not in self._records_in_flight:
            return True
        if not self._records.flush(time.monotonic() + RECORD_PATH_TIMEOUT_S):
            return False
        self._records_in_flight.clear()  # the flush covered every partition's
        return True

    def _wake_consumer_fetcher(self, start: KafkaTopicPartition) -> None:
        """librdkafka's broker thread sees a resumed partition only when it next wakes, up to a
        second later while every partition was paused; a request to the partition's leader
        wakes it now."""
        try:
            self._consumer.get_watermark_offsets(start, timeout=1, cached=False)
        except KafkaException:
            pass  # only a wake-up: the fetch then starts at the broker thread's next turn

    # -- partitions ----------------------------------------------------------------------

    def assigned(self, starts: Dict[TopicPartition, int], tps: List[TopicPartition]) -> None:
        """Pause the newly assigned partitions in the consumer and fetch them raw from their
        starts (a start not known yet is read again every second)."""
        self._consumer.pause([KafkaTopicPartition(tp.topic, tp.partition) for tp in tps])
        for topic in {tp.topic for tp in tps}:
            # A batch goes as it is only where every target topic the handler names takes it.
            limits = [limit for target in self._targets_of(topic)
                      for limit in [self._max_message_bytes.get(target)] if limit]
            if limits:
                self._fetcher.max_batch_bytes[topic] = min(limits)
        for tp in tps:
            if tp in starts:
                self._fetcher.assign(tp, starts[tp])
            else:
                self._unresolved.add(tp)

    def _resolve_starts(self) -> None:
        if not self._unresolved or time.monotonic() < self._next_resolve:
            return
        self._next_resolve = time.monotonic() + UNRESOLVED_RETRY_S
        tps = sorted(tp for tp in self._unresolved if tp in self._stream.assigned)
        self._unresolved.clear()
        starts, at_the_end = self._stream.parts.starts.resolve(tps)
        for tp in tps:
            if tp in starts:
                self._fetcher.assign(tp, starts[tp])
            else:
                self._unresolved.add(tp)
        self._stream.started(starts, at_the_end)

    def forget(self, tps: List[TopicPartition]) -> None:
        for tp in tps:
            self._unresolved.discard(tp)
            self._fetcher.forget(tp)
            self._raw.drop_source(tp)

    def rewind(self, positions: Dict[TopicPartition, int]) -> None:
        for tp, offset in positions.items():
            self._raw.drop_source(tp)
            self._fetcher.refetch(tp, offset)

    def restart(self, tp: TopicPartition, position: int) -> None:
        """Read ``tp`` from ``position`` (after a reset): the raw fetcher, and the consumer in case
        librdkafka stopped the partition while its record path read it."""
        self._fetcher.refetch(tp, position)
        self._fetcher.assign(tp, position)
        self._membership.restart({tp: position})
        self._pause_all_but(None)
        self._consumer.pause([KafkaTopicPartition(tp.topic, tp.partition)])

    def ends(self, tps: List[TopicPartition], known: Dict[TopicPartition, int]):
        """Where the raw fetcher stands, once nothing of the partition waits to be handed over,
        and the end its fetches carried (the last stable offset under read_committed)."""
        fetcher = self._fetcher
        return {tp: (None if fetcher.work.get(tp) else fetcher.positions.get(tp), fetcher.ends.get(tp))
                for tp in tps}

    def close(self) -> None:
        pass  # the connections close with the stream's parts (``Parts.extras``)

