"""One raw mirror stream (``--use.raw.bytes``): whole batches from source partitions to the same
partitions of the target, with record mode's group membership and commit rules.

The stream's confluent consumer keeps the group and the commits exactly as a record mirror
thread does (the same group.id, the internal and the user's rebalance listener, flush-then-commit,
a commit on revoke), but every partition it is assigned is paused right away: the raw fetcher
reads them. Batches go to the raw producer; the pending offset of a partition is the next
offset after the last batch handed over, committed only after the target acknowledged everything
before it (the commit flushes the raw producer first).

What raw mode cannot forward as it is (a position inside a batch, magic 0/1, a compacted batch
with offset holes, LogAppendTime, a batch larger than the target takes) goes through the record
path for that range (such batches in a row are one range): the raw producer is drained for the
partition first, then the consumer reads the range (librdkafka decompresses and filters it) and
the shared record producer sends it to the same partition; the consumer reads on while the next
fetch answer is a range again, and the record producer is flushed before the raw path sends on
that partition again (and before every commit). Order is kept.
"""

from __future__ import annotations

import time
from typing import Dict, List, Optional, Tuple

from confluent_kafka import KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from ..clients.polling import poll
from ..clients.producer import SendInterrupted
from ..engine.worker import POLL_TIMEOUT_S, MirrorThread
from ..errors import ClientFailed, HandlerFailed, MirrorFailure
from ..records import RawBatch, TopicPartition
from .connections import Cluster, FETCH_MAX_BYTES
from .fetcher import FETCH_WAIT_MS, RawFetcher, Work
from .producer import RawProducer, connections

#: How long the record path may wait for its range before trying again later.
RECORD_PATH_TIMEOUT_S = 30.0
#: Nothing came back for this long and the range reaches the partition's end: it holds nothing.
RECORD_PATH_QUIET_S = 1.0
#: How long the record path waits for the partition's next fetch answer before it pauses.
NEXT_RANGE_WAIT_S = 0.2
#: How long the record path reads on from range to range before the loop has its turn again
#: (commits, the group, the other partitions).
RECORD_PATH_SLICE_S = 0.5


class _Flushes:
    """A commit's flush: the stream's raw producer (once set up), then the record producer the
    fallbacks use."""

    def __init__(self, stream: "RawMirrorThread", records) -> None:
        self._stream, self._records = stream, records

    def flush(self, deadline=None) -> bool:
        raw = self._stream._raw
        return (raw is None or raw.flush(deadline)) and self._records.flush(deadline)


