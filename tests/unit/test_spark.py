"""Spark mode's pure parts: settings, which plugin modules are shipped, the control channel,
Spark error lines, and the command line. The Spark job itself is tested for real in
tests/integration/test_spark.py."""

from __future__ import annotations

import re
import socket
import sys
import threading
import zipfile
from types import SimpleNamespace

import pytest

from mirror_maker.cli import command as cli, exit_codes
from mirror_maker.errors import ConfigError
from mirror_maker.spark import driver
from mirror_maker.spark.control import ControlClient, ControlServer
from mirror_maker.spark.settings import (FORCED, SparkOptions, local_slots, plan, submitted_notes,
                                         worker_python)
from mirror_maker.spark.shipping import check_py_files, modules_to_ship, pack

from .test_cli import base_args

# -- settings ------------------------------------------------------------------------------


def test_default_master_gives_every_stream_a_slot():
    spark = plan(SparkOptions(), streams=3)
    assert spark.master == "local[3]" and spark.local
    assert spark.conf["spark.driver.host"] == "127.0.0.1" and spark.conf["spark.ui.enabled"] == "false"


@pytest.mark.parametrize("master, slots", [("local", 1), ("local[4]", 4), ("local[2,3]", 2),
                                          ("local[*]", None), ("spark://h:7077", None)])
def test_local_slots(master, slots):
    assert local_slots(master) == slots


@pytest.mark.parametrize("master", ["local[1]", "local", "local[*]"])
def test_a_local_master_with_too_few_slots_is_refused_before_starting(master):
    with pytest.raises(ConfigError, match=r"runs \d+ task\(s\) at once but --num.streams 3 needs 3"):
        plan(SparkOptions(master=master), streams=3, cpu_count=2)


def test_forced_settings_win_and_each_disagreement_is_a_warning():
    options = SparkOptions(master="spark://h:7077", conf=("spark.speculation=true", "spark.executor.memory=2g",
                                                          "spark.dynamicAllocation.enabled=false"))
    spark = plan(options, streams=2)
    assert all(spark.conf[key] == value for key, (value, _why) in FORCED.items())
    assert spark.conf["spark.executor.memory"] == "2g" and not spark.local
    assert "spark.driver.host" not in spark.conf
    assert [level for level, _ in spark.notes] == ["WARNING"]
    assert "spark.speculation=true is overridden with false" in spark.notes[0][1]


def test_user_conf_overrides_defaults():
    spark = plan(SparkOptions(conf=("spark.ui.enabled=true",
                                    "spark.scheduler.barrier.maxConcurrentTasksCheck.maxFailures=3")), 1)
    assert spark.conf["spark.ui.enabled"] == "true"
    assert spark.conf["spark.scheduler.barrier.maxConcurrentTasksCheck.maxFailures"] == "3"


def test_spark_submit_settings_win_over_defaults_but_not_over_forced_ones():
    spark = plan(SparkOptions(conf=("spark.ui.enabled=true",)), 2, submitted_master="spark://h:7077")
    assert spark.master == "spark://h:7077"
    assert "spark.ui.enabled" not in spark.defaulted and "spark.speculation" not in spark.defaulted
    assert "spark.app.name" in spark.defaulted
    notes = submitted_notes({"spark.speculation": "true", "spark.dynamicAllocation.enabled": "false"}, {})
    assert notes == [("WARNING", "spark-submit's spark.speculation=true is overridden with false: "
                                 "a speculative copy of a stream would consume the same partitions")]
    assert submitted_notes({"spark.speculation": "true"}, {"spark.speculation": "x"}) == []


@pytest.mark.parametrize("item", ["novalue", "=x", ""])
def test_bad_spark_conf_is_named(item):
    with pytest.raises(ConfigError, match="--spark.conf"):
        plan(SparkOptions(conf=(item,)), 1)


def test_local_workers_run_the_tools_python_and_a_different_one_is_a_warning():
    assert worker_python(True, {}, sys.executable) == (sys.executable, None)
    python, note = worker_python(True, {"PYSPARK_PYTHON": "/usr/bin/python3.9"}, sys.executable)
    assert python == sys.executable and "is overridden" in note
    assert worker_python(False, {"PYSPARK_PYTHON": "./environment/bin/python"}, sys.executable) == (None, None)
    python, note = worker_python(False, {}, sys.executable)
    assert python is None and "PYSPARK_PYTHON is not set" in note


# -- shipping ------------------------------------------------------------------------------


