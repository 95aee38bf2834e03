"""``--spark``: the driver that runs the N streams as one barrier job of N Spark tasks.

Barrier execution makes Spark start all N tasks at once or fail the job ("not enough slots"),
instead of queueing the streams that do not fit behind ones that never end. The driver:

* starts the control channel and the SparkContext (forced settings, loopback in local mode),
  ships the user's plugin modules and ``--spark.py.files`` to the executors;
* submits the job from a thread (job groups are thread-local), and meanwhile logs the workers'
  lines, the combined status line, and stops them when every partition is caught up
  (``--exit.when.caught.up``);
* on SIGTERM/SIGINT tells every worker to stop (flush, commit, return); a second signal, or
  the workers not returning within the shutdown timeout, cancels the job (a hard kill);
* restarts the job when a worker dies (a barrier stage is never retried by Spark), at most
  ``--spark.max.restarts`` times in a row; never after a worker failed on its own (an abort):
  that failure is raised as the error the command line maps to an exit code.
"""

from __future__ import annotations

import functools
import logging
import os
import re
import secrets
import signal
import sys
import tempfile
import threading
import time
from dataclasses import replace
from typing import Dict, Optional, Tuple

from ..cli import exit_codes
from ..config.mirror_config import MirrorMakerConfig
from ..ops.endpoint import OpsServer
from ..errors import ConfigError, MirrorFailure
from ..extras import require
from ..ops.status import StatusReporter, combine
from .control import ControlServer
from .metrics import WorkerMetrics
from .settings import (SparkOptions, SparkPlan, parse_conf, plan as make_plan, submitted_notes,
                       worker_python)
from .shipping import check_py_files, modules_to_ship, pack
from .task import TaskPlan, run_stream

log = logging.getLogger("mirror_maker.spark.driver")

JOB_GROUP = "kafka-mirror-maker"
TICK_S = 0.2
RESTART_BACKOFF_S = 2.0
#: A job that ran this long before it ended unasked starts a new count of restarts.
STABLE_S = 300.0
#: Workers bound their own shutdown (--shutdown.timeout.ms, then a few seconds to join their
#: thread); the driver's cancel after this much more is the last resort.
CANCEL_GRACE_S = 15.0
SIGNALS = (signal.SIGTERM, signal.SIGINT)
COUNTERS = ("records", "bytes", "acked", "dropped")


def import_pyspark():
    return require("spark", "pyspark", "--spark")


