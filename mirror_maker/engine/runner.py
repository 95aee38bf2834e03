"""Builds the mirror from a validated config, runs it, stops it, and returns the exit status.

Signals: the first SIGTERM or SIGINT asks every thread to stop, flush and commit, bounded by
the shutdown timeout; a second one exits at once. The exit status is the JVM's (143/130).
"""

from __future__ import annotations

import logging
import os
import signal
import time
from typing import Callable, List, Optional, Sequence, Tuple

from ..cli import exit_codes
from ..clients.admin import admin_client
from ..clients.target_topics import TargetTopics
from ..clients.client_errors import ClientErrors, principal
from ..config.mirror_config import MirrorMakerConfig
from ..errors import MirrorFailure
from ..handlers import DefaultMessageHandler, RawBatchHandler
from ..ops.metrics import MirrorMetrics
from ..ops.notify import notify
from ..ops.signals import SignalDispatch
from ..ops.stop_watchdog import GRACE_S as STOP_WATCHDOG_GRACE_S, StopWatchdog
from ..plugins import load_handler, load_listener
from ..replication.policies import topic_rules
from ..replication.topic_configs import TopicConfigs
from ..replication.topic_sync import TopicSync
from ..clients.producer import MirrorProducer
from .state import RunState
from ..ops.status import StatusReporter, snapshot
from .subscription import TopicSubscription
from .modes import mode_for
from .parts import Shared
from .stream import Stream

log = logging.getLogger("mirror_maker.MirrorMaker")

JOIN_GRACE_S = 5.0
#: A thread whose loop has not come round for this long makes /ready answer 503.
STALL_S = 30.0
TICK_S = 0.2
TOPIC_RETRY_S = 5.0


def load_plugins(config: MirrorMakerConfig):
    """The handler and the listener, built before anything connects."""
    raw = config.use_raw_bytes
    default = RawBatchHandler() if raw else DefaultMessageHandler()
    handler = (load_handler(config.message_handler, config.message_handler_args, raw=raw)
               if config.message_handler else default)
    listener = (load_listener(config.rebalance_listener, config.rebalance_listener_args)
                if config.rebalance_listener else None)
    return handler, listener


def offset_syncs_topic(config: MirrorMakerConfig, rules) -> Tuple[bool, dict, str]:
    """Where the offset syncs go: whether on the source, that cluster's connection settings,
    and the topic's name (MirrorMaker 2's ``mm2-offset-syncs.<other alias>.internal``)."""
    from ..clients.admin import connection_settings

    options = config.replication
    on_source = options.offset_syncs_location == "source"
    cluster = connection_settings(config.consumer if on_source else config.producer)
    return on_source, cluster, rules.policy.offset_syncs_topic(options.target_alias if on_source
                                                               else options.source_alias)


