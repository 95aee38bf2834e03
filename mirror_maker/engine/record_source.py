"""Records from the stream's consumer (record mode and exactly-once): each round takes what the
consumer has fetched (Java's poll: up to max.poll.records, without waiting for that many) and
hands it through the copier to the sink.

Where a partition stands, for the lag: librdkafka's position is the last record it returned + 1,
which stays below the partition's end where the end holds no record to return (a compacted
batch's removed tail, an aborted transaction and its marker, under read_committed an open
transaction past the last stable offset). Its statistics carry the fetch position and the last
stable offset; they are kept as they come (a string) and read only for a partition whose position
stood still below its end since before they were taken.
"""

from __future__ import annotations

import json
import time
from typing import Dict, List, Optional, Tuple

from confluent_kafka import KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from ..callbacks import client_callback
from ..clients.polling import poll
from ..records import TopicPartition

#: How often the consumer reports its statistics (the fetch positions): a partition whose end
#: holds no record to return is seen at its end this long after it got there, at most.
STATS_INTERVAL_MS = 2000


class RecordSource:
    #: The target topics are created with the source's partitions, but not required to have them.
    keeps_partitions = False

    def __init__(self, stream, consumer, copier, membership, batch_size: int, poll_timeout_s: float,
                 tracker=lambda: None, read_committed: bool = True) -> None:
        self._stream = stream
        self._consumer = consumer
        self._copier = copier
        self._membership = membership
        self._batch_size = batch_size
        self._timeout = poll_timeout_s
        self._tracker = tracker
        self._read_committed = read_committed
        #: Per partition: (position, since when it has not moved).
        self._still: Dict[TopicPartition, Tuple[int, float]] = {}
        #: The consumer's last statistics: (when they came, the text), and what was read of them.
        self._stats: Tuple[float, Optional[str]] = (0.0, None)
        self._read_stats: Tuple[float, dict] = (-1.0, {})
        #: The partitions are paused while the loop waits for the target (``keep_alive``).
        self._paused = False

    def read(self) -> int:
        if self._paused:
            self._resume()
        messages = poll(self._consumer, self._batch_size, self._timeout)
        if messages:
            self._stream.record(self._copier.copy(messages, tracker=self._tracker()))
        return len(messages)

    def keep_alive(self) -> None:
        """Serve the group while the loop waits for the target, reading nothing: the partitions
        are paused (librdkafka goes on from the last record it returned when they resume), and
        a record returned anyway is read again later (a seek back to it)."""
        if not self._paused:
            self._paused = True
            self._pause(self._stream.assigned)
        first: Dict[TopicPartition, int] = {}
        for msg in self._consumer.consume(self._batch_size, 0):
            if msg.error() is not None:
                self._stream.consume_error(msg)
                continue
            tp = TopicPartition(msg.topic(), msg.partition())
            first.setdefault(tp, msg.offset())
        if first:
            self.rewind({tp: offset for tp, offset in first.items() if tp in self._stream.assigned})
            self._pause(first)

    def _pause(self, tps) -> None:
        if tps:
            self._consumer.pause([KafkaTopicPartition(tp.topic, tp.partition) for tp in tps])

    def _resume(self) -> None:
        self._paused = False
        if self._stream.assigned:
            self._consumer.resume([KafkaTopicPartition(tp.topic, tp.partition) for tp in self._stream.assigned])

    def assigned(self, starts, tps) -> None:
        if self._paused:  # assigned while the loop waits for the target: read once it goes on
            self._pause(tps)

    def forget(self, tps) -> None:
        for tp in tps:
            self._still.pop(tp, None)
        if self._paused and tps:
            # librdkafka keeps a pause on the partition, not on its assignment: one paused here
            # and given back later would never be fetched again (librdkafka #1849). Revoked, it
            # is still assigned: resume it now.
            self._consumer.resume([KafkaTopicPartition(tp.topic, tp.partition) for tp in tps])

    def rewind(self, positions: Dict[TopicPartition, int]) -> None:
        for tp, offset in positions.items():
            self._consumer.seek(KafkaTopicPartition(tp.topic, tp.partition, offset))
            self._still.pop(tp, None)

    def restart(self, tp: TopicPartition, position: int) -> None:
        self._membership.restart({tp: position})
        self._still.pop(tp, None)

    @client_callback
    def on_stats(self, text: str) -> None:
        """The consumer's ``stats_cb``: kept as it is, read only when needed (``_fetch_view``)."""
        self._stats = (time.monotonic(), text)

    def ends(self, tps: List[TopicPartition], known: Dict[TopicPartition, int]):
        """Each partition's position and end: the consumer's position and the end the last fetch
        carried (no request); for a partition that stood still below its end since before the
        last statistics, the fetch position and the last stable offset they give."""
        try:
            positions = self._consumer.position([KafkaTopicPartition(tp.topic, tp.partition) for tp in tps])
        except (KafkaException, RuntimeError):  # RuntimeError: the consumer just closed
            return {}
        now = time.monotonic()
        views = {}
        for position in positions:
            tp = TopicPartition(position.topic, position.partition)
            try:
                _low, end = self._consumer.get_watermark_offsets(position, cached=True)
            except KafkaException:
                continue
            at = max(position.offset, known.get(tp, -1))
            views[tp] = (position.offset if position.offset >= 0 else None, end)
            if at < 0 or end <= at:
                self._still.pop(tp, None)
                continue
            still = self._still.get(tp)
            if still is None or still[0] != at:
                self._still[tp] = (at, now)
                continue
            fetched = self._fetch_view(tp, since=still[1])
            if fetched is not None:
                next_offset, stable = fetched
                if self._read_committed and 0 <= stable < end:
                    end = stable
                views[tp] = (max(at, next_offset), end)
        return views

    def _fetch_view(self, tp: TopicPartition, since: float) -> Optional[Tuple[int, int]]:
        """(fetch position, last stable offset) of ``tp`` from statistics taken after ``since``."""
        taken, text = self._stats
        if text is None or taken <= since or self._paused:  # paused: what was fetched was dropped
            return None
        if self._read_stats[0] != taken:
            try:
                self._read_stats = (taken, json.loads(text).get("topics", {}))
            except ValueError:
                self._read_stats = (taken, {})
        part = self._read_stats[1].get(tp.topic, {}).get("partitions", {}).get(str(tp.partition))
        if not part or part.get("fetch_state") != "active" or part.get("fetchq_cnt", 0):
            return None
        return int(part.get("next_offset", -1)), int(part.get("ls_offset", -1))

    def close(self) -> None:
        pass  # the consumer is the membership's to close
