"""What runs inside each Spark task: one mirror stream, the same engine as a mirror thread.

The task builds a :class:`~mirror_maker.runner.MirrorMaker` for its one stream number (so its
consumer is ``<group>-<n>`` exactly as thread n's would be) with the same handler, listener,
flush-before-commit and abort rules, and reports to the driver over the control channel: its
numbers every second, its log lines, its failure. It stops, flushes and commits when the
driver says so, when the executor shuts it down (SIGTERM/SIGHUP), or when the driver is gone.
Task 0 also runs the syncs, checkpoints and heartbeats (the engine runs them with stream 0); in
the dedicated mode only while the driver says its node won the flow's election.

A failure never raises out of the task: raising would make Spark abort the barrier job, which
the driver treats as a dead worker and restarts, straight back into the same failure. The task
returns a summary that names the failure instead, and the driver stops.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import socket
import sys
import threading
import time
from dataclasses import dataclass
from typing import Callable, Iterator, Optional, Tuple

from ..config.client_conf import register_secrets
from ..config.mirror_config import MirrorMakerConfig
from ..ops.signals import SignalDispatch
from ..errors import ConfigError, MirrorMakerError
from ..ops.log import KafkaFormatter, FORMAT
from ..engine.runner import MirrorMaker, load_plugins, run_mirror
from . import metrics as worker_metrics
from .control import ControlClient

#: Often enough that the driver sees "caught up" soon after it happens; a few hundred bytes each.
STATUS_EVERY_S = 0.25


@dataclass(frozen=True)
class TaskPlan:
    """Everything a task needs, pickled into the job's closure by the driver."""

    config: MirrorMakerConfig
    control: Tuple[str, int]
    token: str
    job: int
    log_level: int
    #: Executors on a cluster keep their own log too (local workers share the driver's console).
    log_to_stderr: bool
    #: The driver serves --metrics.port: send the metrics every few seconds.
    metrics: bool = False
    #: Task 0 runs the syncs, checkpoints and heartbeats only while the driver says this node
    #: is the elected one (the dedicated mode); else always.
    elected: bool = False


class _Forward(logging.Handler):
    """Sends each log record to the driver, which logs it under the worker's number."""

    def __init__(self, client: ControlClient) -> None:
        super().__init__()
        self._client = client

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = record.getMessage()
        except Exception:  # a bad format string must not kill the stream
            message = str(record.msg)
        self._client.send({"t": "log", "level": record.levelno, "name": record.name, "msg": message})


class _Reporter:
    """Sends the mirror's numbers (and metrics, when asked), and passes a driver stop to the engine."""

    def __init__(self, client: ControlClient, mirror: MirrorMaker, stop: threading.Event,
                 metrics: bool) -> None:
        self._client = client
        self._mirror = mirror
        self._stop = stop
        self._metrics = metrics
        self._next = self._next_metrics = 0.0

    def tick(self) -> None:
        if self._stop.is_set() and not self._mirror.state.stopping:
            self._mirror.state.request_stop()
        now = time.monotonic()
        if now >= self._next:
            self._next = now + STATUS_EVERY_S
            self._client.send({"t": "status", "snapshot": self._mirror.snapshot()})
        if self._metrics and now >= self._next_metrics:
            self._next_metrics = now + worker_metrics.EVERY_S
            self.send_metrics()

    def send_metrics(self) -> None:
        self._client.send({"t": "metrics", "text": worker_metrics.render(self._mirror.metrics)})


@contextlib.contextmanager
def _stop_on_sighup(stop: threading.Event):
    """pyspark's daemon sends SIGHUP to its workers when the executor shuts down, and sends it
    twice (its shutdown runs again in a ``finally``). It only ever means "stop": a second one must
    not be taken for an impatient user's second signal, which skips the final commit."""
    # The reporter passes the stop to the engine at its next tick.
    sighup = SignalDispatch(lambda signum: stop.set(), "spark-task-sighup", signals=(signal.SIGHUP,))
    sighup.install()  # only in the main thread: elsewhere nothing is installed
    try:
        yield
    finally:
        sighup.restore()


def run_stream(plan: TaskPlan, _partition: Iterator) -> Iterator[dict]:
    """The ``mapPartitions`` function of the barrier job: one stream per task."""
    from pyspark import BarrierTaskContext

    context = BarrierTaskContext.get()
    yield run_worker(plan, context.partitionId(), context.barrier)


def run_worker(plan: TaskPlan, index: int, barrier: Callable[[], None]) -> dict:
    register_secrets(plan.config.consumer, plan.config.producer)  # this process's log lines too
    stop, leading = threading.Event(), threading.Event()
    hello = {"worker": index, "job": plan.job, "pid": os.getpid(), "host": socket.gethostname()}

    def on_message(message: dict) -> None:
        if message.get("t") == "singletons":
            leading.set() if message.get("on") else leading.clear()

    client = ControlClient(plan.control, plan.token, hello, stop.set, on_message)
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    root.handlers = [_Forward(client)]
    if plan.log_to_stderr:
        stderr = logging.StreamHandler(sys.stderr)
        stderr.setFormatter(KafkaFormatter(FORMAT))
        root.handlers.append(stderr)
    root.setLevel(plan.log_level)
    try:
        barrier()  # every stream joins the group at once: one rebalance instead of N
        summary = _mirror(plan, index, client, stop, leading.is_set if plan.elected else None)
        client.send({"t": "done", "summary": summary})
        return summary
    finally:
        # pyspark reuses worker processes: leave nothing of this task behind.
        root.handlers, root.level = saved
        client.close()


def _mirror(plan: TaskPlan, index: int, client: ControlClient, stop: threading.Event,
            singletons: Optional[Callable[[], bool]]) -> dict:
    mirror: Optional[MirrorMaker] = None
    failure: Optional[MirrorMakerError] = None
    try:
        handler, listener = load_plugins(plan.config)
        mirror = MirrorMaker(plan.config, handler, listener, streams=[index], singletons=singletons)
        reporter = _Reporter(client, mirror, stop, plan.metrics)
        with _stop_on_sighup(stop):
            run_mirror(mirror, on_tick=reporter.tick)  # SIGTERM/SIGINT as in a process
        if plan.metrics:
            reporter.send_metrics()  # the final counts
        failure = mirror.state.failure
    except MirrorMakerError as exc:
        failure = exc
    except Exception as exc:  # anything unexpected stops every stream, as in a thread
        logging.getLogger("mirror_maker.spark").debug("worker failure", exc_info=True)
        failure = MirrorMakerError(f"worker {index} failed: {type(exc).__name__}: {exc}")
    summary = {"worker": index, "pid": os.getpid(), "failure": None, "kind": None,
               "undelivered": mirror.undelivered if mirror else 0,
               "snapshot": mirror.snapshot() if mirror else {}}
    if failure is not None:
        summary["failure"] = str(failure)
        summary["kind"] = "config" if isinstance(failure, ConfigError) else "fatal"
        # The class, so that the driver's caller tells what is retried from what is fatal.
        client.send({"t": "failed", "kind": summary["kind"], "class": type(failure).__name__,
                     "error": summary["failure"]})
    return summary
