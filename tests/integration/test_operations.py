"""Operations: the metrics endpoint, health checks, the status line, bounded runs, sd_notify."""

import signal
import socket
import urllib.error
import urllib.request

from mirror_maker.embedded import free_port

from .harness import MirrorProcess, make_records, mirror_args, wait_until


def scrape(port: int, path: str = "/metrics"):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
    except OSError:
        return None, ""


def metric_sum(text: str, name: str, topic: str = None) -> float:
    total = 0.0
    for line in text.splitlines():
        if line.startswith(name + "{") or line.startswith(name + " "):
            if topic is None or f'topic="{topic}"' in line:
                total += float(line.rsplit(" ", 1)[1])
    return total


def test_metrics_endpoint_counts_what_was_mirrored(tmp_path, source, target, files):
    topic = source.create_topic("metrics", partitions=3)
    records = make_records(500, size=100)
    source.seed(topic, records)
    port = free_port()
    mirror = MirrorProcess(mirror_args(files, topic, "--metrics.port", str(port), "--metrics.bind", "127.0.0.1",
                                       "--status.interval.ms", "500", "--offset.commit.interval.ms", "300"),
                           tmp_path / "m.log")
    try:
        wait_until(lambda: scrape(port, "/healthz")[0] == 200, 30, "/healthz")
        target.read_all(topic, expected=500, timeout_s=60)
        wait_until(lambda: metric_sum(scrape(port)[1], "mirrormaker_records_acknowledged_total") == 500,
                   30, "the acknowledged count to reach 500")
        status, text = scrape(port)
        assert status == 200
        assert metric_sum(text, "mirrormaker_record_count_total", topic) == 500
        assert metric_sum(text, "mirrormaker_byte_count_total", topic) == sum(len(r.value) for r in records)
        assert metric_sum(text, "mirrormaker_dropped_messages_total") == 0
        assert metric_sum(text, "mirrormaker_rebalances_total") >= 1
        assert metric_sum(text, "mirrormaker_assigned_partitions") == 3
        assert "mirrormaker_record_age_ms_avg{" in text
        # age + librdkafka's produce-to-acknowledgement time: from its statistics, every 5 s
        wait_until(lambda: "mirrormaker_replication_latency_ms_max{" in scrape(port)[1], 30,
                   "the replication latency")
        assert 'mirrormaker_producer_queue_depth 0.0' in text
        wait_until(lambda: metric_sum(scrape(port)[1], "mirrormaker_commit_latency_seconds_count") >= 1, 30,
                   "a commit in the metrics")
        wait_until(lambda: "mirrormaker_consumer_lag{" in scrape(port)[1]
                   and metric_sum(scrape(port)[1], "mirrormaker_consumer_lag", topic) == 0, 30, "lag 0")
        ready = scrape(port, "/ready")
        assert ready[0] == 200 and "3 partitions" in ready[1]
        mirror.wait_for_log("Status:", 10)
        line = [l for l in mirror.log().splitlines() if "Status:" in l][-1]
        assert "records/s" in line and "MB/s" in line and "lag" in line and "dropped 0" in line
    finally:
        assert mirror.stop(signal.SIGTERM) == 143, mirror.log()


def test_ready_is_503_before_partitions_are_assigned(tmp_path, source, files):
    port = free_port()
    mirror = MirrorProcess(mirror_args(files, "no-such-topic-.*", "--metrics.port", str(port),
                                       "--metrics.bind", "127.0.0.1"), tmp_path / "m.log")
    try:
        wait_until(lambda: scrape(port, "/healthz")[0] == 200, 30, "/healthz")
        status, body = scrape(port, "/ready")
        assert status == 503 and "no partitions" in body
    finally:
        assert mirror.stop(signal.SIGTERM) == 143, mirror.log()


def test_bounded_run_exits_0_when_caught_up(tmp_path, source, target, files):
    topic = source.create_topic("bounded", partitions=4)
    source.seed(topic, make_records(1000))
    mirror = MirrorProcess(mirror_args(files, topic, "--exit.when.caught.up", "--num.streams", "2"),
                           tmp_path / "m.log")
    assert mirror.wait(120) == 0, mirror.log()
    assert "Caught up: 1000 records" in mirror.log()
    assert len(target.read_all(topic, expected=1000, timeout_s=30)) == 1000
    assert sum(source.committed(files.group, topic).values()) == 1000


def test_sd_notify_ready_and_stopping(tmp_path, source, files):
    topic = source.create_topic("notify")
    path = str(tmp_path / "notify.sock")
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(path)
        sock.settimeout(30)
        mirror = MirrorProcess(mirror_args(files, topic), tmp_path / "m.log", env={"NOTIFY_SOCKET": path})
        try:
            assert sock.recv(100) == b"READY=1"
            mirror.process.send_signal(signal.SIGTERM)
            assert sock.recv(100) == b"STOPPING=1"
        finally:
            assert mirror.stop(signal.SIGTERM) == 143, mirror.log()
