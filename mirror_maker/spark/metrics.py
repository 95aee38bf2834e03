"""``--metrics.port`` with ``--spark``: the workers' metrics, served by the driver.

Each worker renders its own metrics (the same :class:`~mirror_maker.metrics.MirrorMetrics` a
process has) in Prometheus' text format every few seconds and sends them over the control
channel. The driver re-exports every family once, each sample with a ``worker`` label added, so
the dashboards written for the threads (``sum by (topic) (...)``) work unchanged. A restarted
job's workers start their counters from zero again, which Prometheus' ``rate()`` treats as the
counter resets they are.

For the dedicated mode's MirrorMaker 2 metric names, the same texts are read back into what
:class:`~mirror_maker.ops.metrics.MirrorMetrics` gives a process (``partition_values``,
``failover_values``), the workers combined: records and bytes summed per source partition, a
window's min of the minimums, max of the maximums and mean of the averages, as each worker
computed them when it last sent (every few seconds).
"""

from __future__ import annotations

import math
import threading
from typing import Callable, Dict, Iterable, List, Optional, Tuple

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families

from ..ops.metrics import ClientValues
from ..records import TopicPartition

#: How often a worker sends its metrics (only when the driver serves them).
EVERY_S = 5.0


def render(collector) -> str:
    """A worker's metrics in the text exposition format."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return generate_latest(registry).decode()


class WorkerMetrics:
    """The prometheus_client collector of the driver: the latest metrics of each worker, relabelled."""

    def __init__(self, running: Callable[[], int], restarts: Callable[[], int]) -> None:
        self._families: Dict[int, List[Metric]] = {}
        self._lock = threading.Lock()
        self._running = running
        self._restarts = restarts

    def update(self, worker: int, text: str) -> None:
        families = list(text_string_to_metric_families(text))
        with self._lock:
            self._families[worker] = families

    def _latest(self) -> List[Tuple[int, List[Metric]]]:
        with self._lock:
            return sorted(self._families.items())

    def collect(self):
        families: Dict[str, Metric] = {}
        for worker, texts in self._latest():
            for family in texts:
                merged = families.get(family.name)
                if merged is None:
                    merged = families[family.name] = Metric(family.name, family.documentation, family.type)
                for sample in family.samples:
                    merged.add_sample(sample.name, {**sample.labels, "worker": str(worker)}, sample.value)
        yield from families.values()
        yield GaugeMetricFamily("mirrormaker_spark_workers", "Spark workers connected to the driver now",
                                value=self._running())
        yield CounterMetricFamily("mirrormaker_spark_restarts", "Times the driver restarted the Spark job",
                                  value=self._restarts())

    # -- MirrorMetrics' numbers, the workers combined ----------------------------------------

    def _samples(self, *names: str) -> Iterable[Tuple[str, dict, float]]:
        wanted = set(names)
        for _worker, texts in self._latest():
            for family in texts:
                for sample in family.samples:
                    if sample.name in wanted:
                        yield sample.name, sample.labels, sample.value

    @property
    def target_topic(self) -> Optional[Callable[[str], str]]:
        """A source topic's name on the target, as the workers label it (None: no policy)."""
        names = {labels["topic"]: labels["target_topic"] for _n, labels, _v in
                 self._samples("mirrormaker_record_count_total") if "target_topic" in labels}
        return (lambda topic: names.get(topic, topic)) if names else None

    def partition_values(self, now: Optional[float] = None):
        """As ``MirrorMetrics.partition_values``: per source partition (tp, records, bytes, lag,
        record ages, replication latencies), the windows as (min, max, avg) or None."""
        counts: Dict[TopicPartition, List[float]] = {}
        lags: Dict[TopicPartition, float] = {}
        windows: Dict[Tuple[str, TopicPartition], Dict[str, List[float]]] = {}
        names = ["mirrormaker_record_count_total", "mirrormaker_byte_count_total", "mirrormaker_consumer_lag"]
        names += [f"mirrormaker_{w}_{stat}" for w in WINDOWS for stat in STATS]
        for name, labels, value in self._samples(*names):
            tp = TopicPartition(labels["topic"], int(labels["partition"]))
            if name == "mirrormaker_consumer_lag":
                lags[tp] = max(value, lags.get(tp, value))
            elif name.endswith("_total"):
                counts.setdefault(tp, [0, 0])[0 if "record_count" in name else 1] += value
            else:
                window, stat = name[len("mirrormaker_"):].rsplit("_", 1)
                windows.setdefault((window, tp), {}).setdefault(stat, []).append(value)
        for tp in sorted(counts):
            records, nbytes = counts[tp]
            ages, latencies = (_combined(windows.get((window, tp))) for window in WINDOWS)
            yield tp, int(records), int(nbytes), lags.get(tp), ages, latencies

    def client_values(self) -> ClientValues:
        """As ``MirrorMetrics.client_values``: the workers' clients and commits combined."""
        sums: Dict[str, float] = {}
        names = ("mirrormaker_network_received_bytes_total", "mirrormaker_network_sent_bytes_total",
                 "mirrormaker_producer_buffer_available_bytes", "mirrormaker_commit_latency_seconds_sum",
                 "mirrormaker_commit_latency_seconds_count", "mirrormaker_producer_queue_depth")
        for name, _labels, value in self._samples(*names):
            sums[name] = sums.get(name, 0.0) + value
        known = [sums.get(name) for name in names[:3]]
        commits = sums.get("mirrormaker_commit_latency_seconds_count")
        commit_avg_ms = 1000.0 * sums["mirrormaker_commit_latency_seconds_sum"] / commits if commits else None
        return ClientValues(*(None if value is None else int(value) for value in known), commit_avg_ms,
                            int(sums.get("mirrormaker_producer_queue_depth", 0)))

    def failover_values(self, now: Optional[float] = None):
        """As ``MirrorMetrics.failover_values``: (offset syncs, checkpoints, heartbeats) written,
        and per (group, source partition) the checkpoint latency window (min, max, avg)."""
        counters = ("mirrormaker_offset_syncs_total", "mirrormaker_checkpoints_total", "mirrormaker_heartbeats_total")
        totals = dict.fromkeys(counters, 0.0)
        windows: Dict[Tuple[str, TopicPartition], Dict[str, List[float]]] = {}
        stats = [f"mirrormaker_checkpoint_latency_ms_{stat}" for stat in STATS]
        for name, labels, value in self._samples(*counters, *stats):
            if name in totals:
                totals[name] += value
            else:
                key = (labels["group"], TopicPartition(labels["topic"], int(labels["partition"])))
                windows.setdefault(key, {}).setdefault(name.rsplit("_", 1)[1], []).append(value)
        latencies = [(group, tp, _combined(windows[(group, tp)])) for group, tp in sorted(windows)]
        return tuple(int(totals[name]) for name in counters), latencies


WINDOWS = ("record_age_ms", "replication_latency_ms")
STATS = ("min", "max", "avg")


def _combined(stats: Optional[Dict[str, List[float]]]) -> Optional[Tuple[float, float, float]]:
    """Several workers' (min, max, avg) of one window as one; None if none had it. A worker's
    NaN (a series with no recent samples) counts only when every worker has NaN."""
    if not stats or any(stat not in stats for stat in STATS):
        return None
    low, high, avg = ([value for value in stats[stat] if not math.isnan(value)] for stat in STATS)
    if not avg:
        return math.nan, math.nan, math.nan
    return min(low), max(high), sum(avg) / len(avg)
