"""``connect-mirror-maker --spark`` without a JVM or brokers: the command line, the one SparkContext
sized for every flow, the supervisor running each flow's Spark driver, the election's word reaching
task 0, a worker's failure keeping its class, and the MirrorMaker 2 metrics read from the workers.
Spark jobs run for real in tests/integration/test_spark.py."""

from __future__ import annotations

import re
import signal
import threading
import time

import pytest

from mirror_maker.cli import exit_codes
from mirror_maker.cli.dedicated import invoke
from mirror_maker.dedicated import supervisor as supervisor_module
from mirror_maker.dedicated.flows import RunSettings, plan_flows

from .test_dedicated import NoKeeper
from mirror_maker.dedicated.mm2_file import parse
from mirror_maker.errors import ClientFailed, ConfigError, MirrorFailure, SendFailed
from mirror_maker.spark.control import ControlClient
from mirror_maker.spark.driver import SparkDriver, worker_failure
from mirror_maker.spark.settings import SparkOptions

BASE = {"clusters": "A, B", "A.bootstrap.servers": "127.0.0.1:1", "B.bootstrap.servers": "127.0.0.1:2",
        "A->B.enabled": "true", "B->A.enabled": "true", "emit.heartbeats.enabled": "false"}


def two_flows(**props):
    return plan_flows(parse({**BASE, **{k: str(v) for k, v in props.items()}}))


@pytest.fixture(autouse=True)
def _no_console_log_after_the_test():
    """``invoke`` logs to the stderr pytest captured for its test: not to a later test's."""
    import logging

    yield
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, "_mirror_maker", False):
            root.removeHandler(handler)


def write_file(tmp_path, **props):
    path = tmp_path / "mm2.properties"
    path.write_text("".join(f"{k} = {v}\n" for k, v in {**BASE, **props}.items()))
    return str(path)


# -- the command line ----------------------------------------------------------------------


def test_spark_options_are_checked_before_anything_connects(tmp_path, capsys):
    pytest.importorskip("pyspark")  # the other Pythons' venvs have no spark extra (Makefile)
    path = write_file(tmp_path, **{"A->B.tasks.max": 2, "B->A.tasks.max": 2})
    for args, message in (
            (["--spark.conf", "a=b"], "--spark.conf is only used with --spark"),
            (["--spark", "--spark.max.restarts", "-1"], "--spark.max.restarts: -1 is negative"),
            (["--spark", "--spark.conf", "novalue"], "--spark.conf: 'novalue' is not key=value"),
            # one context for both flows: local[3] cannot run 2 + 2 tasks at once
            (["--spark", "--spark.master", "local[3]"], "--spark.master local[3] runs 3 task(s) at once but "
                                                        "tasks.max over this node's flows (4 in all) needs 4: "
                                                        "use local[4]")):
        assert invoke([path, *args]) == exit_codes.USAGE, args
        err = capsys.readouterr().err
        errors = [line for line in err.splitlines() if "ERROR" in line]
        assert len(errors) == 1 and message in errors[0], err
        assert "Traceback" not in err