class RawMirrorThread(MirrorThread):
    """A mirror thread whose data path is whole batches (see the module docstring)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # Built in the thread (its network selector and clients, then the producer once it has
        # a producer id).
        self._net = self._source = self._raw = None
        self._target_connections: List[Cluster] = []
        #: Partitions whose record path records may not be acknowledged yet (see _records_acknowledged).
        self._records_in_flight: set = set()
        #: Source topic -> the target topics the raw handler names for it (as the policy names them).
        self._declared: Dict[str, frozenset] = {}

    def run(self) -> None:
        try:
            super().run()
        finally:
            if self._net is not None:
                for cluster in (self._source, *self._target_connections):
                    if cluster is not None:
                        cluster.close()
                self._net.close()

    def _set_up(self) -> None:
        """The raw path's clients and producer id: done while the consumer joins the group in
        the background (kafka-python's import alone takes about 0.15 s)."""
        from kafka.net.selector import NetworkSelector

        self._net = NetworkSelector()
        self._state.on_stop(self._net.wakeup)  # an idle loop waits in poll() up to FETCH_WAIT_MS
        self._source = Cluster(self._net, self._config.consumer, f"{self._config.group_id}-{self.index}-raw",
                               "source", self._state)
        self._target_connections = connections(self._net, self._config.producer, f"producer-raw-{self.index}",
                                               self._state)
        isolation = 0 if self._config.consumer.get("isolation.level", "read_committed") == "read_uncommitted" else 1
        self._fetcher = RawFetcher(self._source, self._state, isolation,
                                   int(self._config.consumer.get("fetch.max.bytes", FETCH_MAX_BYTES)))
        raw = RawProducer(self._target_connections, self._net, self._state, self._config.abort_on_send_failure,
                          self._metrics, self._producer.errors)
        # The topics the group will assign from, and their target topics where they exist. A stop
        # before both clusters answered and gave a producer id leaves the raw path unbuilt.
        if not self._source.connect(self._subscribed_topics, self._producer.serve):
            return
        remotes = [remote for topic in self._subscribed_topics for remote in self._targets_of(topic)]
        for target in self._target_connections:
            if not target.connect(remotes, self._producer.serve):
                return
        if raw.init_producer_id(self._state.deadline):
            self._raw = raw

    def _flushable(self):
        return _Flushes(self, self._producer)

    def _consumer_conf(self):
        conf = super()._consumer_conf()
        # The consumer fetches only for the record path, a range at a time: a long poll at a
        # partition's end (librdkafka's 500 ms) held up the next range's fetch on that broker.
        conf.setdefault("fetch.wait.max.ms", "10")
        return conf

    def acknowledged(self) -> int:
        return self._raw.acked_records if self._raw is not None else 0

    def waiting(self) -> int:
        return self._raw.unacknowledged_records() if self._raw is not None else 0

    # -- the loop ----------------------------------------------------------------------

    def _loop(self) -> None:
        checkpoint = self._checkpoint
        self._maybe_subscribe()  # the group join starts in the background
        try:
            self._set_up()
        except MirrorFailure:
            raise
        except Exception as exc:
            raise ClientFailed(f"{self.name}: cannot start the raw path: {type(exc).__name__}: {exc}") from None
        while not self._state.stopping:
            self.last_progress = time.monotonic()
            if not self._maybe_subscribe():
                self._state.wait(0.2)
                continue
            self._serve_group()
            self._reset_out_of_range()
            self._fetcher.fetch(self._raw.queued_bytes)
            busy = any(self._fetcher.work.values())
            self._net.poll(timeout_ms=0 if busy else FETCH_WAIT_MS)
            self._hand_over()
            self._raw.pump()
            self._producer.serve()
            if checkpoint.due() and not self._state.stopping:
                checkpoint.commit()
            if self.last_progress >= self._next_lag_update:
                self._next_lag_update = self.last_progress + 0.2
                self.update_lag()

    def _serve_group(self) -> None:
        """Keep the group (rebalance callbacks, heartbeats): every partition is paused, so the
        consumer returns nothing but what it had fetched before a pause, which the raw fetcher
        reads again."""
        self._consumer.consume(1000, 0)

    def _hand_over(self) -> None:
        for tp, queue in list(self._fetcher.work.items()):
            while queue and not self._state.failed:
                item = queue[0]
                if item.records:
                    self._record_path(tp, item)
                    break  # the fetcher starts again after the range the record path took
                if item.batch is not None and not self._records_acknowledged(tp):
                    break  # the record path's records go first
                queue.popleft()
                self._fetcher.taken(item)
                if item.batch is not None:
                    self._forward(tp, item)
                if tp in self.assigned:
                    self._checkpoint.pending[tp] = item.last + 1

    def _forward(self, tp: TopicPartition, item: Work) -> None:
        batch = item.batch
        described = batch.describe(tp.topic, tp.partition)
        target = self._handled(described)
        self._metrics.consumed(tp, batch.record_count, batch.size, *_ages([described]))
        if target is None:
            self._metrics.filtered(batch.record_count)
            return
        self._raw.send(target, tp.partition, batch, tp)
        if self.offset_syncs is not None:  # a batch takes as many target offsets as it has records
            self.offset_syncs.record(tp, batch.base_offset, batch.last_offset, batch.record_count)

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
        remote = self._target_topics.remote(target)
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

    def _record_path(self, tp: TopicPartition, item: Work) -> None:
        """Mirror offsets ``item.first``..``item.last`` through the consumer and the record
        producer, in order with the raw path (see the module docstring); the raw path goes on
        from the batch after the range, once the record producer's records are acknowledged
        (``_records_acknowledged``: not after each range, so that ranges in a row stream). While
        the next fetch answer begins with a range again (a compacted or LogAppendTime topic),
        the consumer reads on without a pause, seek and fresh fetch between them, for up to
        RECORD_PATH_SLICE_S. The raw handler decides for each batch of a range as for a batch
        the raw path forwards (``_routes``)."""
        consumer, started = self._consumer, False
        ahead: List = []  # messages the consumer returned past a range: the next range's
        slice_end = time.monotonic() + RECORD_PATH_SLICE_S
        try:
            while item is not None:
                routes = self._routes(item)
                targets = sorted({(target, tp.partition) for _last, target in routes if target is not None})
                if not self._raw.flush(time.monotonic() + RECORD_PATH_TIMEOUT_S, partitions=targets):
                    return  # stopping, failed or the target away: the next round tries again
                if not started:
                    started = True
                    start = KafkaTopicPartition(tp.topic, tp.partition, item.first)
                    consumer.resume([start])
                    consumer.seek(start)
                    self._wake_consumer_fetcher(start)
                    self._records_in_flight.add(tp)
                last_seen, ahead = self._read_range(tp, item, routes, time.monotonic() + RECORD_PATH_TIMEOUT_S,
                                                    ahead)
                if last_seen < item.last or tp not in self.assigned:
                    self._fetcher.refetch(tp, item.first)  # not done: the range again later
                    return
                self._range_done(tp, item)
                item = self._next_range(tp, item.last) if time.monotonic() < slice_end else None
        finally:
            if started:
                consumer.pause([KafkaTopicPartition(tp.topic, tp.partition)])

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
        self._metrics.consumed(tp, 0, 0, *_ages(item.described))  # its records were counted as they went
        self._log.debug("record path took %s-%d offsets %d..%d (%s, %d batches)", tp.topic, tp.partition,
                        item.first, item.last, item.reason, item.batches)
        self._checkpoint.pending[tp] = item.last + 1  # committed after a flush of both producers
        queue = self._fetcher.work.get(tp)
        if queue and queue[0] is item:
            queue.popleft()  # what was fetched after the range follows it as it is
        else:
            self._fetcher.seek(tp, item.last + 1)

    def _next_range(self, tp: TopicPartition, after: int) -> Optional[Work]:
        """The range the record path takes next without pausing: the partition's next work, fetched
        now if none is queued, when it is a range (else None: the loop goes on)."""
        queue, fetcher = self._fetcher.work.get(tp), self._fetcher
        until = time.monotonic() + NEXT_RANGE_WAIT_S
        while (not queue and fetcher.high_watermarks.get(tp, 0) > after + 1  # else at the partition's end
               and tp in self.assigned and not self._state.stopping and time.monotonic() < until):
            fetcher.fetch(self._raw.queued_bytes)
            self._net.poll(timeout_ms=10)
            queue = fetcher.work.get(tp)
        if queue and queue[0].records and queue[0].first > after:
            return queue[0]
        return None

    def _read_range(self, tp: TopicPartition, item: Work, routes: List[Tuple[int, Optional[str]]],
                    deadline: float, ahead: List) -> Tuple[int, List]:
        """Produce the range's records as the consumer returns them, ``ahead`` first, each to its
        batch's target (``routes``; per record only the copy, as in record mode's hot path; counts
        once per poll): the last offset done, and the messages returned past the range."""
        consumer, state, metrics, syncs = self._consumer, self._state, self._metrics, self.offset_syncs
        produce, refused = self._producer.produce, self._producer.refused
        sync = self._config.sync_send  # producer.type=sync: each record acknowledged before the next
        topic, partition, first, last = tp.topic, tp.partition, item.first, item.last
        last_seen, quiet_since, past = first - 1, time.monotonic(), []
        remaining_routes, bound, target = iter(routes), first - 1, None
        while tp in self.assigned and not state.stopping and time.monotonic() < deadline:
            messages, ahead = ahead or poll(consumer, 500, POLL_TIMEOUT_S), []
            count = nbytes = dropped = 0
            try:
                for index, msg in enumerate(messages):
                    if msg.error() is not None or msg.partition() != partition or msg.topic() != topic:
                        continue
                    offset = msg.offset()
                    if offset < first:
                        continue
                    if offset > last:
                        # Past the range (also where its last records were compacted away): what
                        # follows is the raw path's, from the batch boundary after the range.
                        last_seen, past = last, messages[index:]
                        break
                    while offset > bound:  # the next batch's route
                        bound, target = next(remaining_routes)
                    if target is None:  # the handler dropped its batch: committed, not mirrored
                        last_seen = offset
                        dropped += 1
                        continue
                    value, timestamp = msg.value(), msg.timestamp()[1]
                    try:
                        produce(target, value, msg.key(), partition, None, None, timestamp if timestamp > 0 else 0,
                                msg.headers())
                    except (BufferError, KafkaException) as exc:
                        refused(exc, target, value, msg.key(), partition, timestamp if timestamp > 0 else 0,
                                msg.headers(), topic, partition, offset)
                    if sync:
                        self._producer.flush()
                    if state.failure is not None:
                        break  # nothing is committed past a failure
                    last_seen = offset
                    count += 1
                    if value is not None:
                        nbytes += len(value)
            except SendInterrupted as interrupted:
                self._log.info("Stopping while the producer's queue is full: records from %s on are not "
                               "committed and are mirrored again on restart", interrupted)
                break  # the range is not done: none of it is committed
            finally:  # also when a stop interrupted a send: what was handed over is counted
                if count:
                    self._producer.count_produced(count)
                    if syncs is not None:  # from its first record: a sync must not name an offset before it
                        syncs.record(tp, _first_offset(messages, tp, first), last_seen, count)
                if count or dropped:
                    metrics.consumed(tp, count + dropped, nbytes, 0.0, 0.0, 0.0, 0)
                if dropped:
                    metrics.filtered(dropped)
            if last_seen >= last:
                break
            if messages:
                quiet_since = time.monotonic()
            elif (time.monotonic() - quiet_since > RECORD_PATH_QUIET_S
                  and self._fetcher.high_watermarks.get(tp, 0) <= last + 1):
                last_seen = last  # the range's records are gone (compacted away)
                break
        return last_seen, past

    def _records_acknowledged(self, tp: TopicPartition) -> bool:
        """Whether the raw path may send for ``tp``: the record producer's records before it are
        acknowledged (flushed now where the record path sent some; a flush that does not end in
        time leaves the batch for the next round)."""
        if tp not in self._records_in_flight:
            return True
        if not self._producer.flush(time.monotonic() + RECORD_PATH_TIMEOUT_S):
            return False
        self._records_in_flight.clear()  # the flush covered every partition's
        return True

    def _wake_consumer_fetcher(self, start: KafkaTopicPartition) -> None:
        """librdkafka's broker thread sees a resumed partition only when it next wakes, up to a
        second later while every partition was paused (a second per record path round on a
        compacted topic, measured); a request to the partition's leader wakes it now."""
        try:
            self._consumer.get_watermark_offsets(start, timeout=1, cached=False)
        except KafkaException:
            pass  # only a wake-up: the fetch then starts at the broker thread's next turn

    def _ensure_target_topics(self, tps: List[TopicPartition]) -> None:
        super()._ensure_target_topics(tps)
        self._target_topics.require_partitions({tp.topic: self._targets_of(tp.topic) for tp in tps})

    # -- assignment ----------------------------------------------------------------------

    def _assigned_from(self, positions) -> None:
        """Pause the newly assigned partitions in the consumer and fetch them raw from their
        positions. A position the consumer could not resolve is asked for again."""
        self._consumer.pause(positions)
        for topic in {position.topic for position in positions}:
            # A batch goes as it is only where every target topic the handler names takes it.
            limits = [limit for target in self._targets_of(topic)
                      for limit in [self._target_topics.max_message_bytes.get(target)] if limit]
            if limits:
                self._fetcher.max_batch_bytes[topic] = min(limits)
        for position in positions:
            tp = TopicPartition(position.topic, position.partition)
            offset = position.offset if position.offset >= 0 else self._resolve(position)
            self._fetcher.assign(tp, offset)

    def _resolve(self, position) -> int:
        low, high = self._consumer.get_watermark_offsets(position, timeout=10)
        reset = self._config.consumer.get("auto.offset.reset", "latest")
        return low if reset in ("earliest", "smallest", "beginning") else high

    def _reset_out_of_range(self) -> None:
        while self._fetcher.out_of_range:
            tp = self._fetcher.out_of_range.pop()
            if tp not in self.assigned:
                continue
            offset = self._resolve(KafkaTopicPartition(tp.topic, tp.partition))
            self._log.warning("Offset of %s-%d is out of range; resetting it to %d (auto.offset.reset)",
                              tp.topic, tp.partition, offset)
            self._fetcher.work[tp].clear()
            self._fetcher.assign(tp, offset)

    def _forget(self, tps: List[TopicPartition]) -> None:
        super()._forget(tps)
        if self._raw is None:
            return  # the raw path never started
        for tp in tps:
            self._fetcher.forget(tp)
            self._raw.drop_source(tp)

    def update_lag(self) -> None:
        """Lag from the high watermarks the raw fetches carried."""
        for tp in list(self.assigned):
            high, position = self._fetcher.high_watermarks.get(tp), self._fetcher.positions.get(tp)
            if high is None or position is None:
                self.at_end.discard(tp)
                continue
            lag = max(0, high - position)
            self._metrics.set_lag(tp, lag)
            if lag == 0 and not self._fetcher.work.get(tp):
                self.at_end.add(tp)
            else:
                self.at_end.discard(tp)


def _first_offset(messages: List, tp: TopicPartition, first: int) -> int:
    """The offset of the first of ``messages`` in ``tp`` from ``first`` on: where a poll's run of
    the record path begins (found once per poll, not per record)."""
    for msg in messages:
        if msg.error() is None and msg.partition() == tp.partition and msg.topic() == tp.topic \
                and msg.offset() >= first:
            return msg.offset()
    return first


def _ages(batches: List[RawBatch]) -> Tuple[float, float, float, int]:
    """The metrics' record ages (min, max, sum, records counted) from the batches' first and
    largest timestamps, without reading a record: each record counts as its batch's mean age."""
    now_ms = time.time() * 1000.0
    low, high, total, aged = float("inf"), float("-inf"), 0.0, 0
    for batch in batches:
        ages = [now_ms - ts for ts in (batch.base_timestamp, batch.max_timestamp) if ts > 0]
        if ages and batch.record_count:
            low, high = min(low, *ages), max(high, *ages)
            total += sum(ages) / len(ages) * batch.record_count
            aged += batch.record_count
    return (low, high, total, aged) if aged else (0.0, 0.0, 0.0, 0)