def describe_job_error(text: str) -> str:
    """The line of a Spark job failure that says what happened (Py4J errors are pages long)."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for pattern in (r"BarrierJobSlotsNumberCheckFailed", r"cannot reach the driver's control channel",
                    r"Python worker exited unexpectedly", r"Job aborted due to stage failure",
                    r"Exception: ", r"Error: "):
        for line in lines:
            if re.search(pattern, line):
                return line[:400]
    return (lines[0] if lines else "unknown error")[:400]


class SparkDriver:
    def __init__(self, config: MirrorMakerConfig, options: SparkOptions, spark: SparkPlan) -> None:
        self.config = config
        self.options = options
        self.spark = spark
        self.streams = config.num_streams
        self._lock = threading.Lock()
        self._job = 0
        self._snapshots: Dict[int, dict] = {}
        self._done: Dict[int, dict] = {}
        self._base = {key: 0 for key in COUNTERS}
        self._failure: Optional[Exception] = None
        self._stop_signal: Optional[int] = None
        self._stopping = threading.Event()
        self._hard = False
        self._cancelled = False
        #: Why the current job ended although nobody asked it to (then it is restarted).
        self._unasked: Optional[str] = None
        self.caught_up = False
        self._previous_handlers = {}
        self._server: Optional[ControlServer] = None
        self._metrics: Optional[WorkerMetrics] = None
        self._ops: Optional[OpsServer] = None
        self.restarts = 0
        #: (job, worker) -> pid of each worker whose control connection is open.
        self._connected: Dict[tuple, int] = {}
        self._sc = None
        self._token = secrets.token_hex(16)
        self._status = StatusReporter(self.snapshot, config.status_interval_ms / 1000.0,
                                      progress=config.exit_when_caught_up)

    # -- numbers -------------------------------------------------------------------------

    def snapshot(self) -> dict:
        """All workers together; counters include the jobs that ended before this one."""
        with self._lock:
            combined = combine(list(self._snapshots.values()))
            complete = len(self._snapshots) == self.streams
            for key in COUNTERS:
                combined[key] += self._base[key]
        combined["rebalanced"] = combined["rebalanced"] and complete
        return combined

    # -- the control channel -------------------------------------------------------------

    def _on_message(self, hello: dict, message: dict) -> None:
        worker, job, kind = hello.get("worker"), hello.get("job"), message.get("t")
        current = job == self._job
        if kind == "hello":
            log.info("Spark worker %s started (pid %s on %s, job %s)", worker, hello.get("pid"),
                     hello.get("host"), job)
            pid = hello.get("pid")
            if isinstance(pid, int) and pid > 1:  # never 0 or -1: os.kill would hit a group
                with self._lock:
                    self._connected[(job, worker)] = pid
        elif kind == "disconnected":
            with self._lock:
                self._connected.pop((job, worker), None)
        elif kind == "log":
            logger = logging.getLogger(str(message.get("name", "mirror_maker")))
            level = int(message.get("level", logging.INFO))
            if logger.isEnabledFor(level):
                logger.handle(logger.makeRecord(logger.name, level, "(worker)", 0, "worker %s: %s",
                                                (worker, message.get("msg", "")), None))
        elif kind == "metrics" and current and self._metrics is not None:
            self._metrics.update(worker, str(message.get("text", "")))
        elif kind == "status" and current:
            with self._lock:
                if worker not in self._done:
                    self._snapshots[worker] = message.get("snapshot") or {}
        elif kind == "done" and current:
            self._record_result(message.get("summary") or {})
            if not self._stopping.is_set() and self._unasked is None:
                # e.g. its executor is shutting down (SIGTERM/SIGHUP): its partitions went to the
                # others; end the job so the driver starts all N streams again.
                self._unasked = f"worker {worker} stopped without being asked to"
                if self._server is not None:
                    self._server.stop_connected()
        elif kind == "failed":
            error = f"worker {worker}: {message.get('error')}"
            failure = (ConfigError(error) if message.get("kind") == "config" else
                       MirrorFailure(f"{error} - the mirror maker stopped without committing past it"))
            with self._lock:
                first = self._failure is None
                if first:
                    self._failure = failure  # raised when the job has ended; cli logs it once
            if first:
                log.info("Worker %s failed: stopping every stream", worker)
                self._request_stop()

    def _record_result(self, summary: dict) -> None:
        """A worker's final numbers (from its "done" message, or from the job's result)."""
        with self._lock:
            self._done[summary.get("worker")] = summary
            if summary.get("snapshot"):
                self._snapshots[summary.get("worker")] = summary["snapshot"]

    def _request_stop(self) -> None:
        self._stopping.set()
        if self._server is not None:
            self._server.stop_all()

    # -- signals -------------------------------------------------------------------------

    def _on_signal(self, signum, frame) -> None:
        if self._stopping.is_set() and (self._stop_signal is not None or self._failure is not None):
            log.warning("Second signal: cancelling the Spark job without waiting for the clean shutdown")
            self._hard = True
            self._stop_signal = self._stop_signal or signum
            return
        log.info("Received %s, shutting down", signal.Signals(signum).name)
        self._stop_signal = signum
        self._request_stop()

    def _install_signal_handlers(self) -> None:
        # After the SparkContext exists: PySpark installs its own SIGINT handler (cancel + raise).
        if threading.current_thread() is threading.main_thread():
            for signum in SIGNALS:
                self._previous_handlers[signum] = signal.signal(signum, self._on_signal)

    def _restore_signal_handlers(self) -> None:
        for signum, previous in self._previous_handlers.items():
            signal.signal(signum, previous)

    # -- start ---------------------------------------------------------------------------

    def start(self) -> None:
        pyspark = import_pyspark()
        py_files = check_py_files(self.options.py_files)
        for level, note in self.spark.notes:
            log.log(getattr(logging, level), "%s", note)
        python, note = worker_python(self.spark.local, os.environ, sys.executable)
        if note:
            log.warning("%s", note) if self.spark.local else log.info("%s", note)
        if python:
            os.environ["PYSPARK_PYTHON"] = python  # the conf key is ignored by a python-started app
        if self.spark.local:
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
        conf = pyspark.SparkConf()  # under spark-submit: the settings it was given
        submitted = dict(conf.getAll())
        for level, note in submitted_notes(submitted, parse_conf(self.options.conf)):
            log.log(getattr(logging, level), "%s", note)
        conf.setMaster(self.spark.master)
        for key, value in self.spark.conf.items():
            if key not in self.spark.defaulted or key not in submitted:
                conf.set(key, value)
        if self.config.metrics_port is not None:
            # Before the SparkContext: its JVM opens listening ports of its own, and a busy
            # --metrics.port is one line before a cold start of seconds rather than after it.
            self._metrics = WorkerMetrics(self._running, lambda: self.restarts)
            self._ops = OpsServer(self.config.metrics_bind, self.config.metrics_port, self._metrics,
                                  self.readiness).start()
        log.info("Starting Spark (master %s) for %d streams", self.spark.master, self.streams)
        logging.getLogger("py4j").setLevel(logging.WARNING)  # a line per gateway connection
        try:
            self._sc = pyspark.SparkContext(conf=conf)
        except Exception as exc:
            raise ConfigError(f"--spark: Spark did not start (it needs Java 17 or later on PATH or "
                              f"in JAVA_HOME): {describe_job_error(str(exc))}") from None
        host = "127.0.0.1" if self.spark.local else self._sc.getConf().get("spark.driver.host")
        bind = "127.0.0.1" if self.spark.local else "0.0.0.0"
        self._server = ControlServer(bind, 0, self._token, self._on_message).start()
        self._address = (host, self._server.port)
        self._workdir = tempfile.TemporaryDirectory(prefix="mirror-maker-spark-")
        plugins = (self.config.message_handler, self.config.rebalance_listener)
        for name, location in modules_to_ship(plugins):
            log.info("Shipping %s (%s) to the Spark executors", name, location)
            self._sc.addPyFile(pack(name, location, self._workdir.name))
        for path in py_files:
            self._sc.addPyFile(path)

    def _running(self) -> int:
        """Workers of the current job whose control connection is open."""
        with self._lock:
            return sum(1 for job, _worker in self._connected if job == self._job)

    def readiness(self) -> Tuple[bool, str]:
        """/ready: every worker of the current job reports, and partitions are assigned."""
        if self._stopping.is_set():
            return False, "stopping"
        running = self._running()
        if running < self.streams:
            return False, f"{running} of {self.streams} Spark workers running"
        assigned = self.snapshot()["assigned"]
        if assigned == 0:
            return False, "no partitions assigned yet"
        return True, f"ready: {self.streams} Spark workers, {assigned} partitions assigned"

    # -- the job loop --------------------------------------------------------------------

    def run(self) -> int:
        self._install_signal_handlers()
        restarts = 0
        try:
            while True:
                started = time.monotonic()
                error = self._run_job()
                if self._failure is not None:
                    raise self._failure
                if error is None or self._stopping.is_set():
                    break
                if time.monotonic() - started > STABLE_S:
                    restarts = 0
                if restarts >= self.options.max_restarts:
                    raise MirrorFailure(f"the Spark job failed {restarts + 1} times in a row "
                                        f"(--spark.max.restarts {self.options.max_restarts}): {error}")
                restarts += 1
                self.restarts += 1
                log.warning("The Spark job ended (%s): restarting all %d streams in %.0f s (restart "
                            "%d of at most %d in a row)", error, self.streams, RESTART_BACKOFF_S,
                            restarts, self.options.max_restarts)
                if self._stopping.wait(RESTART_BACKOFF_S):
                    break
        finally:
            self._restore_signal_handlers()
        status = self._exit_status()
        self._status.close()
        self._status.log_line()
        if self._cancelled:
            log.warning("Mirror maker stopped without a clean shutdown (the Spark job was cancelled): "
                        "records the workers did not commit are mirrored again on restart")
        else:
            log.info("Kafka mirror maker shutdown successfully")
        return status

    def _run_job(self) -> Optional[str]:
        """Run one barrier job until it ends; None when it ended on request, else why it ended."""
        with self._lock:
            for key in COUNTERS:
                self._base[key] += sum(s.get(key, 0) for s in self._snapshots.values())
            self._snapshots.clear()
            self._done.clear()
            self._job += 1
            self._unasked = None
        # Each worker's own status line, metrics server and caught-up stop are the driver's job.
        task_config = replace(self.config, status_interval_ms=0, metrics_port=None,
                              exit_when_caught_up=False)
        plan = TaskPlan(task_config, self._address, self._token, self._job,
                        logging.getLogger().getEffectiveLevel(), not self.spark.local,
                        metrics=self._metrics is not None)
        result: dict = {}

        def submit() -> None:
            self._sc.setJobGroup(JOB_GROUP, "mirror streams", interruptOnCancel=True)  # per thread
            try:
                rdd = self._sc.parallelize(range(self.streams), self.streams)
                result["summaries"] = rdd.barrier().mapPartitions(
                    functools.partial(run_stream, plan)).collect()
            except Exception as exc:
                result["error"] = str(exc)

        thread = threading.Thread(target=submit, name="spark-job", daemon=True)
        thread.start()
        self._watch(thread)
        if "error" in result:
            if self._server is not None:
                self._server.stop_connected()  # let surviving workers commit before Spark kills them
            reason = describe_job_error(result["error"])
            if "BarrierJobSlotsNumberCheckFailed" in reason:
                raise ConfigError(f"not enough Spark task slots: --num.streams {self.streams} needs "
                                  f"{self.streams} tasks running at once on {self.spark.master} "
                                  f"(executors x cores / spark.task.cpus)")
            return reason
        for summary in sorted(result.get("summaries", []), key=lambda s: s["worker"]):
            self._record_result(summary)
            numbers = summary.get("snapshot") or {}
            log.info("Worker %s (pid %s) returned: %d records consumed, %d acknowledged by the target, "
                     "%d dropped, %d not acknowledged", summary["worker"], summary.get("pid"),
                     numbers.get("records", 0), numbers.get("acked", 0), numbers.get("dropped", 0),
                     summary.get("undelivered", 0))
        return self._unasked

    def _watch(self, job: threading.Thread) -> None:
        """Until the job ends: status lines, the caught-up stop, and the hard cancel if needed."""
        cancel_at: Optional[float] = None
        while job.is_alive():
            job.join(TICK_S)
            self._status.tick()
            if self.config.exit_when_caught_up and not self._stopping.is_set() and self._status.caught_up():
                self.caught_up = True
                log.info("Every assigned partition is at its end: stopping (--exit.when.caught.up)")
                self._request_stop()
            if self._stopping.is_set() and cancel_at is None:
                cancel_at = time.monotonic() + self.config.shutdown_timeout_s + CANCEL_GRACE_S
            overdue = cancel_at is not None and time.monotonic() > cancel_at
            if not self._cancelled and (self._hard or overdue):
                if not self._hard:
                    log.warning("The Spark workers did not stop in time: cancelling the job (records "
                                "they did not commit are mirrored again on restart)")
                self._sc.cancelJobGroup(JOB_GROUP)
                self._cancelled = True
        if self._cancelled and self.spark.local:
            self._kill_local_workers()

    def _kill_local_workers(self) -> None:
        """After a hard cancel in local mode, make sure no worker outlives the driver.

        Spark kills a cancelled task's Python worker only after ``spark.python.task.killTimeout``,
        by which time the driver has stopped Spark; the workers would then get pyspark's SIGHUP
        and take their own bounded shutdown (up to --shutdown.timeout.ms) instead.
        """
        with self._lock:
            pids = list(self._connected.values())
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
                log.warning("Killed Spark worker process %d (cancelled, still running)", pid)
            except (ProcessLookupError, PermissionError):
                pass

    def undelivered(self) -> int:
        with self._lock:
            return sum(summary.get("undelivered", 0) for summary in self._done.values())

    def _exit_status(self) -> int:
        if self._stop_signal is not None:
            return exit_codes.for_signal(self._stop_signal)
        if self.caught_up:
            undelivered = self.undelivered()
            if undelivered:
                raise MirrorFailure(f"{undelivered} records were not acknowledged by the target")
            print(self._status.summary(), flush=True)
        return exit_codes.OK

    def close(self) -> None:
        if self._ops is not None:
            self._ops.stop()
        if self._sc is not None:
            self._sc.stop()
        if self._server is not None:
            self._server.close()
        if getattr(self, "_workdir", None) is not None:
            self._workdir.cleanup()


def submitted_master(pyspark) -> Optional[str]:
    """spark-submit's ``--master`` when spark-submit launched this process (its JVM is already
    running and holds the submitted settings); None otherwise, without starting a JVM."""
    if not os.environ.get("PYSPARK_GATEWAY_PORT"):
        return None
    pyspark.SparkContext._ensure_initialized()  # connects to spark-submit's JVM
    return pyspark.SparkConf().get("spark.master", None)


def run_on_spark(config: MirrorMakerConfig, options: SparkOptions) -> int:
    """Run the mirror's streams as Spark tasks until a signal, a failure or the end."""
    spark = make_plan(options, config.num_streams, submitted_master=submitted_master(import_pyspark()))
    driver = SparkDriver(config, options, spark)
    try:
        driver.start()
        return driver.run()
    finally:
        driver.close()