def test_without_pyspark_the_install_command_is_named(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(__import__("sys").modules, "pyspark", None)
    assert invoke([write_file(tmp_path), "--spark"]) == exit_codes.USAGE
    assert "pip install 'kafka-mirror-maker[spark]'" in capsys.readouterr().err


def test_one_spark_context_for_every_enabled_flow_of_this_node(monkeypatch):
    pytest.importorskip("pyspark")
    from mirror_maker.dedicated.on_spark import SparkFlows

    monkeypatch.delenv("PYSPARK_PYTHON", raising=False)
    monkeypatch.delenv("SPARK_LOCAL_IP", raising=False)
    spark = SparkFlows(two_flows(**{"A->B.tasks.max": 3, "B->A.tasks.max": 1}), SparkOptions(), worker_metrics=False)
    assert spark.streams == 4 and spark.runtime.master == "local[4]"
    assert [flow.name for flow in spark.flows] == ["A->B", "B->A"]
    # heartbeats only (no flow enabled into --clusters B): no Spark at all
    only_heartbeats = plan_flows(parse({**BASE, "A->B.enabled": "false", "emit.heartbeats.enabled": "true"}), ["B"])
    assert SparkFlows(only_heartbeats, SparkOptions(), worker_metrics=False).runtime is None


# -- a worker's failure keeps its class ----------------------------------------------------


@pytest.mark.parametrize("name, kind, expected", [
    ("ClientFailed", "fatal", ClientFailed), ("SendFailed", "fatal", SendFailed),
    ("PluginLoadError", "config", ConfigError), ("MirrorMakerError", "fatal", MirrorFailure),
    ("ValueError", "fatal", MirrorFailure), (None, "config", ConfigError), (None, "fatal", MirrorFailure)])
def test_a_worker_s_failure_is_raised_as_the_engine_raised_it(name, kind, expected):
    failure = worker_failure({"t": "failed", "class": name, "kind": kind, "error": "boom"}, 1)
    assert type(failure) is expected or (expected is ConfigError and isinstance(failure, ConfigError))
    assert str(failure) == "worker 1: boom"
    assert supervisor_module.is_fatal(failure) == (expected is not ClientFailed and expected is not MirrorFailure)


# -- the driver of one flow: its job group, its threads, the election's word ---------------


class NoContext:
    """A runtime whose SparkContext is never needed (no job is submitted)."""

    local = True
    master = "local[2]"

    @staticmethod
    def control_address():
        return "127.0.0.1", "127.0.0.1"


def wait_for(condition, timeout_s=10.0):
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_each_flow_s_driver_tells_task_0_whether_this_node_runs_the_singletons():
    flow = two_flows()[0]
    leading = [False]
    driver = SparkDriver(flow.config, NoContext(), 3, name=flow.name, singletons=lambda: leading[0])
    other = SparkDriver(flow.config, NoContext(), 3, name="B->A")
    assert driver.job_group == "kafka-mirror-maker:A->B" and other.job_group == "kafka-mirror-maker:B->A"
    driver.start()
    told, clients = [], []
    try:
        address = ("127.0.0.1", driver._server.port)
        hello = {"worker": 0, "job": 0, "pid": 12345, "host": "h"}
        clients.append(ControlClient(address, driver._token, hello, lambda: None, told.append))
        wait_for(lambda: driver.running() == 1 and any(t.name == "A->B/spark-control-connection"
                                                      for t in threading.enumerate()))
        driver._announce_singletons()
        wait_for(lambda: told == [{"t": "singletons", "on": False}])
        leading[0] = True
        driver._announce_singletons()
        driver._announce_singletons()  # said once per change
        wait_for(lambda: told[-1] == {"t": "singletons", "on": True})
        later = []
        clients.append(ControlClient(address, driver._token, {**hello, "worker": 1}, lambda: None, later.append))
        wait_for(lambda: later == [{"t": "singletons", "on": True}])  # a later worker is told at once
        assert len(told) == 2
    finally:
        for client in clients:
            client.close()
        driver.close()


def test_a_stop_asked_before_the_driver_started_reaches_its_workers():
    flow = two_flows()[0]
    driver = SparkDriver(flow.config, NoContext(), 3, name=flow.name)
    driver.request_stop(signal.SIGTERM)
    driver.start()
    stopped = threading.Event()
    client = ControlClient(("127.0.0.1", driver._server.port), driver._token, {"worker": 0, "job": 0},
                           stopped.set)
    try:
        assert stopped.wait(10)
        assert driver.run() == exit_codes.OK  # no job is submitted once stopping
    finally:
        client.close()
        driver.close()


def test_task_0_runs_the_singletons_only_while_the_driver_says_so(monkeypatch):
    """The worker's side: an elected plan gives the engine a ``singletons`` that follows the
    driver's word; a plan without an election (kafka-mirror-maker --spark) always runs them."""
    from mirror_maker.spark import task
    from mirror_maker.spark.control import ControlServer

    flow = two_flows()[0]
    seen = {}

    def fake_mirror(plan, index, client, stop, singletons):
        seen["singletons"] = singletons
        if singletons is not None:
            wait_for(singletons)  # until the driver says this node leads
        return {"worker": index}

    monkeypatch.setattr(task, "_mirror", fake_mirror)
    server = ControlServer("127.0.0.1", 0, "t", lambda hello, message: None).start()
    try:
        server.announce({"t": "singletons", "on": True})
        elected = task.TaskPlan(flow.config, ("127.0.0.1", server.port), "t", 1, 20, False, elected=True)
        assert task.run_worker(elected, 0, lambda: None) == {"worker": 0}
        assert seen["singletons"]() is True
        plain = task.TaskPlan(flow.config, ("127.0.0.1", server.port), "t", 1, 20, False)
        task.run_worker(plain, 0, lambda: None)
        assert seen["singletons"] is None
    finally:
        server.close()


# -- the supervisor runs each flow's driver ------------------------------------------------


class FakeElection:
    def __init__(self, *args):
        self.leading = True

    def start(self):
        return self

    def stop(self):
        self.leading = False

    def join(self, timeout_s):
        pass


class FakeRun:
    """A flow's Spark driver: runs until stopped, or fails with what the script says."""

    def __init__(self, spark, flow, singletons):
        self.flow, self.singletons = flow, singletons
        self.stopped = threading.Event()
        self.failure = spark.failures.get(flow.name, []).pop(0) if spark.failures.get(flow.name) else None
        spark.runs.append(self)

    def run(self):
        if self.failure is not None:
            return self.failure
        self.stopped.wait(30)
        return None

    def request_stop(self, signum=None):
        self.stopped.set()

    def snapshot(self):
        return {"records": 0, "bytes": 0, "acked": 0, "lag": 0, "dropped": 0, "filtered": 0, "assigned": 1,
                "queued": 0, "rebalanced": False, "at_end": True}

    def readiness(self):
        return True, "ready"

    def metrics(self):
        return None, 1


class FakeSpark:
    def __init__(self, failures):
        self.failures = failures
        self.runs, self.events = [], []

    def start(self):
        self.events.append("start")

    def attempt(self, flow, singletons):
        return FakeRun(self, flow, singletons)

    @staticmethod
    def stop_bound_s(flow):
        return 1.0

    def close(self):
        self.events.append("close")


@pytest.fixture
def offline(monkeypatch):
    """Flows that need no broker: no election consumer, no takeover, a short backoff."""
    monkeypatch.setattr(supervisor_module, "SingletonElection", FakeElection)
    monkeypatch.setattr(supervisor_module, "take_over", lambda flow: {})
    monkeypatch.setattr(supervisor_module, "ConnectOffsetsKeeper", NoKeeper)
    monkeypatch.setattr(supervisor_module, "BACKOFF_S", 0.01)


def run_supervisor(spark, flows, until):
    settings = RunSettings(metrics_port=None, metrics_bind="127.0.0.1", status_interval_ms=0,
                           shutdown_timeout_ms=1000)
    supervisor = supervisor_module.Supervisor(flows, settings, spark=spark)
    result = {}
    thread = threading.Thread(target=lambda: result.update(status=supervisor.run()))
    thread.start()
    try:
        wait_for(lambda: until(supervisor))
    finally:
        supervisor.request_stop(signal.SIGTERM)
        thread.join(30)
    return supervisor, result["status"]


def test_a_flow_whose_spark_job_failed_is_retried_while_the_other_goes_on(offline):
    spark = FakeSpark({"A->B": [ClientFailed("worker 0: authentication failed")]})
    supervisor, status = run_supervisor(spark, two_flows(), lambda s: len(spark.runs) == 3)
    assert status == exit_codes.SIGTERM and spark.events == ["start", "close"]
    assert sorted(run.flow.name for run in spark.runs) == ["A->B", "A->B", "B->A"]
    assert [runner.restarts for runner in supervisor.runners] == [1, 0]
    assert all(run.stopped.is_set() for run in spark.runs if run.failure is None)  # the stop reached each
    assert all(run.singletons() is False for run in spark.runs)  # the election stopped: no longer leads


def test_a_fatal_failure_in_a_worker_stops_every_flow_and_exits_255(offline):
    spark = FakeSpark({"B->A": [worker_failure({"class": "SendFailed", "kind": "fatal", "error": "too large"}, 0)]})
    supervisor, status = run_supervisor(spark, two_flows(), lambda s: s.stopping)
    assert status == exit_codes.FATAL and isinstance(supervisor.failure[1], SendFailed)
    assert len(spark.runs) == 2 and spark.events == ["start", "close"]


# -- MirrorMaker 2's metrics from the workers' ---------------------------------------------


def worker_text(partition, records, checkpoints=False):
    from mirror_maker.ops.metrics import MirrorMetrics
    from mirror_maker.records import TopicPartition
    from mirror_maker.spark.metrics import render

    metrics = MirrorMetrics(clock=lambda: 1000.0)
    metrics.target_topic = lambda topic: f"A.{topic}"
    metrics.consumed(TopicPartition("orders", partition), records, records * 10, 5.0, 50.0, 20.0 * records, records)
    metrics.set_lag(TopicPartition("orders", partition), 7)
    if checkpoints:
        metrics.checkpoint_written("app", TopicPartition("orders", partition), 12.0)
    metrics.client_statistics({"name": f"w{partition}#consumer-1", "type": "consumer", "rx_bytes": 1000 * records})
    metrics.client_statistics({"name": f"w{partition}#producer-2", "client_id": "producer-1", "type": "producer",
                               "tx_bytes": 100 * records, "msg_size": 10, "msg_size_max": 1010})
    metrics.committed(0.004)
    return render(metrics)


def test_mirror_maker_2_metric_names_come_from_the_workers_metrics(offline):
    from prometheus_client import CollectorRegistry, generate_latest

    from mirror_maker.dedicated.metrics import DedicatedMetrics
    from mirror_maker.spark.metrics import WorkerMetrics

    workers = WorkerMetrics(running=lambda: 2, restarts=lambda: 0)
    workers.update(0, worker_text(0, 5, checkpoints=True))
    workers.update(1, worker_text(1, 7))
    workers.update(2, worker_text(1, 1))  # a partition that moved between workers: counted once each
    values = {tp.partition: (records, nbytes, lag) for tp, records, nbytes, lag, _a, _l in workers.partition_values()}
    assert values == {0: (5, 50, 7), 1: (8, 80, 7)}
    (syncs, checkpoints, heartbeats), latencies = workers.failover_values()
    assert checkpoints == 1 and [(group, tp.partition) for group, tp, _w in latencies] == [("app", 0)]

    class Run:
        def metrics(self):
            return workers, 2

    class Runner:
        flow = two_flows()[0]
        current, standing_by = Run(), False

        def snapshot(self):
            return {"rebalanced": True}

    class Supervisor:
        runners, heartbeats = [Runner()], []

    registry = CollectorRegistry(auto_describe=False)
    registry.register(DedicatedMetrics(Supervisor()))
    text = generate_latest(registry).decode()
    assert re.search(r'kafka_connect_mirror_mirrorsourceconnector_record_count\{partition="1",source="A",'
                     r'target="B",topic="A.orders"\} 8.0', text), text
    assert re.search(r'kafka_connect_mirror_mirrorsourceconnector_record_age_ms_max\{partition="0",.*\} 50.0', text)
    assert re.search(r'kafka_connect_mirror_mirrorcheckpointconnector_checkpoint_latency_ms_max\{group="app",'
                     r'partition="0",source="A",target="B",topic="A.orders"\}', text), text  # the remote topic
    assert "kafka_connect_worker_task_count 2.0" in text
    # Kafka Connect's own metrics of the flow, labelled as Strimzi's dashboard filters them.
    assert 'kafka_consumer_incoming_byte_total{clientid="\\"A->B|A->B.MirrorSourceConnector|replication-consumer' \
           '\\"",source="A",target="B"} 13000.0' in text, text
    assert ('kafka_producer_outgoing_byte_total{clientid="\\"connector-producer-A->B.MirrorSourceConnector-0\\"",'
            'source="A",target="B"} 1300.0') in text
    assert 'kafka_producer_buffer_available_bytes{clientid="\\"connector-producer-A->B.MirrorSourceConnector-0' \
           '\\"",source="A",target="B"} 3000.0' in text
    assert re.search(r'kafka_connect_connector_task_offset_commit_avg_time_ms\{connector="\\"A->B.MirrorSource'
                     r'Connector\\"",source="A",target="B",task="0"\} 4.0', text)
    assert "kafka_connect_coordinator_assigned_tasks 2.0" in text
    assert "kafka_connect_worker_rebalance_rebalancing 0.0" in text
    assert re.search(r'kafka_consumer_fetch_manager_records_lag\{clientid="\\"A->B\|A->B.MirrorSourceConnector\|'
                     r'replication-consumer\\"",partition="0",topic="orders"\} 7.0', text)
    assert re.search(r'mirrormaker_record_count_total\{partition="0",source="A",target="B",target_topic="A.orders",'
                     r'topic="orders",worker="0"\} 5.0', text), text
    assert 'mirrormaker_spark_workers{source="A",target="B"} 2.0' in text
