"""The dedicated mode's ``/metrics``: ours for every flow (``mirrormaker_*``, with ``source`` and
``target`` labels), and MirrorMaker 2's own metrics under the names and labels a Prometheus JMX
exporter gives them with Strimzi's MirrorMaker 2 metrics config, which its Grafana dashboard reads:

* ``kafka_connect_mirror_mirrorsourceconnector_`` ``record_count``, ``record_rate``, ``byte_count``,
  ``byte_rate``, ``record_age_ms`` and ``replication_latency_ms`` (each also ``_min``, ``_max``,
  ``_avg``), labelled ``source``, ``target``, ``topic`` (the remote topic) and ``partition``;
* ``kafka_connect_mirror_mirrorcheckpointconnector_checkpoint_latency_ms`` (and ``_min``, ``_max``,
  ``_avg``), labelled ``source``, ``target``, ``group``, ``topic`` (the remote topic, as the
  checkpoint names it) and ``partition``;
* ``kafka_connect_worker_connector_count`` and ``kafka_connect_worker_task_count`` (the MirrorMaker 2
  connectors the file amounts to, and the streams running here), the same as
  ``kafka_connect_coordinator_assigned_connectors`` and ``_tasks``, and
  ``kafka_connect_worker_rebalance_rebalancing``;
* ``kafka_consumer_fetch_manager_records_lag`` per ``clientid`` (MirrorSourceTask's consumer),
  source ``topic`` and ``partition``; the flow's client and task metrics Strimzi's dashboard
  charts (``_ConnectFamilies``), under Strimzi's connector names (``source_connector``).

As with JMX, every MirrorMaker 2 metric is a gauge. Differences: records and bytes are counted
when consumed (MirrorMaker 2 counts records when the target acknowledges them); the rates are
over the last 30-60 s; the value without a suffix is the window's average. With ``--spark`` the
numbers are the workers' as they last sent them (every 5 s), and ours carry a ``worker`` label.
"""

from __future__ import annotations

import time
from typing import Callable, Dict, Iterable, List, Tuple

RATE_WINDOW_S = 30.0
SOURCE = "kafka_connect_mirror_mirrorsourceconnector_"
CHECKPOINT = "kafka_connect_mirror_mirrorcheckpointconnector_"


