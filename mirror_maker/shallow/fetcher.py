"""The raw path's fetcher: whole record batches from the source partitions' leaders.

One fetch is in flight per source broker, for the assigned partitions it leads, from each one's
position. An answer becomes, per partition and in offset order, work for the stream: a batch to
forward as it is (its CRC checked: a corrupt batch is fetched again, and a batch corrupt on the
source fails the run rather than arrive on the target with a fresh, valid CRC), a range of offsets
for the record path (a batch raw mode cannot forward, or the part of the first batch after a
position inside it), or a batch to skip (control batches, and aborted ones under read_committed).
The position moves past everything handed out. Errors: a moved leader refreshes metadata; an
offset out of range is handed to the stream, which resets it (``engine.positions``).
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Deque, Dict, List, Optional

from ..errors import ClientFailed
from ..records import RawBatch, TopicPartition
from .batches import Batch, CorruptBatch, committed, share_answer, split
from .connections import FETCH_MAX_BYTES, MAX_FETCH_VERSION, Cluster, guarded

log = logging.getLogger("mirror_maker.shallow")

PARTITION_MAX_BYTES = 1048576  # librdkafka's and Java's max.partition.fetch.bytes default
FETCH_WAIT_MS = 100
#: Stop fetching while this much is fetched but not yet acknowledged by the target, in bytes and
#: in batches (a slow target with small batches queued thousands of them).
BUFFER_BYTES = 64 * 1024 * 1024
BUFFER_BATCHES = 1000
#: A batch whose CRC does not match is fetched again this many times before the run fails.
CORRUPT_ATTEMPTS = 3
_NOT_LEADER = frozenset({3, 5, 6, 74, 75, 100})  # unknown partition, leader moved or unknown epoch
_OFFSET_OUT_OF_RANGE = 1
_TOPIC_AUTHORIZATION_FAILED = 29
#: At least this many batches in a row to forward, of at most SMALL_BATCH_BYTES on average, are
#: a backlog the record path mirrors faster: Kafka takes one batch per partition per produce
#: request and works through a connection's requests one at a time, each waiting for acks=all,
#: so a partition gets one batch per round trip to the target's replicas, which for batches of a
#: few records is less than a producer writes (raw mode then never caught up). Such a backlog is
#: cut into ranges of at most BACKLOG_RANGE_RECORDS, each a bounded round of the record path.
BACKLOG_BATCHES = 100
SMALL_BATCH_BYTES = 4096
BACKLOG_RANGE_RECORDS = 5000
SMALL_BATCHES = "a backlog of small batches"


@dataclass  # not frozen: a frozen dataclass is built 5 times slower, and this is one per batch
class Work:
    """One step of a partition's stream, in offset order.

    ``batch`` set and ``records`` False: forward the batch as it is. ``records`` True: the
    record path mirrors offsets ``first``..``last`` (``described``: the batches raw mode cannot
    forward, or the one a position falls inside, as the raw handler sees them), reading from
    ``read_from`` (the first batch's start: records before ``first`` are counted, not mirrored);
    ``expected``: how many records its batches hold (None where unknown: magic 0/1), so that the
    range is known to be done even when compaction removed its last offsets. ``skip``: nothing
    to mirror (a control batch, or an aborted one).
    """

    source: TopicPartition
    first: int
    last: int
    batch: Optional[Batch] = None
    records: bool = False
    reason: str = ""
    skip: bool = False
    described: List[RawBatch] = field(default_factory=list)
    read_from: int = -1
    expected: Optional[int] = None

    @property
    def batches(self) -> int:
        return len(self.described)


class RawFetcher:
    def __init__(self, cluster: Cluster, state, isolation_level: int, fetch_max_bytes: int = FETCH_MAX_BYTES,
                 partition_max_bytes: int = PARTITION_MAX_BYTES, wait_ms: int = FETCH_WAIT_MS, errors=None,
                 batch_backlogs: bool = True) -> None:
        """``errors``: how the source's client errors are worded (a refused permission).
        ``batch_backlogs``: whether a backlog of small batches takes the record path
        (BACKLOG_BATCHES): not where it sends one record at a time (producer.type=sync), slower
        than a batch at a time."""
        self._cluster = cluster
        self._state = state
        self._errors = errors
        self._isolation = isolation_level
        self._max_bytes = fetch_max_bytes
        self._partition_max = partition_max_bytes
        self._wait_ms = wait_ms
        #: The target's max.message.bytes where known: larger batches take the record path.
        self.max_batch_bytes: Dict[str, int] = {}
        self.positions: Dict[TopicPartition, int] = {}
        #: Each partition's end as its last fetch answer said: the last stable offset under
        #: read_committed (an open transaction holds readers there), else the high watermark.
        self.ends: Dict[TopicPartition, int] = {}
        self._grown: Dict[TopicPartition, int] = {}
        self._in_flight: Dict[int, object] = {}
        self.work: Dict[TopicPartition, Deque[Work]] = {}
        self.buffered_bytes = 0
        self.buffered_batches = 0
        #: Partitions whose position is out of range, with that position: the stream resets them.
        self.out_of_range: Dict[TopicPartition, int] = {}
        #: (partition, batch offset) -> how many answers in a row held it corrupt.
        self._corrupt: Dict[tuple, int] = {}
        self._batch_backlogs = batch_backlogs

    # -- assignment ----------------------------------------------------------------------

    def assign(self, tp: TopicPartition, position: int) -> None:
        self.positions[tp] = position
        self.work.setdefault(tp, deque())
        self._cluster.track([tp.topic])

    def forget(self, tp: TopicPartition) -> None:
        self.positions.pop(tp, None)
        self.ends.pop(tp, None)
        self.out_of_range.pop(tp, None)
        self._drop_work(tp)
        self.work.pop(tp, None)

    def seek(self, tp: TopicPartition, position: int) -> None:
        """Continue from ``position`` (after the record path took a range)."""
        if tp in self.positions:
            self.positions[tp] = position

    def refetch(self, tp: TopicPartition, position: int) -> None:
        """Drop what is queued for ``tp`` (its batches no longer count as buffered) and fetch it
        again from ``position``: a range the record path could not finish."""
        self._drop_work(tp)
        self.seek(tp, position)

    def _drop_work(self, tp: TopicPartition) -> None:
        queue = self.work.get(tp)
        while queue:
            self.taken(queue.popleft())

    # -- fetching ------------------------------------------------------------------------

    def fetch(self, pending_bytes: int, pending_batches: int = 0) -> None:
        """Send a fetch to every leader that has none in flight, while the buffer has room (what
        is fetched and what waits for the target's acknowledgement, in bytes and batches)."""
        from kafka.protocol.consumer import FetchRequest

        if (pending_bytes + self.buffered_bytes >= BUFFER_BYTES
                or pending_batches + self.buffered_batches >= BUFFER_BATCHES):
            return
        by_node: Dict[int, List[TopicPartition]] = {}
        for tp in self.positions:
            if self.work.get(tp):
                continue  # its last answer is not handed out yet
            node = self._cluster.route(tp.topic, tp.partition)
            if node is None:
                continue
            if node in self._in_flight:
                continue
            if self._cluster.ready(node):
                by_node.setdefault(node, []).append(tp)
            else:
                self._cluster.revive()
        for node, tps in by_node.items():
            topics: Dict[str, list] = {}
            for tp in tps:
                topics.setdefault(tp.topic, []).append(FetchRequest.FetchTopic.FetchPartition(
                    partition=tp.partition, fetch_offset=self.positions[tp],
                    partition_max_bytes=self._grown.get(tp, self._partition_max)))
            request = FetchRequest(max_wait_ms=self._wait_ms, min_bytes=1, max_bytes=self._max_bytes,
                                   isolation_level=self._isolation,
                                   topics=[FetchRequest.FetchTopic(topic=t, partitions=p) for t, p in topics.items()],
                                   max_version=MAX_FETCH_VERSION)
            requested = {tp: self.positions[tp] for tp in tps}
            future = self._cluster.send(node, request)
            self._in_flight[node] = future
            future.add_callback(guarded(self._on_response, self._state), node, requested)
            future.add_errback(guarded(self._on_failed, self._state), node)

    def _on_failed(self, node: int, exc) -> None:
        self._in_flight.pop(node, None)
        log.debug("fetch from node %s failed: %s", node, exc)
        self._cluster.refresh()

    def _on_response(self, node: int, requested: Dict[TopicPartition, int], response) -> None:
        self._in_flight.pop(node, None)
        for topic in response.responses:
            for part in topic.partitions:
                tp = TopicPartition(topic.topic, part.partition_index)
                position = requested.get(tp)
                if position is None or self.positions.get(tp) != position:
                    continue  # reassigned or moved meanwhile: a later fetch asks again
                if part.error_code:
                    self._partition_error(tp, part.error_code)
                    continue
                stable = part.last_stable_offset if self._isolation else -1
                self.ends[tp] = stable if stable is not None and stable >= 0 else part.high_watermark
                self._take(tp, position, part.records or b"",
                           [(a.producer_id, a.first_offset) for a in (part.aborted_transactions or ())])

    def _take(self, tp: TopicPartition, position: int, data: bytes, aborted) -> None:
        batches = split(data)
        if not batches:
            if data:  # one batch larger than what the partition may return: ask for more
                self._grown[tp] = min(self._grown.get(tp, self._partition_max) * 2, 1 << 30)
            return
        self._grown.pop(tp, None)
        limit = self.max_batch_bytes.get(tp.topic)
        pairs = committed(batches, aborted) if self._isolation else [(b, not b.is_control) for b in batches]
        items: List[Work] = []
        for batch, forward in pairs:
            if batch.last_offset < position:
                continue  # wholly before the position (a compacted or legacy leftover)
            if not forward:
                items.append(Work(tp, max(position, batch.base_offset), batch.last_offset, skip=True))
            elif batch.magic != 2:
                # A legacy entry's offset is its last record's (a compressed wrapper holds the
                # records before it too): the range starts where the position is.
                items.append(Work(tp, position, batch.last_offset, records=True, reason=f"magic {batch.magic}",
                                  described=[batch.describe(tp.topic, tp.partition)], read_from=position))
            elif batch.base_offset < position:
                items.append(Work(tp, position, batch.last_offset, records=True, reason="a position inside the batch",
                                  described=[batch.describe(tp.topic, tp.partition)], read_from=batch.base_offset,
                                  expected=batch.record_count))
            else:
                reason = batch.why_not_raw(limit)
                if reason is None:
                    try:
                        batch = batch.checked()
                    except CorruptBatch as corrupt:
                        self._corrupted(tp, batch, corrupt)
                        break  # this batch and what follows are fetched again
                    self._corrupt.pop((tp, batch.base_offset), None)
                    items.append(Work(tp, batch.base_offset, batch.last_offset, batch=batch))
                else:
                    items.append(_range_of(tp, batch, reason))
            position = batch.next_offset
        queue = self.work[tp]
        items = _small_batches_as_ranges(items) if self._batch_backlogs else items
        share_answer([item.batch for item in items if item.batch is not None], len(data))
        for item in items:
            if item.records and item.reason != SMALL_BATCHES:  # (a backlog's ranges are cut to size)
                _append_range(queue, item)
            else:
                queue.append(item)
            if item.batch is not None:
                self.buffered_bytes += item.batch.held
                self.buffered_batches += 1
            elif item.records:
                self.buffered_batches += item.batches
        self.positions[tp] = position

    def _corrupted(self, tp: TopicPartition, batch: Batch, corrupt: "CorruptBatch") -> None:
        """A batch whose bytes do not match its CRC: fetched again (a fault on the way), and after
        CORRUPT_ATTEMPTS answers in a row a failure naming it (corrupt on the source)."""
        key = (tp, batch.base_offset)
        self._corrupt[key] = self._corrupt.get(key, 0) + 1
        if self._corrupt[key] >= CORRUPT_ATTEMPTS:
            raise ClientFailed(f"the batch of {tp.topic}-{tp.partition} offsets {batch.base_offset}.."
                               f"{batch.last_offset} is corrupt on the source ({corrupt}, in {CORRUPT_ATTEMPTS} "
                               f"fetches): it is not mirrored, and nothing after it is committed")
        log.warning("The batch of %s-%d offsets %d..%d arrived corrupt (%s); fetching it again", tp.topic, tp.partition,
                    batch.base_offset, batch.last_offset, corrupt)

    def _partition_error(self, tp: TopicPartition, code: int) -> None:
        if code in _NOT_LEADER:
            self._cluster.refresh()
        elif code == _OFFSET_OUT_OF_RANGE:
            self.out_of_range[tp] = self.positions[tp]
        elif code == _TOPIC_AUTHORIZATION_FAILED:  # as record mode's consumer: no retry can get past it
            from confluent_kafka import KafkaError

            self._state.fail(self._errors.not_authorized(KafkaError(code), topic=tp.topic) if self._errors is not None
                             else ClientFailed(f"not authorized: the source cluster refused to let this mirror "
                                               f"READ topic {tp.topic} (TOPIC_AUTHORIZATION_FAILED)"))
        else:
            log.warning("Fetching %s-%d failed with error %d; will try again", tp.topic, tp.partition, code)


    def taken(self, item: Work) -> None:
        """The stream handed this item on (its batch is the producer's now, or its range done):
        a range's batches count as buffered too, one description each, held until then."""
        if item.batch is not None:
            self.buffered_bytes -= item.batch.held
            self.buffered_batches -= 1
        elif item.records:
            self.buffered_batches -= item.batches

    def idle(self) -> bool:
        return not self._in_flight


def _range_of(tp: TopicPartition, batch: Batch, reason: str) -> Work:
    return Work(tp, batch.base_offset, batch.last_offset, records=True, reason=reason,
                described=[batch.describe(tp.topic, tp.partition)], read_from=batch.base_offset,
                expected=batch.record_count)


def _small_batches_as_ranges(items: List[Work]) -> List[Work]:
    """One answer's work, with each run of at least BACKLOG_BATCHES batches to forward in a row
    that average at most SMALL_BATCH_BYTES as record path ranges of up to BACKLOG_RANGE_RECORDS
    (a skip item ends a run: a source of small transactions keeps its batches as they are, rather
    than a round of the record path for each)."""
    out: List[Work] = []
    run: List[Work] = []
    for item in items + [None]:
        if item is not None and item.batch is not None:
            run.append(item)
            continue
        small = len(run) >= BACKLOG_BATCHES and sum(i.batch.size for i in run) <= SMALL_BATCH_BYTES * len(run)
        out += _backlog_ranges(run) if small else run
        run = []
        if item is not None:
            out.append(item)
    return out


def _backlog_ranges(run: List[Work]) -> List[Work]:
    ranges: List[Work] = []
    for item in run:
        batch, last = item.batch, ranges[-1] if ranges else None
        if (last is None or last.expected + batch.record_count > BACKLOG_RANGE_RECORDS
                or batch.base_offset != last.last + 1):  # a range's offsets follow each other
            ranges.append(_range_of(item.source, batch, SMALL_BATCHES))
        else:
            last.described.append(batch.describe(item.source.topic, item.source.partition))
            ranges[-1] = replace(last, last=batch.last_offset, expected=last.expected + batch.record_count)
    return ranges


def _append_range(queue: Deque[Work], item: Work) -> None:
    """Queue a record path range, one with the range before it where they follow each other for
    the same reason: a compacted log is mostly batches with offset holes, and each range is a
    round of the record path (drain the raw producer for the partition, resume and seek the
    consumer, read), which costs far more than one batch."""
    before = queue[-1] if queue else None
    if before is not None and before.records and before.reason == item.reason and before.last < item.first:
        before.described.extend(item.described)
        expected = None if before.expected is None or item.expected is None else before.expected + item.expected
        queue[-1] = replace(before, last=item.last, expected=expected)
    else:
        queue.append(item)