class MirrorMaker:
    """One producer, N mirror threads, a topic subscription and the shutdown sequence.

    ``streams`` are the thread numbers this process runs (all of ``--num.streams`` by default;
    one number in a Spark worker), which name the threads and their consumers' client ids.
    """

    def __init__(self, config: MirrorMakerConfig, handler, listener,
                 streams: Optional[Sequence[int]] = None, singletons: Optional[Callable[[], bool]] = None) -> None:
        """``singletons``: whether this process runs the syncs, checkpoints and heartbeats now
        (MirrorMaker 2's dedicated mode elects one node of several; None: always)."""
        self.config = config
        self._streams = range(config.num_streams) if streams is None else streams
        self.state = RunState(config.shutdown_timeout_s)
        self.metrics = MirrorMetrics()
        self._handler = handler
        self._listener = listener
        self.producer: Optional[MirrorProducer] = None
        self.threads: List[Stream] = []
        self.caught_up = False
        self.undelivered = 0
        #: Streams still running when the shutdown gave up on them.
        self.unfinished = 0
        self._server = None  # the ops endpoint, with --metrics.port
        self._status: Optional[StatusReporter] = None
        self.signals = SignalDispatch(self._on_signal, "mirror-maker-signals")
        self._topic_sync = None  # MirrorMaker 2's topic syncs, when one is on
        self._syncs_topic = None  # --emit.offset-syncs.enabled
        self._failover = None  # checkpoints, group offset sync, heartbeats
        self._singletons = singletons
        self._admins = ()  # the source's and the target's admin clients

    def start(self) -> None:
        config = self.config
        source_errors = ClientErrors("source", config.consumer["bootstrap.servers"], self.state,
                                     principal(config.consumer))
        target_errors = ClientErrors("target", config.producer["bootstrap.servers"], self.state,
                                     principal(config.producer))
        source_admin = admin_client({**config.source_admin_conf(), "error_cb": source_errors},
                                    f"{config.group_id}-admin")
        target_admin = admin_client({**config.target_admin_conf(), "error_cb": target_errors}, "producer-1-admin")
        self._admins = (source_admin, target_admin)
        rules = topic_rules(config.replication)
        configs = TopicConfigs(source_admin, target_admin, config.replication.config_exclude_pattern)
        target_topics = self._target_topics = TargetTopics(
            source_admin, target_admin, config.producer_batch_bytes, remote=rules.remote,
            replication_factor=config.replication.replication_factor,
            new_topic_configs=configs.for_new_topic if (config.replication.sync_topic_configs
                                                        or config.replication.mirror_maker_2_creation) else None,
            state=self.state)
        if rules.mm2_rules:
            self.metrics.target_topic = rules.remote
        self.producer = MirrorProducer(config.producer, self.state, config.abort_on_send_failure,
                                       config.sync_send, config.max_block_ms, self.metrics,
                                       topic_limits=target_topics.max_message_bytes,
                                       errors=target_errors)
        self._subscription = TopicSubscription(
            source_admin, config.include, config.exclude_internal_topics,
            config.topic_refresh_ms, config.consumer["bootstrap.servers"], rules, state=self.state)
        if config.replication.syncs and 0 in self._streams:  # one sync per run (Spark: task 0's)
            self._topic_sync = TopicSync(config.replication, target_topics, configs, source_admin, target_admin,
                                         self.state, active=self._singletons)
        shared = Shared(config, self.producer, self._handler, self._listener, self.state, self._subscription,
                        target_topics, self.metrics, source_errors)
        mode = mode_for(shared)
        self.threads = [Stream(i, mode, shared) for i in self._streams]
        mode.prepare(self.threads)
        self._start_failover(rules, source_admin, target_admin)
        # Exactly-once and raw streams have producers of their own: they count too.
        self.metrics.acknowledged = lambda: (self.producer.acknowledged()
                                             + sum(thread.acknowledged() for thread in self.threads))
        self.metrics.delivered = lambda: (self.producer.delivered()
                                          + sum(thread.delivered() for thread in self.threads))
        self.metrics.queue_depth = lambda: len(self.producer) + sum(thread.waiting() for thread in self.threads)
        self._status = StatusReporter(self.snapshot, config.status_interval_ms / 1000.0,
                                      progress=config.exit_when_caught_up)
        self.metrics.stalled_seconds = lambda: self._status.stalled_s
        self.metrics.assigned_partitions = self.assigned
        if config.metrics_port is not None:
            from ..ops.endpoint import OpsServer  # prometheus_client's server: only when asked for

            self._server = OpsServer(config.metrics_bind, config.metrics_port, self.metrics,
                                     self.readiness).start()
        self._subscription.refresh_if_due()
        for thread in self.threads:
            thread.start()
        if self._topic_sync is not None:
            self._topic_sync.start()

    def _start_failover(self, rules, source_admin, target_admin) -> None:
        """MirrorMaker 2's consumer failover: offset syncs written by every thread; checkpoints,
        group offset sync and heartbeats as jobs of the background thread."""
        options, config = self.config.replication, self.config
        if not options.emit_offset_syncs and not options.emit_heartbeats:
            return
        from ..clients.admin import connection_settings
        from ..replication.checkpoints import ConsumerFailover, OffsetSyncStore
        from ..replication.offset_syncs import OffsetSyncsTopic, OffsetSyncWriter

        store = None
        if options.emit_offset_syncs:
            on_source, cluster, name = offset_syncs_topic(config, rules)
            self._syncs_topic = OffsetSyncsTopic(name, cluster, source_admin if on_source else target_admin,
                                                 options.internal_replication_factor("offset-syncs"), self.metrics)
            for thread in self.threads:
                thread.offset_syncs = OffsetSyncWriter(
                    self._syncs_topic, target_admin, rules.remote, options.offset_lag_max, self.state,
                    transactional=config.exactly_once,
                    checkpoints_interval_s=options.emit_checkpoints_interval_s if options.emit_checkpoints else None,
                    fresh=self._target_topics.fresh)
            interval_ms = self.threads[0].offset_syncs.interval_ms if self.threads else float("inf")
            if interval_ms < config.offset_commit_interval_ms:
                log.info("Offsets are committed every %.0f ms (emit.checkpoints.interval.seconds), not every "
                         "%d ms (offset.commit.interval.ms): offset syncs follow the records", interval_ms,
                         config.offset_commit_interval_ms)
            if options.emit_checkpoints and self._topic_sync is not None:
                store = OffsetSyncStore(cluster, name)
        if self._topic_sync is not None:
            self._failover = ConsumerFailover(options, rules, store, source_admin, target_admin,
                                              connection_settings(config.producer), self.metrics)
            for interval, job in self._failover.jobs():
                self._topic_sync.add(interval, job)

    def snapshot(self) -> dict:
        """The numbers the status line, the caught-up check and a Spark driver read."""
        return snapshot(self.metrics, self.threads)

    def assigned(self) -> int:
        return sum(len(thread.assigned) for thread in self.threads)

    def readiness(self) -> Tuple[bool, str]:
        if self.state.stopping:
            return False, "stopping"
        if not self._status or self.assigned() == 0:
            return False, "no partitions assigned yet"
        now = time.monotonic()
        stalled = [t.name for t in self.threads if now - t.last_progress > STALL_S]
        if stalled:
            return False, f"no progress for {STALL_S:.0f} s in {', '.join(stalled)}"
        if self._status.stalled_s:
            return False, (f"stalled for {self._status.stalled_s:.0f} s: nothing acknowledged by the target or "
                           f"committed while records wait")
        return True, f"ready: {self.assigned()} partitions assigned"

    def run_until_stopped(self, on_tick: Optional[Callable[[], None]] = None) -> None:
        """Refresh topics, report status and watch for "caught up" until the mirror stops.

        ``on_tick`` runs on every round (a Spark worker reports its numbers to the driver)."""
        notified = False
        next_topic_check = 0.0
        while not self.state.stopping and any(t.is_alive() for t in self.threads):
            self._serve_client_events()
            self._subscription.refresh_if_due()
            if time.monotonic() >= next_topic_check:
                next_topic_check = time.monotonic() + TOPIC_RETRY_S
                self._retry_target_topics()
            self._status.tick()
            if on_tick is not None:
                on_tick()
            if not notified and self.assigned() > 0:
                notified = notify("READY=1")
            if self.config.exit_when_caught_up and self._status.caught_up():
                self.caught_up = True
                log.info("Every assigned partition is at its end: stopping (--exit.when.caught.up)")
                break
            self.state.wait(TICK_S)
        self.state.request_stop()

    def _serve_client_events(self) -> None:
        """The events of clients nothing polls while no record flows: the shared producer's say
        whether the target is reachable, the admin clients' a refused login before any consumer
        joins (e.g. an OAUTHBEARER token the provider will not give)."""
        self.producer.serve()
        for admin in self._admins:
            admin.poll(0)

    def _retry_target_topics(self) -> None:
        try:
            self._target_topics.retry_pending()
        except MirrorFailure as exc:
            self.state.fail(exc)

    def stop_bound_s(self) -> float:
        """How long ``shutdown`` may take from now: the stop's deadline, and a grace per thread
        joined after it and for the producer's close."""
        now = time.monotonic()
        return max(0.0, (self.state.deadline or now) - now) + JOIN_GRACE_S * (len(self.threads) + 1)

    def shutdown(self) -> None:
        """Wait for the threads (they flush and commit), then close the producer; bounded."""
        notify("STOPPING=1")
        if self.state.failed:
            log.info("Closing the mirror: a thread failed")
        else:
            log.info("Start clean shutdown.")
        deadline = self.state.deadline or time.monotonic()
        unfinished = []
        for thread in self.threads:
            if thread.ident is None:
                continue  # start() failed before this thread ran
            thread.join(max(0.0, deadline - time.monotonic()) + JOIN_GRACE_S)
            if thread.is_alive():
                unfinished.append(thread.name)
        undelivered = 0
        for closing in (self._syncs_topic, self._failover):
            if closing is not None:
                closing.close(deadline)
        if self.producer is not None:
            self.producer.close(deadline)
            undelivered = self.undelivered = self.producer.unacknowledged()
        if self._status is not None:
            self._status.close()
            if self.threads:
                self._status.log_line()
        if self._server is not None:
            self._server.stop()
        self.unfinished = len(unfinished)
        if unfinished:
            log.warning("Mirror maker stopped with %d streams not finished (%s): they were still waiting when "
                        "the shutdown timeout passed; what they did not commit is mirrored again on restart",
                        len(unfinished), ", ".join(unfinished))
        elif undelivered and not self.state.failed:
            log.warning("Mirror maker stopped with %d records the target has not acknowledged; "
                        "their offsets were not committed, so they are mirrored again on restart",
                        undelivered)
        elif not self.state.failed:
            log.info("Kafka mirror maker shutdown successfully")

    def summary(self) -> str:
        """The bounded run's one-line result (printed on stdout for cron)."""
        return self._status.summary()

    def exit_status(self) -> int:
        # A bounded run must not report success with records the target never acknowledged.
        return exit_codes.for_run(self.state.failed, self.state.stop_signal,
                                  incomplete=self.caught_up and (self.undelivered > 0 or self.unfinished > 0))

    # -- signals -----------------------------------------------------------------------

    def _on_signal(self, signum: int) -> None:
        # Only a second *signal* is impatient: a stop asked for otherwise (a failure, caught up,
        # a Spark driver's stop, then pyspark's SIGHUP) still flushes and commits.
        if self.state.stop_signal is not None:
            log.warning("Second signal: exiting without waiting for the clean shutdown")
            os._exit(exit_codes.for_signal(signum))
        self.state.request_stop(signum)  # first: a second signal is told apart by it
        log.info("Received %s, shutting down", signal.Signals(signum).name)


def run(config: MirrorMakerConfig, handler=None, listener=None) -> int:
    """Run the mirror in this process until a signal, a failure or the end; return the status."""
    if handler is None and listener is None:
        handler, listener = load_plugins(config)
    mirror = MirrorMaker(config, handler, listener)
    run_mirror(mirror)
    if mirror.state.failure is not None:
        log.error("%s - the mirror maker stopped without committing past it", mirror.state.failure)
    elif mirror.caught_up and mirror.exit_status() == exit_codes.OK:
        print(mirror.summary(), flush=True)
    return mirror.exit_status()


def run_mirror(mirror: MirrorMaker, on_tick: Optional[Callable[[], None]] = None) -> None:
    """Start, run until stopped, and always shut down (flush, commit, close) and restore signals."""
    mirror.signals.install()
    try:
        mirror.start()
        mirror.run_until_stopped(on_tick)
    finally:
        watchdog = StopWatchdog()
        watchdog.arm(mirror.stop_bound_s() + STOP_WATCHDOG_GRACE_S)
        try:
            mirror.shutdown()
        finally:
            watchdog.disarm()
        mirror.signals.restore()