def test_only_modules_the_executors_cannot_import_are_shipped(tmp_path):
    import click

    (tmp_path / "acme.py").write_text("X = 1\n")
    package = tmp_path / "corp" / "handlers"
    package.mkdir(parents=True)
    (package / "filters.py").write_text("Y = 2\n")
    modules = {
        "acme": SimpleNamespace(__file__=str(tmp_path / "acme.py")),
        "corp": SimpleNamespace(__file__=None, __path__=[str(tmp_path / "corp")]),  # namespace
        "click": click,  # installed in site-packages
        "mirror_maker": sys.modules["mirror_maker"],
    }
    shipped = modules_to_ship(["acme.Handler", "corp.handlers.filters:Filter", "click.Command",
                               "mirror_maker.handlers.DefaultMessageHandler", None, "acme.Other"], modules)
    assert shipped == [("acme", str(tmp_path / "acme.py")), ("corp", str(tmp_path / "corp"))]
    assert pack("acme", str(tmp_path / "acme.py"), str(tmp_path)) == str(tmp_path / "acme.py")
    archive = pack("corp", str(tmp_path / "corp"), str(tmp_path))
    names = set(zipfile.ZipFile(archive).namelist())
    assert names == {"corp/__init__.py", "corp/handlers/__init__.py", "corp/handlers/filters.py"}


def test_py_files_must_exist_and_be_python(tmp_path):
    (tmp_path / "deps.zip").write_bytes(b"")
    (tmp_path / "notes.txt").write_text("")
    assert check_py_files([str(tmp_path / "deps.zip")]) == [str(tmp_path / "deps.zip")]
    with pytest.raises(ConfigError, match="is not a file"):
        check_py_files([str(tmp_path / "missing.py")])
    with pytest.raises(ConfigError, match="not a .py, .zip or .egg"):
        check_py_files([str(tmp_path / "notes.txt")])


# -- control channel -----------------------------------------------------------------------


class Inbox:
    def __init__(self):
        self.messages = []
        self.changed = threading.Condition()

    def __call__(self, hello, message):
        with self.changed:
            self.messages.append((hello.get("worker"), message.get("t")))
            self.changed.notify_all()

    def wait_for(self, item, timeout_s=10.0):
        with self.changed:
            assert self.changed.wait_for(lambda: item in self.messages, timeout_s), self.messages


@pytest.fixture
def server():
    inbox = Inbox()
    control = ControlServer("127.0.0.1", 0, "secret", inbox).start()
    control.inbox = inbox
    yield control
    control.close()


def test_workers_report_and_a_stop_reaches_connected_and_later_workers(server):
    stops = [threading.Event(), threading.Event()]
    first = ControlClient(("127.0.0.1", server.port), "secret", {"worker": 0}, stops[0].set)
    server.inbox.wait_for((0, "hello"))
    assert first.send({"t": "status", "snapshot": {}})
    server.inbox.wait_for((0, "status"))
    server.stop_all()
    assert stops[0].wait(10)
    second = ControlClient(("127.0.0.1", server.port), "secret", {"worker": 1}, stops[1].set)
    assert stops[1].wait(10)  # connected after the stop: told at once
    for client in (first, second):
        client.close()
    server.inbox.wait_for((1, "disconnected"))


def test_a_connection_without_the_token_is_refused(server):
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(b'{"t":"hello","token":"guess","worker":7}\n')
        assert sock.recv(100) == b""  # closed by the driver
    assert not any(worker == 7 for worker, _ in server.inbox.messages)


def test_a_worker_stops_when_the_driver_is_gone():
    inbox = Inbox()
    control = ControlServer("127.0.0.1", 0, "t", inbox).start()
    stopped = threading.Event()
    client = ControlClient(("127.0.0.1", control.port), "t", {"worker": 0}, stopped.set)
    inbox.wait_for((0, "hello"))
    control.close()
    assert stopped.wait(10)
    client.close()


def test_an_unreachable_driver_is_named_after_a_bounded_wait(monkeypatch):
    monkeypatch.setattr("mirror_maker.spark.control.CONNECT_TIMEOUT_S", 0.5)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(ConnectionError, match=f"cannot reach the driver's control channel at 127.0.0.1:{port}"):
        ControlClient(("127.0.0.1", port), "t", {}, lambda: None)


# -- Spark's errors ------------------------------------------------------------------------

PY4J_ERROR = """An error occurred while calling o45.collectAndServe.
: org.apache.spark.SparkException: Job aborted due to stage failure: Could not recover from a failed barrier ResultStage. Most recent failure reason: Stage failed because barrier task ResultTask(0, 0) finished unsuccessfully.
org.apache.spark.SparkException: Python worker exited unexpectedly (crashed)
\tat org.apache.spark.api.python.BasePythonRunner$ReaderIterator$$anonfun$1.applyOrElse(PythonRunner.scala:621)
"""


def test_the_informative_line_of_a_job_failure_is_kept():
    assert driver.describe_job_error(PY4J_ERROR) == \
        "org.apache.spark.SparkException: Python worker exited unexpectedly (crashed)"
    assert driver.describe_job_error("x\nBarrierJobSlotsNumberCheckFailed: [SPARK-24819] ...").startswith(
        "BarrierJobSlotsNumberCheckFailed")
    assert driver.describe_job_error("") == "unknown error"


# -- command line --------------------------------------------------------------------------


@pytest.mark.parametrize("option", [["--spark.master", "local[2]"], ["--spark.conf", "a=b"],
                                    ["--spark.py.files", "x.py"]])
