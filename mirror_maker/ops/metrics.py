"""What the mirror measures, kept in plain Python counters on the hot path and exported to
Prometheus only when scraped (a custom collector), so mirroring pays no per-record library cost.

Names follow MirrorMaker: Kafka's only MirrorMaker v1 metric, ``MirrorMaker-numDroppedMessages``
(``mirrormaker_dropped_messages_total`` here), and MirrorMaker 2's per-partition record-count,
byte-count, record-age-ms and replication-latency-ms (min/max/avg over the last 30-60 s, as
Kafka's two-sample windows), labelled with the *source* topic and partition (and, with a
replication policy, the ``target_topic``), plus acknowledged
records, consumer lag, commits, rebalances and the producer's queue depth.

The hot path calls nothing per record: counts, bytes and ages are recorded once per run of one
partition's records in a batch, the ages from the run's first and last record. The target's
acknowledgements are not reported one by one (delivery reports for failures only), so the
acknowledged count is what was produced minus what still waits and what failed, and the
replication latency is a record's age when consumed plus librdkafka's measured time from
``produce`` to the target's acknowledgement (its statistics, every 5 s).
"""

from __future__ import annotations

import re
import threading
import time
from typing import Callable, Dict, Iterable, NamedTuple, Optional, Tuple

from ..records import TopicPartition

WINDOW_S = 30.0
NAN = float("nan")
COMMIT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class WindowStat:
    """min/max/avg over the current and the previous window (Kafka's two-sample stats)."""

    __slots__ = ("_window_s", "_start", "_current", "_previous")

    def __init__(self, window_s: float = WINDOW_S) -> None:
        self._window_s = window_s
        self._start = 0.0
        self._current = [float("inf"), float("-inf"), 0.0, 0]
        self._previous = [float("inf"), float("-inf"), 0.0, 0]

    def _roll(self, now: float) -> None:
        if now - self._start >= self._window_s:
            elapsed_windows = (now - self._start) // self._window_s
            self._previous = self._current if elapsed_windows < 2 else [float("inf"), float("-inf"), 0.0, 0]
            self._current = [float("inf"), float("-inf"), 0.0, 0]
            self._start = now

    def record_many(self, low: float, high: float, total: float, count: int, now: float) -> None:
        self._roll(now)
        current = self._current
        if low < current[0]:
            current[0] = low
        if high > current[1]:
            current[1] = high
        current[2] += total
        current[3] += count

    def values(self, now: float):
        """(min, max, avg), or None when nothing was recorded in the last two windows."""
        self._roll(now)
        low = min(self._current[0], self._previous[0])
        high = max(self._current[1], self._previous[1])
        count = self._current[3] + self._previous[3]
        if not count:
            return None
        return low, high, (self._current[2] + self._previous[2]) / count


def record_ages(first_ms: int, last_ms: int, records: int, now_ms: float) -> Tuple[float, float, float, int]:
    """What ``MirrorMetrics.consumed`` takes as ages (min, max, sum, records counted) from the first
    and last timestamps of records that follow each other (a run, a raw batch), without reading
    the others: each record counts as their mean age. Times at or below 0 (none) are not aged."""
    stamps = [ts for ts in (first_ms, last_ms) if ts > 0]
    if not stamps or not records:
        return 0.0, 0.0, 0.0, 0
    return now_ms - max(stamps), now_ms - min(stamps), (now_ms - sum(stamps) / len(stamps)) * records, records


class PartitionStats:
    __slots__ = ("records", "bytes", "age", "latency", "lag")

    def __init__(self) -> None:
        self.records = 0
        self.bytes = 0
        self.age = WindowStat()
        #: Measured replication latency, where acknowledgements come back per batch (raw path).
        self.latency = WindowStat()
        self.lag: Optional[int] = None


#: The head of a librdkafka statistics document holds these, its tail the byte counts.
_HEAD_FIELDS = ("name", "client_id", "type", "msg_size", "msg_size_max")
_HEAD_CHARS = 400
_TAIL_CHARS = 2048