class Rates:
    """A counter's rate per second over the last 30-60 s, from its values at each scrape."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._samples: Dict[Tuple, List[Tuple[float, float]]] = {}

    def rate(self, key: Tuple, value: float) -> float:
        now = self._clock()
        samples = self._samples.setdefault(key, [])
        if samples and value < samples[-1][1]:
            samples.clear()  # the flow started again: its counters too
        samples.append((now, value))
        while len(samples) > 2 and now - samples[1][0] >= RATE_WINDOW_S:
            samples.pop(0)
        first_time, first_value = samples[0]
        return (value - first_value) / (now - first_time) if now > first_time else 0.0


class DedicatedMetrics:
    """The collector of the dedicated mode's ops endpoint (prometheus_client's protocol)."""

    def __init__(self, supervisor, clock: Callable[[], float] = time.time) -> None:
        self._supervisor = supervisor
        self._clock = clock
        self._rates = Rates()

    def _metrics(self) -> Iterable:
        """(flow, its metrics, its streams running now or None for heartbeats only) for every
        pair of this node. The metrics are a MirrorMetrics, or with ``--spark`` the workers'
        (``spark.metrics.WorkerMetrics``, which reads the same numbers back)."""
        for runner in self._supervisor.runners:
            current = runner.current
            if current is not None:
                metrics, tasks = current.metrics()
                if metrics is not None:
                    yield runner.flow, metrics, tasks
        for emitter in self._supervisor.heartbeats:
            yield emitter.flow, emitter.metrics, None

    def collect(self):
        from prometheus_client.core import GaugeMetricFamily, Metric

        merged: Dict[str, Metric] = {}
        for flow, metrics, _tasks in self._metrics():
            for family in metrics.collect():
                out = merged.get(family.name)
                if out is None:
                    out = merged[family.name] = Metric(family.name, family.documentation, family.type)
                for sample in family.samples:
                    out.add_sample(sample.name, {"source": flow.source, "target": flow.target, **sample.labels},
                                   sample.value, sample.timestamp, sample.exemplar)
        yield from merged.values()
        yield from self._mirror_maker_2(GaugeMetricFamily)

    def _mirror_maker_2(self, Gauge):
        now = self._clock()
        labels = ["source", "target", "topic", "partition"]
        help_texts = {"record_count": "Records mirrored (counted when consumed)",
                      "record_rate": "Records mirrored per second", "byte_count": "Value bytes mirrored",
                      "byte_rate": "Value bytes mirrored per second",
                      "record_age_ms": "Age of records when consumed",
                      "replication_latency_ms": "Age of records when the target acknowledged them"}
        source = {}
        for name, text in help_texts.items():
            suffixes = ("", "_min", "_max", "_avg") if name.endswith("_ms") else ("",)
            for suffix in suffixes:
                source[name + suffix] = Gauge(SOURCE + name + suffix, f"{text} (MirrorMaker 2 {name}{suffix})",
                                              labels=labels)
        checkpoint = {suffix: Gauge(f"{CHECKPOINT}checkpoint_latency_ms{suffix}", "Checkpoint made to acknowledged "
                                    f"(MirrorMaker 2 checkpoint-latency-ms{suffix})",
                                    labels=["source", "target", "group", "topic", "partition"])
                      for suffix in ("", "_min", "_max", "_avg")}
        lag = Gauge("kafka_consumer_fetch_manager_records_lag", "Records behind the source's high watermark",
                    labels=["clientid", "topic", "partition"])
        worker = _ConnectFamilies(Gauge)
        connectors, tasks = 0, 0
        for flow, metrics, running in self._metrics():
            options = flow.config.replication
            connectors += int(options.emit_heartbeats)
            if running is None:
                continue
            connectors += 1 + int(options.emit_checkpoints)
            tasks += running
            remote = metrics.target_topic or (lambda topic: topic)
            for tp, records, nbytes, partition_lag, ages, latencies in metrics.partition_values(now):
                values = [flow.source, flow.target, remote(tp.topic), str(tp.partition)]
                source["record_count"].add_metric(values, records)
                source["byte_count"].add_metric(values, nbytes)
                source["record_rate"].add_metric(values, self._rates.rate((flow.name, tp, "r"), records))
                source["byte_rate"].add_metric(values, self._rates.rate((flow.name, tp, "b"), nbytes))
                for name, window in (("record_age_ms", ages), ("replication_latency_ms", latencies)):
                    if window is not None:
                        low, high, avg = window
                        for suffix, value in (("", avg), ("_min", low), ("_max", high), ("_avg", avg)):
                            source[name + suffix].add_metric(values, value)
                if partition_lag is not None:
                    lag.add_metric([replication_consumer(flow), tp.topic, str(tp.partition)], partition_lag)
            worker.add(flow, metrics.client_values())
            _counts, latencies_by_group = metrics.failover_values(now)
            for group, tp, (low, high, avg) in latencies_by_group:
                values = [flow.source, flow.target, group, remote(tp.topic), str(tp.partition)]
                for suffix, value in (("", avg), ("_min", low), ("_max", high), ("_avg", avg)):
                    checkpoint[suffix].add_metric(values, value)
        yield from source.values()
        yield from checkpoint.values()
        yield lag
        yield from worker.families()
        yield Gauge("kafka_connect_worker_connector_count", "MirrorMaker 2 connectors the flows of this node "
                    "amount to (source, checkpoint and heartbeat connectors)", value=connectors)
        yield Gauge("kafka_connect_worker_task_count", "Streams running on this node (MirrorMaker 2 tasks)",
                    value=tasks)
        yield Gauge("kafka_connect_coordinator_assigned_connectors", "MirrorMaker 2 connectors this node runs "
                    "(every node runs every flow it is given)", value=connectors)
        yield Gauge("kafka_connect_coordinator_assigned_tasks", "Streams this node runs (MirrorMaker 2 tasks)",
                    value=tasks)
        yield Gauge("kafka_connect_worker_rebalance_rebalancing", "1 while a flow of this node is starting, "
                    "or waits for its streams' partitions after a start or a failure", value=self._rebalancing())

    def _rebalancing(self) -> int:
        for runner in self._supervisor.runners:
            if runner.standing_by:
                continue
            if runner.current is None or not runner.snapshot().get("rebalanced"):
                return 1
        return 0


def source_connector(flow) -> str:
    """The flow's MirrorSourceConnector as Strimzi names it, which its dashboards filter on."""
    return f"{flow.source}->{flow.target}.MirrorSourceConnector"


def replication_consumer(flow) -> str:
    """The client.id MirrorSourceTask gives its consumer, quoted as a JMX exporter labels it."""
    return f'"{flow.source}->{flow.target}|{source_connector(flow)}|replication-consumer"'


class _ConnectFamilies:
    """Kafka Connect's worker and client metrics of each flow: one task each (a flow's streams share
    its producer and its commit), labelled as Strimzi's JMX exporter config labels them."""

    def __init__(self, Gauge) -> None:
        task = ["source", "target", "connector", "task"]
        client = ["source", "target", "clientid"]
        self._families = {
            "incoming": Gauge("kafka_consumer_incoming_byte_total", "Bytes the flow's consumers received "
                              "(librdkafka's rx_bytes)", labels=client),
            "outgoing": Gauge("kafka_producer_outgoing_byte_total", "Bytes the flow's producers sent "
                              "(librdkafka's tx_bytes)", labels=client),
            "buffer": Gauge("kafka_producer_buffer_available_bytes", "Room left in the flow's producer "
                            "queues (queue.buffering.max.kbytes)", labels=client),
            "commit": Gauge("kafka_connect_connector_task_offset_commit_avg_time_ms", "The flow's average "
                            "flush-then-commit time", labels=task),
            "active": Gauge("kafka_connect_source_task_source_record_active_count", "Records the flow sent "
                            "that the target has not acknowledged yet", labels=task),
        }

    def add(self, flow, values) -> None:
        consumer, producer = [flow.source, flow.target, replication_consumer(flow)], \
            [flow.source, flow.target, f'"connector-producer-{source_connector(flow)}-0"']
        task = [flow.source, flow.target, f'"{source_connector(flow)}"', "0"]
        families = self._families
        for name, labels, value in (("incoming", consumer, values.received_bytes),
                                    ("outgoing", producer, values.sent_bytes),
                                    ("buffer", producer, values.buffer_available_bytes),
                                    ("commit", task, values.commit_avg_ms), ("active", task, values.waiting)):
            if value is not None:
                families[name].add_metric(labels, value)

    def families(self):
        return self._families.values()
