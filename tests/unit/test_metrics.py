"""Metric bookkeeping, the Prometheus exposition, the dashboard, the status line and sd_notify."""

import json
import re
import socket
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
from prometheus_client import CollectorRegistry, generate_latest

from mirror_maker.ops.metrics import MirrorMetrics, WindowStat, record_ages
from mirror_maker.ops.notify import notify
from mirror_maker.records import TopicPartition
from mirror_maker.ops.status import StatusReporter, combine, snapshot

ROOT = Path(__file__).resolve().parents[2]
TP = TopicPartition("orders", 2)


def exposition(metrics: MirrorMetrics) -> str:
    registry = CollectorRegistry(auto_describe=False)
    registry.register(metrics)
    return generate_latest(registry).decode()


def test_window_stat_keeps_two_windows():
    stat = WindowStat(window_s=10)
    stat.record_many(5, 9, 14, 2, now=0)
    stat.record_many(1, 1, 1, 1, now=12)     # second window
    assert stat.values(now=15) == (1, 9, 5.0)
    assert stat.values(now=25) == (1, 1, 1.0)  # the first window dropped out
    assert stat.values(now=60) is None


def test_a_checkpoint_latency_series_reads_nan_once_its_group_stopped_moving():
    """Checkpoints are written only when a group moves: its series stays, as MirrorMaker 2's does."""
    from mirror_maker.spark.metrics import _combined

    now = [1000.0]
    metrics = MirrorMetrics(clock=lambda: now[0])
    metrics.checkpoint_written("app", TopicPartition("orders", 0), 12.0)
    _counts, [(group, tp, values)] = metrics.failover_values(now[0])
    assert (group, tp.partition, values) == ("app", 0, (12.0, 12.0, 12.0))
    now[0] += 61.0
    _counts, [(_group, _tp, values)] = metrics.failover_values(now[0])
    assert all(value != value for value in values)  # NaN
    # Spark's combination of workers: a NaN worker does not hide another's value.
    assert _combined({"min": [float("nan"), 3.0], "max": [float("nan"), 9.0], "avg": [float("nan"), 5.0]}) == \
        (3.0, 9.0, 5.0)
    assert all(value != value for value in _combined({"min": [float("nan")], "max": [float("nan")],
                                                      "avg": [float("nan")]}))


def test_exposition_has_the_mirrormaker_metrics():
    now = [1000.0]
    metrics = MirrorMetrics(clock=lambda: now[0])
    metrics.consumed(TP, 3, 300, 10.0, 30.0, 60.0, 3)
    metrics.acknowledged = lambda: 1
    assert "mirrormaker_replication_latency_ms_max{" not in exposition(metrics)  # no delay known yet
    metrics.ack_delay_ms = (4.0, 20.0, 8.0)  # librdkafka's produce-to-acknowledgement times
    metrics.dropped_one()
    metrics.committed(0.02)
    metrics.rebalanced("assigned")
    metrics.set_lag(TP, 7)
    text = exposition(metrics)
    labels = 'partition="2",topic="orders"'
    assert f"mirrormaker_record_count_total{{{labels}}} 3.0" in text
    assert f"mirrormaker_byte_count_total{{{labels}}} 300.0" in text
    assert "mirrormaker_records_acknowledged_total 1.0" in text
    assert f"mirrormaker_consumer_lag{{{labels}}} 7.0" in text
    assert f"mirrormaker_record_age_ms_avg{{{labels}}} 20.0" in text
    assert f"mirrormaker_replication_latency_ms_min{{{labels}}} 14.0" in text  # age + delay
    assert f"mirrormaker_replication_latency_ms_max{{{labels}}} 50.0" in text
    assert f"mirrormaker_replication_latency_ms_avg{{{labels}}} 28.0" in text
    assert "mirrormaker_dropped_messages_total 1.0" in text
    assert 'mirrormaker_commit_latency_seconds_bucket{le="0.025"} 1.0' in text
    assert 'mirrormaker_commit_latency_seconds_bucket{le="0.01"} 0.0' in text
    assert "mirrormaker_commit_latency_seconds_count 1.0" in text
    assert 'mirrormaker_rebalances_total{event="assigned"} 1.0' in text


def test_grafana_dashboard_uses_only_exported_metrics():
    exported = set(re.findall(r"^# TYPE (\w+)", exposition(MirrorMetrics()), re.M))
    exported |= {f"{name}_total" for name in exported} | {f"{name}_bucket" for name in exported}
    dashboard = json.loads((ROOT / "config" / "grafana-dashboard.json").read_text())
    used = {name for panel in dashboard["panels"] for target in panel["targets"]
            for name in re.findall(r"\b(mirrormaker_\w+)", target["expr"])}
    assert used and used <= exported, used - exported


