"""``--spark``: the driver that runs N streams as one barrier job of N Spark tasks.

Barrier execution makes Spark start all N tasks at once or fail the job ("not enough slots"),
instead of queueing the streams that do not fit behind ones that never end. The driver:

* starts its control channel on the process's SparkContext (``context``: one per process,
  shared by every driver of it; ``connect-mirror-maker --spark`` runs one driver per flow);
* submits the job from a thread (job groups are thread-local; each driver has its own group, so
  cancelling one driver's job leaves the others'), and meanwhile logs the workers' lines, the
  combined status line, and stops them when every partition is caught up
  (``--exit.when.caught.up``);
* on SIGTERM/SIGINT (or ``request_stop``) tells every worker to stop (flush, commit, return); a
  second signal, or the workers not returning within the shutdown timeout, cancels the job (a
  hard kill);
* restarts the job when a worker dies (a barrier stage is never retried by Spark), at most
  ``--spark.max.restarts`` times in a row; never after a worker failed on its own (an abort):
  that failure is raised, as the engine's error class, for the caller to map to an exit code;
* with ``singletons`` (the dedicated mode's election), tells task 0 whether this node runs the
  flow's syncs, checkpoints and heartbeats, whenever that changes.
"""

from __future__ import annotations

import functools
import logging
import os
import secrets
import signal
import threading
import time
from dataclasses import replace
from typing import Callable, Dict, Optional, Tuple

from .. import errors
from ..cli import exit_codes
from ..config.mirror_config import MirrorMakerConfig
from ..ops.endpoint import OpsServer
from ..ops.signals import SignalDispatch
from ..errors import ConfigError, MirrorFailure
from ..ops.status import StatusReporter, combine
from .context import SparkRuntime, describe_job_error, import_pyspark
from .control import ControlServer
from .metrics import WorkerMetrics
from .settings import SparkOptions, plan as make_plan
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
COUNTERS = ("records", "bytes", "acked", "dropped")


def worker_failure(message: dict, worker) -> errors.MirrorMakerError:
    """A worker's "failed" message as the error the engine raised (its class name travels with
    it): what is fatal, retried or bad input stays so for the driver's caller."""
    error = f"worker {worker}: {message.get('error')}"
    found = getattr(errors, str(message.get("class")), None)
    if isinstance(found, type) and issubclass(found, (ConfigError, MirrorFailure)):
        return found(error)
    return ConfigError(error) if message.get("kind") == "config" else MirrorFailure(error)


