"""Every flow of mm2.properties in one process, under one supervisor: one signal handling, one
exit status, one status line per flow, one ops endpoint.

Each enabled flow is a :class:`~mirror_maker.engine.runner.MirrorMaker` (the engine the
MirrorMaker v1 command line runs) in a thread of its own, whose syncs, checkpoints and heartbeats
run only while this node wins the flow's singleton election (``election``); with ``--spark``, the
thread runs the flow's Spark driver instead, whose job's tasks are that engine (``on_spark``). A
pair whose flow is not enabled but whose heartbeats are on only writes heartbeats, as MirrorMaker
2's herder does.

A flow that fails is logged and started again after a backoff (1 s, doubling to 60 s) while the
others go on, unless its failure is fatal by MirrorMaker v1's rules: a record the target refused
with ``abort.on.send.failure`` true, or a plugin that raised (a restart would stop at the same
record). A fatal failure stops every flow (each flushes and commits) and the process exits 255.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from dataclasses import replace
from typing import Callable, List, Optional, Tuple

from ..cli import exit_codes
from ..clients.admin import admin_client, connection_settings
from ..engine.runner import JOIN_GRACE_S, MirrorMaker, load_plugins
from ..engine.state import RunState
from ..errors import ClientFailed, ConfigError, HandlerFailed, ListenerFailed, MirrorMakerError, SendFailed
from ..ops.metrics import MirrorMetrics
from ..ops.signals import SignalDispatch
from ..ops.status import StatusReporter
from ..ops.stop_watchdog import GRACE_S as STOP_WATCHDOG_GRACE_S, StopWatchdog
from ..replication.checkpoints import ConsumerFailover
from ..replication.policies import topic_rules
from ..replication.topic_sync import TopicSync
from .election import SingletonElection, election_group, election_topic
from .flows import Flow, RunSettings
from .takeover import FINAL_WRITE_S, ConnectOffsetsKeeper, take_over

log = logging.getLogger("mirror_maker.dedicated")

TICK_S = 0.2
BACKOFF_S = 1.0
MAX_BACKOFF_S = 60.0
#: A flow that ran this long before it failed starts its backoff afresh.
STABLE_S = 300.0
#: Stopping the SparkContext (``--spark``) after every flow stopped.
SPARK_STOP_S = 10.0
#: How often an exactly-once flow looks whether this node holds its election.
ELECTION_CHECK_S = 0.5


def is_fatal(failure: Exception) -> bool:
    """MirrorMaker v1's fatal failures: a record the target refused (with abort.on.send.failure
    true) or a plugin that raised would stop a restarted flow at the same record again; a bad
    configuration would fail again. Anything else (a client error, a cluster away) is retried."""
    return isinstance(failure, (SendFailed, HandlerFailed, ListenerFailed, ConfigError))


class FlowPrefix(logging.Filter):
    """Prefixes a line logged by a flow's threads (named ``<flow>`` or ``<flow>/...``) with
    ``[<flow>]``: a process with several flows says which one a line is about."""

    def __init__(self, names: List[str]) -> None:
        super().__init__()
        self.names = sorted(names, key=len, reverse=True)
        #: The flow whose mirror is starting: its new threads log before they are named after it.
        self.starting: Optional[str] = None

    def flow_of(self, thread: str) -> Optional[str]:
        for name in self.names:
            if thread == name or thread.startswith(name + "/"):
                return name
        return None

    def filter(self, record: logging.LogRecord) -> bool:
        thread = record.threadName or ""
        name = self.flow_of(thread) or (self.starting if thread != "MainThread" else None)
        if name is not None:
            prefix = f"[{name}] "
            if isinstance(record.msg, str) and not record.msg.startswith(prefix):
                # A message with arguments is a format string: a % in the prefix would be one.
                record.msg = (prefix.replace("%", "%%") if record.args else prefix) + record.msg
        return True


class InProcess:
    """One run of an enabled flow in this process's threads: the MirrorMaker v1 command line's
    engine. (``on_spark.OnSpark`` is the same as the tasks of a Spark job.)"""

    def __init__(self, flow: Flow, supervisor: "Supervisor", singletons: Callable[[], bool]) -> None:
        handler, listener = load_plugins(flow.config)
        self.mirror = MirrorMaker(flow.config, handler, listener, singletons=singletons)
        self._name = flow.name
        self._supervisor = supervisor

    def run(self) -> Optional[Exception]:
        """Until stopped or failed; the failure, if one ended it."""
        mirror = self.mirror
        try:
            self._supervisor.start_mirror(self._name, mirror)
            mirror.run_until_stopped()
        except MirrorMakerError as exc:
            mirror.state.fail(exc)  # type: ignore[arg-type]
        except Exception as exc:  # a client that cannot be built: retried like a client error
            log.debug("starting %s failed", self._name, exc_info=True)
            mirror.state.fail(ClientFailed(f"{type(exc).__name__}: {exc}"))
        finally:
            mirror.shutdown()
        return mirror.state.failure

    def request_stop(self, signum: Optional[int] = None) -> None:
        self.mirror.state.request_stop(signum)

    def snapshot(self) -> dict:
        return self.mirror.snapshot()

    def readiness(self) -> Tuple[bool, str]:
        return self.mirror.readiness()

    def metrics(self):
        """(its MirrorMetrics, the streams running now)."""
        return self.mirror.metrics, len(self.mirror.threads)

    @staticmethod
    def stop_bound_s(flow: Flow) -> float:
        """A flow's stop: the shutdown timeout, and a grace per thread joined and the producer's close."""
        return flow.config.shutdown_timeout_s + JOIN_GRACE_S * (flow.config.num_streams + 1)


class FlowRunner:
    """One enabled flow: its runs (``InProcess``, or ``OnSpark``), started again after a
    failure that is not fatal."""

    def __init__(self, flow: Flow, supervisor: "Supervisor", election: SingletonElection) -> None:
        self.flow = flow
        self.election = election
        #: The current run, once there is one.
        self.current = None
        #: An exactly-once flow waiting for this node to hold its election (another node runs it).
        self.standing_by = False
        self.restarts = 0
        self._supervisor = supervisor
        self._thread = threading.Thread(target=self._run, name=flow.name, daemon=True)
        #: Kafka Connect's offsets topic kept at the flow's commits, for a switch back to MirrorMaker 2.
        self.keeper = ConnectOffsetsKeeper(flow, lambda: election.leading, supervisor.wait)

    def start(self) -> None:
        self._thread.start()

    def join(self, timeout_s: float) -> bool:
        self._thread.join(timeout_s)
        return not self._thread.is_alive()

    def snapshot(self) -> dict:
        current = self.current
        if current is None:
            return {"records": 0, "bytes": 0, "acked": 0, "lag": 0, "dropped": 0, "filtered": 0, "assigned": 0,
                    "queued": 0, "rebalanced": False, "at_end": True}
        return current.snapshot()

    def readiness(self) -> Tuple[bool, str]:
        current = self.current
        if current is None:
            if self.standing_by:  # an exactly-once flow another node runs: this node is as it should be
                return True, "standing by (another node holds the flow's election)"
            return False, "not started"
        return current.readiness()

    def _run(self) -> None:
        self.keeper.seen(take_over(self.flow))  # from Kafka's MirrorMaker 2, where it left the flow
        self.keeper.start()
        try:
            self._runs()
        finally:
            self.keeper.final()  # after the flow's last commit

    def _runs(self) -> None:
        supervisor, flow, attempt = self._supervisor, self.flow, 0
        while True:
            if flow.config.exactly_once and not self._wait_for_the_election():
                return  # stopping
            current = supervisor.new_run(flow, lambda: self.election.leading)
            if not supervisor.attach(self, current):
                return  # stopping
            started = time.monotonic()
            ended = threading.Event()
            handed_over = self._handed_over_when_not_leading(current, ended) if flow.config.exactly_once else None
            try:
                failure = current.run()
            finally:
                ended.set()
            if handed_over is not None and handed_over.is_set() and not supervisor.stopping:
                log.info("This node no longer holds the flow's election: its exactly-once streams stop here and "
                         "run on the node that holds it")
                self.current = None  # its figures are the other node's to report now
                continue
            if failure is None or supervisor.stopping:
                return
            if is_fatal(failure):
                supervisor.fatal(flow, failure)
                return
            if time.monotonic() - started > STABLE_S:
                attempt = 0
            delay = min(MAX_BACKOFF_S, BACKOFF_S * 2 ** attempt)
            attempt += 1
            self.restarts += 1
            log.warning("This flow failed: %s; the other flows go on, and this one starts again in %.0f s "
                        "(restart %d)", failure, delay, self.restarts)
            if supervisor.wait(delay):
                return


    def _wait_for_the_election(self) -> bool:
        """An exactly-once flow's shards have one transactional.id each, whatever node runs them:
        two nodes running them would fence each other for ever. So the flow runs on the node that
        holds its election (as its singletons do), and the others stand by. False: stopping."""
        if not self.election.leading:
            log.info("Exactly-once: this flow runs on the node that holds its election; standing by")
        self.standing_by = True
        try:
            while not self.election.leading:
                if self._supervisor.wait(ELECTION_CHECK_S):
                    return False
        finally:
            self.standing_by = False
        return True

    def _handed_over_when_not_leading(self, current, ended: threading.Event) -> threading.Event:
        """Stops ``current`` once this node loses the election (set: that is why it stopped)."""
        lost = threading.Event()

        def watch() -> None:
            while not ended.wait(ELECTION_CHECK_S) and not self._supervisor.stopping:
                if not self.election.leading:
                    lost.set()
                    current.request_stop()
                    return
        threading.Thread(target=watch, name=f"{self.flow.name}/election-watch", daemon=True).start()
        return lost


class HeartbeatsOnly:
    """A pair whose flow is not enabled: heartbeats only, from the elected node."""

    def __init__(self, flow: Flow, election: SingletonElection, shutdown_timeout_s: float) -> None:
        self.flow = flow
        self.metrics = MirrorMetrics()
        self.state = RunState(shutdown_timeout_s)
        options = replace(flow.config.replication, refresh_topics=False, sync_topic_configs=False,
                          sync_topic_acls=False, emit_checkpoints=False, sync_group_offsets=False)
        target_settings = connection_settings(flow.config.producer)
        target_admin = admin_client({**target_settings, **flow.config.target_admin},
                                    f"{flow.name}-heartbeats-admin")
        self._failover = ConsumerFailover(options, topic_rules(options), None, None, target_admin, target_settings,
                                          self.metrics)
        self._sync = TopicSync(options, None, None, None, target_admin, self.state,
                               active=lambda: election.leading)
        self._sync.name = f"{flow.name}/heartbeats"
        for interval, job in self._failover.jobs():
            self._sync.add(interval, job)

    def start(self) -> None:
        self._sync.start()

    def close(self, deadline: float) -> None:
        self.state.request_stop()
        self._sync.join(max(0.0, deadline - time.monotonic()) + JOIN_GRACE_S)
        self._failover.close(deadline)


class Supervisor:
    def __init__(self, flows: List[Flow], settings: RunSettings,
                 server_factory: Optional[Callable[["Supervisor"], object]] = None, spark=None) -> None:
        """``spark``: an ``on_spark.SparkFlows`` to run the flows' streams as Spark tasks
        (``--spark``); None: in this process's threads."""
        self.settings = settings
        self.spark = spark
        self._lock = threading.Lock()
        self._start_lock = threading.Lock()
        self._stop = threading.Event()
        self.stop_signal: Optional[int] = None
        self.failure: Optional[Tuple[Flow, Exception]] = None
        self._signals = SignalDispatch(self._on_signal, "dedicated-mode-signals")
        self._server_factory = server_factory
        self._server = None
        shutdown_s = settings.shutdown_timeout_ms / 1000.0
        self.elections = {flow.name: SingletonElection(
            flow.name, flow.election_conf, election_topic(flow.source), election_group(flow.source, flow.target),
            flow.config.replication.replication_factor, flow.config.target_admin) for flow in flows}
        self.runners = [FlowRunner(flow, self, self.elections[flow.name]) for flow in flows if flow.enabled]
        self.heartbeats = [HeartbeatsOnly(flow, self.elections[flow.name], shutdown_s)
                           for flow in flows if not flow.enabled]
        interval_s = settings.status_interval_ms / 1000.0
        self._reporters = [StatusReporter(runner.snapshot, interval_s, label=runner.flow.name)
                           for runner in self.runners]
        self._prefix = FlowPrefix([flow.name for flow in flows])

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def wait(self, timeout_s: float) -> bool:
        return self._stop.wait(timeout_s)

    # -- what the flows call -----------------------------------------------------------

    def new_run(self, flow: Flow, singletons: Callable[[], bool]):
        """A flow's next run, in threads or on Spark."""
        if self.spark is not None:
            return self.spark.attempt(flow, singletons)
        return InProcess(flow, self, singletons)

    def attach(self, runner: FlowRunner, current) -> bool:
        """Make ``current`` the runner's current run, unless the process is stopping."""
        with self._lock:
            if self._stop.is_set():
                return False
            runner.current = current
            return True

    def start_mirror(self, name: str, mirror: MirrorMaker) -> None:
        """Start a flow's mirror and name the threads it started after the flow (log lines say
        which flow they are about); one start at a time, so that the new threads are its own."""
        with self._start_lock:
            before = set(threading.enumerate())
            self._prefix.starting = name
            try:
                mirror.start()
            finally:
                for thread in threading.enumerate():
                    if thread not in before and self._prefix.flow_of(thread.name) is None:
                        thread.name = f"{name}/{thread.name}"
                self._prefix.starting = None

    def fatal(self, flow: Flow, failure: Exception) -> None:
        with self._lock:
            first = self.failure is None
            if first:
                self.failure = (flow, failure)
        if first:
            log.error("Flow %s: %s - it stopped without committing past it; stopping every flow", flow.name,
                      failure)
        self.request_stop()

    def request_stop(self, signum: Optional[int] = None) -> None:
        with self._lock:
            if self.stop_signal is None and signum is not None:
                self.stop_signal = signum
            self._stop.set()
            runs = [runner.current for runner in self.runners if runner.current is not None]
        for current in runs:
            current.request_stop(signum)

    # -- the run -----------------------------------------------------------------------

    def run(self) -> int:
        self._signals.install()
        for handler in logging.getLogger().handlers:
            handler.addFilter(self._prefix)
        try:
            self._start()
            while not self._stop.is_set():
                for reporter in self._reporters:
                    reporter.tick()
                self._stop.wait(TICK_S)
        finally:
            self._shutdown()
            self._signals.restore()
            for handler in logging.getLogger().handlers:
                handler.removeFilter(self._prefix)
        return self.exit_status()

    def _start(self) -> None:
        log.info("Kafka MirrorMaker (dedicated mode) starting: %d flows (%s), heartbeats only for %s",
                 len(self.runners), ", ".join(r.flow.name for r in self.runners) or "none",
                 ", ".join(h.flow.name for h in self.heartbeats) or "none")
        several = [f"{r.flow.name}: {r.flow.config.num_streams}" for r in self.runners if r.flow.config.num_streams > 1]
        if several:  # MirrorMaker 2 spreads tasks.max over its nodes; a team sizing its group needs to know
            log.info("tasks.max counts the streams of each node (MirrorMaker 2: across all its nodes); streams on "
                     "this node: %s", ", ".join(several))
        if self._server_factory is not None:
            self._server = self._server_factory(self)
        if self.spark is not None:
            self.spark.start()
            self._signals.install()  # a SparkContext made in the main thread takes SIGINT
        for election in self.elections.values():
            election.start()
        for emitter in self.heartbeats:
            emitter.start()
        for runner in self.runners:
            runner.start()

    def stop_bound_s(self) -> float:
        """How long the stop may take: every flow stops at once, each within its own bound."""
        engine = self.spark if self.spark is not None else InProcess
        bounds = [engine.stop_bound_s(runner.flow) for runner in self.runners]
        return (max(bounds, default=0.0) + 2 * JOIN_GRACE_S + FINAL_WRITE_S
                + (SPARK_STOP_S if self.spark is not None else 0.0))

    def _shutdown(self) -> None:
        self.request_stop()
        watchdog = StopWatchdog()
        bound = self.stop_bound_s()
        watchdog.arm(bound + STOP_WATCHDOG_GRACE_S)
        try:
            deadline = time.monotonic() + bound
            for runner in self.runners:
                if not runner.join(max(0.0, deadline - time.monotonic())):
                    log.warning("Flow %s did not stop in time", runner.flow.name)
            heartbeats_deadline = time.monotonic() + self.settings.shutdown_timeout_ms / 1000.0
            for emitter in self.heartbeats:
                emitter.close(heartbeats_deadline)
            for election in self.elections.values():
                election.stop()
            for election in self.elections.values():
                election.join(JOIN_GRACE_S)
            if self.spark is not None:
                self.spark.close()
            if self._server is not None:
                self._server.stop()
        finally:
            watchdog.disarm()

    def exit_status(self) -> int:
        return exit_codes.for_run(self.failure is not None, self.stop_signal)

    def readiness(self) -> Tuple[bool, str]:
        if self._stop.is_set():
            return False, "stopping"
        states = [(runner.flow.name, runner.readiness()) for runner in self.runners]
        waiting = [f"{name}: {reason}" for name, (ready, reason) in states if not ready]
        if waiting:
            return False, "; ".join(waiting)
        return True, f"ready: {len(states)} flows"

    # -- signals -----------------------------------------------------------------------

    def _on_signal(self, signum: int) -> None:
        if self.stop_signal is not None:
            log.warning("Second signal: exiting without waiting for the clean shutdown")
            os._exit(exit_codes.for_signal(signum))
        self.request_stop(signum)  # first: a second signal is told apart by its stop_signal
        log.info("Received %s, shutting down every flow", signal.Signals(signum).name)