def test_grafana_dashboard_groups_only_by_labels_its_metrics_have():
    """A ``sum by (topic)`` of a metric without that label draws one unlabelled line."""
    metrics = MirrorMetrics(clock=lambda: 1000.0)
    metrics.consumed(TP, 3, 300, 10.0, 30.0, 60.0, 3)
    metrics.ack_delay_ms = (4.0, 20.0, 8.0)
    metrics.set_lag(TP, 7)
    metrics.rebalanced("assigned")
    metrics.committed(0.02)
    labels = {}
    for name, names in re.findall(r"^(mirrormaker_\w+?)(?:\{([^}]*)\})? ", exposition(metrics), re.M):
        labels.setdefault(name, set()).update(re.findall(r"(\w+)=", names))
    dashboard = json.loads((ROOT / "config" / "grafana-dashboard.json").read_text())
    for target in (t for panel in dashboard["panels"] for t in panel["targets"]):
        for grouped, inner in re.findall(r"by \(([\w, ]+)\) \((.*)\)", target["expr"]):
            metric = re.search(r"\b(mirrormaker_\w+)", inner).group(1)
            wanted = {label.strip() for label in grouped.split(",")}
            assert wanted <= labels[metric], f"{target['expr']}: {metric} has {sorted(labels[metric])}"


def thread(assigned, at_end, rebalanced=True):
    return SimpleNamespace(assigned=set(assigned), at_end=set(at_end), rebalanced=rebalanced)


def reporter(metrics, threads, interval=30, **kwargs):
    return StatusReporter(lambda: snapshot(metrics, threads), interval, **kwargs)


def test_caught_up_needs_every_assigned_partition_at_its_end():
    a, b = TopicPartition("t", 0), TopicPartition("t", 1)
    metrics = MirrorMetrics()
    assert not reporter(metrics, [thread([a], [])]).caught_up()
    assert reporter(metrics, [thread([a], [a]), thread([b], [b])]).caught_up()
    assert not reporter(metrics, [thread([a], [a]), thread([], [], rebalanced=False)]).caught_up()
    assert reporter(metrics, [thread([a], [a]), thread([], [])]).caught_up()
    assert not reporter(metrics, [thread([], [])]).caught_up()


def test_combined_snapshots_of_spark_workers():
    a, b = TopicPartition("t", 0), TopicPartition("t", 1)
    metrics = MirrorMetrics()
    done = snapshot(metrics, [thread([a], [a])])
    idle = snapshot(metrics, [thread([], [])])
    behind = snapshot(metrics, [thread([b], [])])
    both = combine([done, idle])
    assert both["assigned"] == 1 and both["rebalanced"] and both["at_end"]
    assert not combine([done, behind])["at_end"]
    assert not combine([])["rebalanced"]
    assert combine([done, behind])["assigned"] == 2


def test_status_line(caplog):
    now = [0.0]
    metrics = MirrorMetrics()
    status = reporter(metrics, [thread([TP], [])], 10, clock=lambda: now[0])
    metrics.consumed(TP, 500, 2_000_000, 0, 0, 0, 0)
    metrics.set_lag(TP, 42)
    now[0] = 5.0
    status.tick()
    assert "Status:" not in caplog.text
    now[0] = 10.0
    status.tick()
    assert "Status: 50.0 records/s, 0.20 MB/s, lag 42, dropped 0, 1 partitions assigned" in caplog.text


def test_the_status_line_says_how_long_the_target_has_been_unreachable(caplog):
    from confluent_kafka import KafkaError

    from mirror_maker.clients.client_errors import ClientErrors

    metrics = MirrorMetrics()
    errors = metrics.cluster_errors["target"] = ClientErrors("target", "t:9092", state=None)
    status = reporter(metrics, [thread([TP], [])], 0)
    status.log_line()
    assert "unreachable" not in caplog.text
    errors(KafkaError(KafkaError._ALL_BROKERS_DOWN, "1/1 brokers are down"))
    assert "ERROR" in caplog.text and "Cannot reach the target cluster at t:9092" in caplog.text
    status.log_line()
    assert "waiting for the target, the target cluster unreachable for 0 s" in caplog.text
    assert combine([snapshot(metrics, []), {}])["unreachable"].keys() == {"target"}  # a Spark driver's line too
    errors.brokers_seen({"brokers": {"t:9092/1": {"state": "DOWN"}}})
    assert errors.unreachable_for() is not None
    errors.brokers_seen({"brokers": {"t:9092/1": {"state": "UP"}}})
    assert errors.unreachable_for() is None and "The target cluster at t:9092 is reachable again" in caplog.text


