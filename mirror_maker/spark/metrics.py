"""``--metrics.port`` with ``--spark``: the workers' metrics, served by the driver.

Each worker renders its own metrics (the same :class:`~mirror_maker.metrics.MirrorMetrics` a
process has) in Prometheus' text format every few seconds and sends them over the control
channel. The driver re-exports every family once, each sample with a ``worker`` label added, so
the dashboards written for the threads (``sum by (topic) (...)``) work unchanged. A restarted
job's workers start their counters from zero again, which Prometheus' ``rate()`` treats as the
counter resets they are.
"""

from __future__ import annotations

import threading
from typing import Callable, Dict

from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.parser import text_string_to_metric_families

#: How often a worker sends its metrics (only when the driver serves them).
EVERY_S = 5.0


def render(collector) -> str:
    """A worker's metrics in the text exposition format."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)
    return generate_latest(registry).decode()


class WorkerMetrics:
    """The prometheus_client collector of the driver: the latest text of each worker, relabelled."""

    def __init__(self, running: Callable[[], int], restarts: Callable[[], int]) -> None:
        self._texts: Dict[int, str] = {}
        self._lock = threading.Lock()
        self._running = running
        self._restarts = restarts

    def update(self, worker: int, text: str) -> None:
        with self._lock:
            self._texts[worker] = text

    def collect(self):
        with self._lock:
            texts = sorted(self._texts.items())
        families: Dict[str, Metric] = {}
        for worker, text in texts:
            for family in text_string_to_metric_families(text):
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