class ClientValues(NamedTuple):
    """What MirrorMaker 2's Kafka Connect worker reports of its clients and its task, as this
    mirror knows it: bytes its consumers received and its producers sent (librdkafka's
    statistics; None without any yet), the producer buffer left, the average commit and the
    records waiting for the target."""

    received_bytes: Optional[int]
    sent_bytes: Optional[int]
    buffer_available_bytes: Optional[int]
    commit_avg_ms: Optional[float]
    waiting: int


class MirrorMetrics:
    """All the mirror's numbers; every method is safe to call from any mirror thread."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self.partitions: Dict[TopicPartition, PartitionStats] = {}
        self.dropped = 0
        #: Records the message handler returned no record for (their offsets are committed).
        self.filtered_records = 0
        #: The raw path's batches the record path took, by reason.
        self.fallbacks: Dict[str, int] = {}
        self.commits = 0
        self.commit_seconds_sum = 0.0
        self.commit_buckets = [0] * len(COMMIT_BUCKETS)
        self.rebalances = {"assigned": 0, "revoked": 0, "lost": 0}
        self.queue_depth: Callable[[], int] = lambda: 0
        self.acknowledged: Callable[[], int] = lambda: 0
        #: Acknowledged by the target, committed or not (differs for exactly-once only).
        self.delivered: Callable[[], int] = lambda: self.acknowledged()
        #: How long the mirror has been stalled (``ops.stall``): 0 while it makes progress.
        self.stalled_seconds: Callable[[], float] = lambda: 0.0
        self.assigned_partitions: Callable[[], int] = lambda: 0
        #: With a replication policy: a source topic's name on the target, MirrorMaker 2's topic
        #: tag, exported as the ``target_topic`` label next to the source ``topic``.
        self.target_topic: Optional[Callable[[str], str]] = None
        #: (min, max, avg) ms from ``produce`` to the target's acknowledgement, from librdkafka's
        #: last statistics window; None until the first one.
        self.ack_delay_ms: Optional[Tuple[float, float, float]] = None
        # Consumer failover: what reached the target, and MirrorMaker 2's checkpoint-latency-ms.
        self.offset_syncs = 0
        self.checkpoints = 0
        self.heartbeats = 0
        self.checkpoint_latency: Dict[Tuple[str, TopicPartition], WindowStat] = {}
        #: A cluster side ("target") -> its client errors, which know whether it is reachable
        #: (anything with ``unreachable_for()``: seconds since it went away, or None).
        self.cluster_errors: Dict[str, object] = {}
        #: Per librdkafka handle (its name, unique in the process): bytes a consumer received from
        #: and a producer sent to the brokers, as its last statistics said; a replaced handle's
        #: last count is kept, so that the sums never go down.
        self._received: Dict[str, int] = {}
        self._sent: Dict[str, int] = {}
        #: Per producer client.id: the room left in its queue (queue.buffering.max.kbytes).
        self._buffer_available: Dict[str, int] = {}

    def _stats(self, tp: TopicPartition) -> PartitionStats:
        stats = self.partitions.get(tp)
        if stats is None:
            with self._lock:
                stats = self.partitions.setdefault(tp, PartitionStats())
        return stats

    # -- updates (hot path: called once per batch and partition, or once per ack) --------

    def consumed(self, tp: TopicPartition, records: int, nbytes: int,
                 age_min: float, age_max: float, age_sum: float, aged: int) -> None:
        stats = self._stats(tp)
        with self._lock:
            stats.records += records
            stats.bytes += nbytes
            if aged:
                stats.age.record_many(age_min, age_max, age_sum, aged, self._clock())

    def consumed_run(self, tp: TopicPartition, records: int, nbytes: int, first_ms: int, last_ms: int) -> None:
        """``consumed`` for records that follow each other (a run, a raw batch), aged from their
        first and last timestamps (``record_ages``)."""
        self.consumed(tp, records, nbytes, *record_ages(first_ms, last_ms, records, time.time() * 1000.0))

    def dropped_one(self) -> None:
        self.dropped_many(1)

    def dropped_many(self, records: int) -> None:
        with self._lock:
            self.dropped += records

    def batch_acknowledged(self, tp: TopicPartition, latency_ms: float) -> None:
        """The raw path: the target acknowledged a batch whose newest record is this old."""
        stats = self._stats(tp)
        with self._lock:
            stats.latency.record_many(latency_ms, latency_ms, latency_ms, 1, self._clock())

    def raw_fallback(self, reason: str, batches: int) -> None:
        with self._lock:
            self.fallbacks[reason] = self.fallbacks.get(reason, 0) + batches

    def filtered(self, records: int) -> None:
        with self._lock:
            self.filtered_records += records

    def committed(self, seconds: float) -> None:
        with self._lock:
            self.commits += 1
            self.commit_seconds_sum += seconds
            for i, bound in enumerate(COMMIT_BUCKETS):
                if seconds <= bound:
                    self.commit_buckets[i] += 1

    def rebalanced(self, event: str) -> None:
        with self._lock:
            self.rebalances[event] += 1

    def offset_syncs_written(self, count: int) -> None:
        with self._lock:
            self.offset_syncs += count

    def checkpoint_written(self, group: str, tp: TopicPartition, latency_ms: float) -> None:
        """A checkpoint the target acknowledged ``latency_ms`` after it was made."""
        with self._lock:
            self.checkpoints += 1
            stat = self.checkpoint_latency.setdefault((group, tp), WindowStat())
            stat.record_many(latency_ms, latency_ms, latency_ms, 1, self._clock())

    def heartbeat_written(self) -> None:
        with self._lock:
            self.heartbeats += 1

    def client_statistics_text(self, text: str) -> None:
        """A librdkafka client's statistics as it sent them, read without parsing the whole
        document (a consumer's holds every partition): its head and its tail have what is needed."""
        fields = {key: match.group(1) for key in _HEAD_FIELDS
                  for match in [re.search(rf'"{key}":\s*"?([^",]*)', text[:_HEAD_CHARS])] if match}
        for key in ("rx_bytes", "tx_bytes"):
            match = re.search(rf'"{key}":\s*(\d+)', text[-_TAIL_CHARS:]) or re.search(rf'"{key}":\s*(\d+)', text)
            if match:
                fields[key] = match.group(1)
        self.client_statistics(fields)

    def client_statistics(self, stats: dict) -> None:
        """A librdkafka client's statistics (parsed): its network byte counts, and a producer's
        buffer left (what Java's buffer-available-bytes says)."""
        name, kind = stats.get("name"), stats.get("type")
        if not name:
            return
        with self._lock:
            if kind == "consumer":
                self._received[name] = int(stats.get("rx_bytes", 0))
            elif kind == "producer":
                self._sent[name] = int(stats.get("tx_bytes", 0))
                if "msg_size_max" in stats:
                    room = int(stats["msg_size_max"]) - int(stats.get("msg_size", 0))
                    self._buffer_available[str(stats.get("client_id", name))] = max(0, room)

    def client_values(self) -> ClientValues:
        with self._lock:
            received = sum(self._received.values()) if self._received else None
            sent = sum(self._sent.values()) if self._sent else None
            room = sum(self._buffer_available.values()) if self._buffer_available else None
            commit_avg_ms = 1000.0 * self.commit_seconds_sum / self.commits if self.commits else None
        return ClientValues(received, sent, room, commit_avg_ms, self.queue_depth())

    def set_lag(self, tp: TopicPartition, lag: Optional[int]) -> None:
        self._stats(tp).lag = lag

    def forget_lag(self, tps: Iterable[TopicPartition]) -> None:
        for tp in tps:
            stats = self.partitions.get(tp)
            if stats is not None:
                stats.lag = None

    # -- reading ------------------------------------------------------------------------

    def totals(self) -> dict:
        with self._lock:
            parts = list(self.partitions.values())
            return {
                "records": sum(p.records for p in parts),
                "bytes": sum(p.bytes for p in parts),
                "acked": self.acknowledged(),
                "delivered": self.delivered(),
                "lag": sum(p.lag for p in parts if p.lag is not None),
                "dropped": self.dropped,
                "filtered": self.filtered_records,
                "commits": self.commits,
                "unreachable": self.unreachable(),
            }

    def partition_values(self, now: float):
        """Per source partition: (tp, records, bytes, lag, record ages, replication latencies),
        the windows as (min, max, avg) or None; what both exports read."""
        with self._lock:
            items = sorted(self.partitions.items())
        delay = self.ack_delay_ms
        for tp, stats in items:
            ages = stats.age.values(now)
            latencies = stats.latency.values(now) if ages is not None else None
            if latencies is None and ages is not None and delay is not None:
                latencies = tuple(age + extra for age, extra in zip(ages, delay))
            yield tp, stats.records, stats.bytes, stats.lag, ages, latencies

    def failover_values(self, now: float):
        """(offset syncs, checkpoints, heartbeats) written, and per (group, source partition) the
        checkpoint latency window (min, max, avg). A partition whose group has not moved for two
        windows keeps its series with NaN, as MirrorMaker 2's sampled stats read then: checkpoints
        are written only when a group moves, and a series that came and went would look like a
        lost metric to a dashboard."""
        with self._lock:
            counts = (self.offset_syncs, self.checkpoints, self.heartbeats)
            windows = sorted(self.checkpoint_latency.items())
        return counts, [(group, tp, stat.values(now) or (NAN, NAN, NAN)) for (group, tp), stat in windows]
    def unreachable(self) -> Dict[str, float]:
        """Each cluster side that cannot be reached now, with how long it has been away (s)."""
        away = {side: errors.unreachable_for() for side, errors in self.cluster_errors.items()}
        return {side: seconds for side, seconds in away.items() if seconds is not None}

    def collect(self):
        """The prometheus_client collector protocol: build every family at scrape time."""
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily

        now = self._clock()
        with self._lock:
            dropped, commits, commit_sum = self.dropped, self.commits, self.commit_seconds_sum
            filtered, fallbacks = self.filtered_records, dict(self.fallbacks)
            buckets, rebalances = list(self.commit_buckets), dict(self.rebalances)
        target_topic = self.target_topic
        labels = ["topic", "partition"] + (["target_topic"] if target_topic else [])
        families = {
            "records": CounterMetricFamily("mirrormaker_record_count", "Records consumed from the source "
                                           "(MirrorMaker 2 record-count)", labels=labels),
            "bytes": CounterMetricFamily("mirrormaker_byte_count", "Value bytes consumed (MirrorMaker 2 "
                                         "byte-count; rate() gives byte-rate)", labels=labels),
            "lag": GaugeMetricFamily("mirrormaker_consumer_lag", "Records behind the source's high "
                                     "watermark", labels=labels),
        }
        windows = {}
        for name, help_text in (("record_age_ms", "now - record timestamp when consumed"),
                                ("replication_latency_ms", "record age when consumed + produce-to-"
                                 "acknowledgement time")):
            for stat in ("min", "max", "avg"):
                windows[(name, stat)] = GaugeMetricFamily(
                    f"mirrormaker_{name}_{stat}", f"{help_text} ({stat}, last 30-60 s)", labels=labels)
        for tp, records, nbytes, lag, ages, latencies in self.partition_values(now):
            values = [tp.topic, str(tp.partition)] + ([target_topic(tp.topic)] if target_topic else [])
            families["records"].add_metric(values, records)
            families["bytes"].add_metric(values, nbytes)
            if lag is not None:
                families["lag"].add_metric(values, lag)
            for name, window in (("record_age_ms", ages), ("replication_latency_ms", latencies)):
                for stat, value in zip(("min", "max", "avg"), window or ()):
                    windows[(name, stat)].add_metric(values, value)
        yield from families.values()
        yield from windows.values()
        yield from self._failover_families(now)
        yield CounterMetricFamily("mirrormaker_records_acknowledged", "Records the target acknowledged",
                                  value=self.acknowledged())
        yield CounterMetricFamily("mirrormaker_dropped_messages", "Records that could not be sent "
                                  "(Kafka's MirrorMaker-numDroppedMessages)", value=dropped)
        yield CounterMetricFamily("mirrormaker_filtered_records", "Records the message handler "
                                  "returned no record for", value=filtered)
        fallback = CounterMetricFamily("mirrormaker_raw_fallback_batches", "Batches the raw path could not "
                                       "forward as they are, mirrored by the record path", labels=["reason"])
        for reason, count in sorted(fallbacks.items()):
            fallback.add_metric([reason], count)
        yield fallback
        # ``committed`` counts a cycle in every bucket it fits, so the buckets are cumulative.
        cumulative = [(str(bound), count) for bound, count in zip(COMMIT_BUCKETS, buckets)]
        cumulative.append(("+Inf", commits))
        yield HistogramMetricFamily("mirrormaker_commit_latency_seconds", "Flush-then-commit cycles "
                                    "and how long each took", buckets=cumulative, sum_value=commit_sum)
        rebalance = CounterMetricFamily("mirrormaker_rebalances", "Rebalance events seen by the "
                                        "mirror threads", labels=["event"])
        for event, count in rebalances.items():
            rebalance.add_metric([event], count)
        yield rebalance
        yield GaugeMetricFamily("mirrormaker_producer_queue_depth", "Records waiting in the "
                                "producer for the target's acknowledgement", value=self.queue_depth())
        yield GaugeMetricFamily("mirrormaker_stalled_seconds", "How long nothing was acknowledged by the "
                                "target or committed while records wait (0: progressing)",
                                value=self.stalled_seconds())
        yield GaugeMetricFamily("mirrormaker_assigned_partitions", "Source partitions assigned to "
                                "this process", value=self.assigned_partitions())
        clients = self.client_values()
        if clients.received_bytes is not None:
            yield CounterMetricFamily("mirrormaker_network_received_bytes", "Bytes the mirror's consumers "
                                      "received from the source (librdkafka's rx_bytes)", value=clients.received_bytes)
        if clients.sent_bytes is not None:
            yield CounterMetricFamily("mirrormaker_network_sent_bytes", "Bytes the mirror's producers sent to "
                                      "the target (librdkafka's tx_bytes)", value=clients.sent_bytes)
        if clients.buffer_available_bytes is not None:
            yield GaugeMetricFamily("mirrormaker_producer_buffer_available_bytes", "Room left in the "
                                    "producers' queues (queue.buffering.max.kbytes)",
                                    value=clients.buffer_available_bytes)

    def _failover_families(self, now: float):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        (syncs, checkpoints, heartbeats), latencies = self.failover_values(now)
        for name, help_text, value in (("offset_syncs", "Offset syncs written", syncs),
                                       ("checkpoints", "Checkpoints the target acknowledged", checkpoints),
                                       ("heartbeats", "Heartbeats the target acknowledged", heartbeats)):
            yield CounterMetricFamily(f"mirrormaker_{name}", help_text, value=value)
        windows = {stat: GaugeMetricFamily(f"mirrormaker_checkpoint_latency_ms_{stat}", "Checkpoint made to "
                                           f"acknowledged (MirrorMaker 2 checkpoint-latency-ms; {stat}, last "
                                           "30-60 s)", labels=["group", "topic", "partition"])
                   for stat in ("min", "max", "avg")}
        for group, tp, values in latencies:
            for stat, value in zip(("min", "max", "avg"), values):
                windows[stat].add_metric([group, tp.topic, str(tp.partition)], value)
        yield from windows.values()