def test_notify_sends_a_datagram(tmp_path, monkeypatch):
    path = str(tmp_path / "notify.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(path)
        monkeypatch.setenv("NOTIFY_SOCKET", path)
        assert notify("READY=1")
        assert sock.recv(64) == b"READY=1"


def test_notify_abstract_socket(monkeypatch):
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind("\0mirror-maker-test-notify")
        monkeypatch.setenv("NOTIFY_SOCKET", "@mirror-maker-test-notify")
        assert notify("STOPPING=1")
        assert sock.recv(64) == b"STOPPING=1"


def test_notify_without_socket_does_nothing(monkeypatch):
    monkeypatch.delenv("NOTIFY_SOCKET", raising=False)
    assert notify("READY=1") is False


def test_a_replication_policy_adds_the_target_topic_label():
    metrics = MirrorMetrics()
    metrics.consumed(TP, 3, 300, 10.0, 30.0, 60.0, 3)
    assert "target_topic" not in exposition(metrics)  # MirrorMaker v1's labels without a policy
    metrics.target_topic = lambda topic: f"a.{topic}"
    assert 'mirrormaker_record_count_total{partition="2",target_topic="a.orders",topic="orders"} 3.0' in \
        exposition(metrics)


def test_a_busy_metrics_port_is_one_line_naming_it():
    from mirror_maker.errors import ConfigError
    from mirror_maker.ops.endpoint import OpsServer

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ConfigError, match=f"--metrics.port {port} \\(--metrics.bind 127.0.0.1\\): "
                                              "cannot listen there: Address already in use"):
            OpsServer("127.0.0.1", port, MirrorMetrics(), lambda: (True, "ok"))


def test_records_that_follow_each_other_are_aged_from_their_first_and_last_times_each_at_the_mean():
    now_ms = 10_000.0
    assert record_ages(6_000, 8_000, 4, now_ms) == (2_000.0, 4_000.0, 12_000.0, 4)
    # Without a usable time (or without records), nothing is aged.
    assert record_ages(-1, -1, 4, now_ms) == (0.0, 0.0, 0.0, 0)
    assert record_ages(6_000, 8_000, 0, now_ms) == (0.0, 0.0, 0.0, 0)


def test_a_clients_statistics_give_the_bytes_in_and_out_and_the_producer_buffer_left():
    """Read from librdkafka's own statistics documents (a consumer's holds every partition: its
    head and tail are read, not the whole), summed over handles, a replaced one's count kept."""
    import confluent_kafka

    documents = []
    for make in (confluent_kafka.Consumer, confluent_kafka.Producer):
        conf = {"bootstrap.servers": "127.0.0.1:1", "log_level": 0, "statistics.interval.ms": 100,
                "stats_cb": documents.append, "client.id": "producer-1"}
        client = make({**conf, "group.id": "g"} if make is confluent_kafka.Consumer else conf)
        deadline = time.monotonic() + 10
        while len(documents) < 1 + (make is confluent_kafka.Producer) and time.monotonic() < deadline:
            client.poll(0.05)
        client.close()
    consumer_text, producer_text = documents[0], documents[-1]
    metrics = MirrorMetrics()
    assert metrics.client_values().received_bytes is None  # nothing known yet: no series
    metrics.client_statistics_text(consumer_text.replace('"rx_bytes":0', '"rx_bytes":1500'))
    metrics.client_statistics_text(producer_text.replace('"tx_bytes":0', '"tx_bytes":700'))
    values = metrics.client_values()
    assert (values.received_bytes, values.sent_bytes) == (1500, 700)
    assert values.buffer_available_bytes == 1073741824  # librdkafka's default queue, empty
    metrics.client_statistics({"name": "rdkafka#producer-9", "client_id": "producer-1", "type": "producer",
                               "tx_bytes": 5, "msg_size": 24, "msg_size_max": 1024})  # a new handle in its place
    values = metrics.client_values()
    assert values.sent_bytes == 705 and values.buffer_available_bytes == 1000
    text = exposition(metrics)
    assert "mirrormaker_network_received_bytes_total 1500.0" in text
    assert "mirrormaker_producer_buffer_available_bytes 1000.0" in text