class SparkDriver:
    def __init__(self, config: MirrorMakerConfig, runtime: SparkRuntime, max_restarts: int, name: str = "",
                 singletons: Optional[Callable[[], bool]] = None, worker_metrics: bool = False) -> None:
        """``name``: the flow this driver runs (its job group, its threads' names); ``singletons``:
        whether this node runs the syncs, checkpoints and heartbeats now (task 0 runs them; None:
        always); ``worker_metrics``: collect the workers' metrics although this driver serves no
        ``--metrics.port`` (the caller serves them)."""
        self.config = config
        self.runtime = runtime
        self.max_restarts = max_restarts
        self.name = name
        self.job_group = f"{JOB_GROUP}:{name}" if name else JOB_GROUP
        self._singletons = singletons
        self._announced: Optional[bool] = None
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
        self._signals = SignalDispatch(self._on_signal, "spark-driver-signals")
        self._server: Optional[ControlServer] = None
        self._address: Optional[Tuple[str, int]] = None
        #: The workers' metrics, with --metrics.port or for the caller's endpoint.
        self.metrics: Optional[WorkerMetrics] = (
            WorkerMetrics(self.running, lambda: self.restarts)
            if worker_metrics or config.metrics_port is not None else None)
        self._ops: Optional[OpsServer] = None
        self.restarts = 0
        #: (job, worker) -> pid of each worker whose control connection is open.
        self._connected: Dict[tuple, int] = {}
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
        elif kind == "metrics" and current and self.metrics is not None:
            self.metrics.update(worker, str(message.get("text", "")))
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
            failure = worker_failure(message, worker)
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

    def request_stop(self, signum: Optional[int] = None) -> None:
        """Stop every worker (flush, commit, return), as a first signal would; the caller owns
        the signal and the exit status."""
        self._request_stop()

    @property
    def failure(self) -> Optional[Exception]:
        """The failure of a worker that ended the run, if one did."""
        return self._failure

    @staticmethod
    def stop_bound(config: MirrorMakerConfig) -> float:
        """How long a stop may take: the workers' own bound, then the cancel and its kill."""
        return config.shutdown_timeout_s + CANCEL_GRACE_S + 2 * TICK_S

    # -- signals -------------------------------------------------------------------------

    def _on_signal(self, signum: int) -> None:
        if self._stopping.is_set() and (self._stop_signal is not None or self._failure is not None):
            log.warning("Second signal: cancelling the Spark job without waiting for the clean shutdown")
            self._hard = True
            self._stop_signal = self._stop_signal or signum
            return
        self._stop_signal = signum  # first: a second signal is told apart by it
        log.info("Received %s, shutting down", signal.Signals(signum).name)
        self._request_stop()

    # -- start ---------------------------------------------------------------------------

    def serve_metrics(self) -> None:
        """``--metrics.port``: before the SparkContext, whose JVM opens listening ports of its
        own, so that a busy port is one line before a cold start of seconds rather than after."""
        if self.config.metrics_port is not None:
            self._ops = OpsServer(self.config.metrics_bind, self.config.metrics_port, self.metrics,
                                  self.readiness).start()

    def start(self) -> None:
        """The control channel, on the runtime's SparkContext (started)."""
        host, bind = self.runtime.control_address()
        thread = f"{self.name}/spark-control" if self.name else "spark-control"
        self._server = ControlServer(bind, 0, self._token, self._on_message, name=thread).start()
        self._address = (host, self._server.port)
        if self._stopping.is_set():  # asked to stop while it was starting
            self._server.stop_all()

    def running(self) -> int:
        """Workers of the current job whose control connection is open."""
        with self._lock:
            return sum(1 for job, _worker in self._connected if job == self._job)

    def readiness(self) -> Tuple[bool, str]:
        """/ready: every worker of the current job reports, and partitions are assigned."""
        if self._stopping.is_set():
            return False, "stopping"
        running = self.running()
        if running < self.streams:
            return False, f"{running} of {self.streams} Spark workers running"
        assigned = self.snapshot()["assigned"]
        if assigned == 0:
            return False, "no partitions assigned yet"
        return True, f"ready: {self.streams} Spark workers, {assigned} partitions assigned"

    # -- the job loop --------------------------------------------------------------------

    def run(self) -> int:
        # After the SparkContext exists: PySpark installs its own SIGINT handler (cancel + raise).
        self._signals.install()
        restarts = 0
        try:
            while not self._stopping.is_set():
                started = time.monotonic()
                error = self._run_job()
                if self._failure is not None:
                    raise self._failure
                if error is None or self._stopping.is_set():
                    break
                if time.monotonic() - started > STABLE_S:
                    restarts = 0
                if restarts >= self.max_restarts:
                    raise MirrorFailure(f"the Spark job failed {restarts + 1} times in a row "
                                        f"(--spark.max.restarts {self.max_restarts}): {error}")
                restarts += 1
                self.restarts += 1
                log.warning("The Spark job ended (%s): restarting all %d streams in %.0f s (restart "
                            "%d of at most %d in a row)", error, self.streams, RESTART_BACKOFF_S,
                            restarts, self.max_restarts)
                if self._stopping.wait(RESTART_BACKOFF_S):
                    break
        finally:
            self._signals.restore()
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
                        logging.getLogger().getEffectiveLevel(), not self.runtime.local,
                        metrics=self.metrics is not None, elected=self._singletons is not None)
        result: dict = {}
        sc = self.runtime.sc

        def submit() -> None:
            described = f"mirror streams of {self.name}" if self.name else "mirror streams"
            sc.setJobGroup(self.job_group, described, interruptOnCancel=True)  # per thread
            try:
                rdd = sc.parallelize(range(self.streams), self.streams)
                result["summaries"] = rdd.barrier().mapPartitions(
                    functools.partial(run_stream, plan)).collect()
            except Exception as exc:
                result["error"] = str(exc)

        thread = threading.Thread(target=submit, name=f"{self.name}/spark-job" if self.name else "spark-job",
                                  daemon=True)
        thread.start()
        self._watch(thread)
        if "error" in result:
            if self._server is not None:
                self._server.stop_connected()  # let surviving workers commit before Spark kills them
            reason = describe_job_error(result["error"])
            if "BarrierJobSlotsNumberCheckFailed" in reason:
                asked = f"{self.name}'s tasks.max" if self.name else "--num.streams"
                raise ConfigError(f"not enough Spark task slots: {asked} {self.streams} needs "
                                  f"{self.streams} tasks running at once on {self.runtime.master} "
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
            self._announce_singletons()
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
                self.runtime.sc.cancelJobGroup(self.job_group)
                self._cancelled = True
        if self._cancelled and self.runtime.local:
            self._kill_local_workers()

    def _announce_singletons(self) -> None:
        """Tell the workers (task 0 runs them) whether this node runs the singletons, when that
        changes; a worker that connects later is told at once."""
        if self._singletons is None or self._server is None:
            return
        leading = bool(self._singletons())
        if leading != self._announced:
            self._announced = leading
            self._server.announce({"t": "singletons", "on": leading})

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
        """The control channel and the metrics server; the SparkContext is the runtime's."""
        if self._ops is not None:
            self._ops.stop()
        if self._server is not None:
            self._server.close()


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
    plugins = (config.message_handler, config.rebalance_listener, config.replication.policy)
    runtime = SparkRuntime(options, spark, plugins)
    driver = SparkDriver(config, runtime, options.max_restarts)
    try:
        runtime.prepare()
        driver.serve_metrics()
        runtime.start(config.num_streams)
        driver.start()
        return driver.run()
    except MirrorFailure as exc:
        if exc is not driver.failure:
            raise
        raise type(exc)(f"{exc} - the mirror maker stopped without committing past it") from None
    finally:
        driver.close()
        runtime.close()