def test_spark_options_need_spark(capsys, good_files, option):
    assert cli.invoke(base_args(good_files, "--include", "t", *option)) == exit_codes.USAGE
    err = capsys.readouterr().err
    assert f"{option[0]} is only used with --spark" in err and "Traceback" not in err


def test_spark_options_reach_the_driver_and_spark_conf_repeats(monkeypatch, good_files):
    seen = {}

    def fake_run_on_spark(config, options):
        seen.update(config=config, options=options)
        return exit_codes.OK

    monkeypatch.setattr(driver, "run_on_spark", fake_run_on_spark)
    assert cli.invoke(base_args(good_files, "--include", "t", "--spark", "--num.streams", "2",
                                "--spark.conf", "a=1", "--spark.conf", "b=2",
                                "--spark.py.files", "x.py, y.zip", "--spark.max.restarts", "0")) == 0
    assert seen["options"] == SparkOptions(None, ("a=1", "b=2"), ("x.py", "y.zip"), 0)
    assert seen["config"].num_streams == 2


def test_without_pyspark_the_install_command_is_named(monkeypatch, capsys, good_files):
    monkeypatch.setitem(sys.modules, "pyspark", None)  # import pyspark raises ImportError
    assert cli.invoke(base_args(good_files, "--include", "t", "--spark")) == exit_codes.USAGE
    err = capsys.readouterr().err
    assert ("--spark needs the 'spark' extra, which is not installed (pyspark is missing): "
            "pip install 'kafka-mirror-maker[spark]'") in err
    assert "Traceback" not in err and len([line for line in err.splitlines() if "ERROR" in line]) == 1


def test_help_has_a_spark_section(capsys):
    assert cli.invoke(["--help"]) == 1
    err = capsys.readouterr().err
    assert "Spark mode" in err and "--spark.master" in err and "local[<num.streams>]" in err


# -- the engine's signals inside a worker --------------------------------------------------


def test_a_signal_after_a_stop_asked_for_otherwise_still_shuts_down_cleanly(monkeypatch):
    """A stop asked for otherwise (a failure, caught up, a Spark driver's stop), then a signal:
    the mirror must still flush and commit; only a second signal is impatient."""
    import os
    import re
    import signal

    from mirror_maker.config.mirror_config import MirrorMakerConfig
    from mirror_maker.handlers import DefaultMessageHandler
    from mirror_maker.engine.runner import MirrorMaker

    config = MirrorMakerConfig({"group.id": "g", "bootstrap.servers": "h:1"}, {"bootstrap.servers": "h:2"},
                               re.compile("t"))
    mirror = MirrorMaker(config, DefaultMessageHandler(), None)
    exits = []
    monkeypatch.setattr(os, "_exit", exits.append)
    mirror.state.request_stop()  # e.g. the driver's stop, over the control channel
    mirror._on_signal(signal.SIGINT)
    assert exits == [] and mirror.state.stop_signal == signal.SIGINT
    mirror._on_signal(signal.SIGTERM)  # a second signal is impatient
    assert exits == [exit_codes.SIGTERM]


# -- metrics on the driver -----------------------------------------------------------------


def test_the_driver_exports_each_workers_metrics_with_a_worker_label():
    from prometheus_client import CollectorRegistry, generate_latest

    from mirror_maker.ops.metrics import MirrorMetrics
    from mirror_maker.records import TopicPartition
    from mirror_maker.spark.metrics import WorkerMetrics, render

    exported = WorkerMetrics(running=lambda: 2, restarts=lambda: 1)
    for worker, partition, records in ((0, 0, 5), (1, 1, 7)):
        metrics = MirrorMetrics()
        metrics.consumed(TopicPartition("t", partition), records, records * 10, 0, 0, 0, 0)
        metrics.committed(0.02)
        exported.update(worker, render(metrics))
    registry = CollectorRegistry(auto_describe=False)
    registry.register(exported)
    text = generate_latest(registry).decode()
    assert 'mirrormaker_record_count_total{partition="0",topic="t",worker="0"} 5.0' in text
    assert 'mirrormaker_record_count_total{partition="1",topic="t",worker="1"} 7.0' in text
    assert len(re.findall(r"^# TYPE mirrormaker_record_count(_total)? counter$", text, re.M)) == 1  # one family
    assert 'mirrormaker_commit_latency_seconds_count{worker="1"} 1.0' in text
    assert "mirrormaker_spark_workers 2.0" in text and "mirrormaker_spark_restarts_total 1.0" in text


def test_pyspark_daemons_double_sighup_only_asks_a_worker_to_stop():
    """The daemon's shutdown sends SIGHUP twice; neither may end the worker before its commit."""
    import os
    import signal

    from mirror_maker.spark.task import _stop_on_sighup

    stop = threading.Event()
    before = signal.getsignal(signal.SIGHUP)
    with _stop_on_sighup(stop):
        os.kill(os.getpid(), signal.SIGHUP)
        os.kill(os.getpid(), signal.SIGHUP)
        assert stop.wait(5)
    assert signal.getsignal(signal.SIGHUP) is before
