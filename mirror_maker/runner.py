"""Builds the mirror from a validated config, runs it, stops it, and returns the exit status.

Signals: the first SIGTERM or SIGINT asks every thread to stop, flush and commit, bounded by
the shutdown timeout; a second one exits at once. The exit status is the JVM's (143/130).
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from typing import List, Optional

from . import exit_codes
from .admin import TargetTopics, admin_client
from .config import MirrorMakerConfig
from .handlers import DefaultMessageHandler
from .plugins import load_handler, load_listener
from .producer import MirrorProducer
from .state import RunState
from .subscription import TopicSubscription
from .worker import MirrorThread

log = logging.getLogger("mirror_maker.MirrorMaker")

SIGNAL_EXIT = {signal.SIGTERM: exit_codes.SIGTERM, signal.SIGINT: exit_codes.SIGINT}
JOIN_GRACE_S = 5.0


def load_plugins(config: MirrorMakerConfig):
    """The handler and the listener, built before anything connects."""
    handler = (load_handler(config.message_handler, config.message_handler_args)
               if config.message_handler else DefaultMessageHandler())
    listener = (load_listener(config.rebalance_listener, config.rebalance_listener_args)
                if config.rebalance_listener else None)
    return handler, listener


class MirrorMaker:
    """One producer, N mirror threads, a topic subscription and the shutdown sequence."""

    def __init__(self, config: MirrorMakerConfig, handler, listener) -> None:
        self.config = config
        self.state = RunState(config.shutdown_timeout_s)
        self._handler = handler
        self._listener = listener
        self.producer: Optional[MirrorProducer] = None
        self.threads: List[MirrorThread] = []
        self._previous_handlers = {}

    def start(self) -> None:
        config = self.config
        self.producer = MirrorProducer(config.producer, self.state, config.abort_on_send_failure,
                                       config.sync_send, config.max_block_ms)
        source_admin = admin_client(config.consumer, f"{config.group_id}-admin")
        target_admin = admin_client(config.producer, "producer-1-admin")
        self._subscription = TopicSubscription(
            source_admin, config.include, config.exclude_internal_topics,
            config.topic_refresh_ms, config.consumer["bootstrap.servers"])
        target_topics = TargetTopics(source_admin, target_admin)
        self._subscription.refresh_if_due()
        self.threads = [
            MirrorThread(i, config, self.producer, self._handler, self._listener, self.state,
                         self._subscription, target_topics)
            for i in range(config.num_streams)
        ]
        for thread in self.threads:
            thread.start()

    def run_until_stopped(self) -> None:
        """Refresh the subscription until a stop is requested or every thread ended."""
        while not self.state.stopping and any(t.is_alive() for t in self.threads):
            self._subscription.refresh_if_due()
            self.state.wait(0.5)
        self.state.request_stop()

    def shutdown(self) -> None:
        """Wait for the threads (they flush and commit), then close the producer; bounded."""
        if self.state.failed:
            log.info("Closing the mirror: a thread failed")
        else:
            log.info("Start clean shutdown.")
        deadline = self.state.deadline or time.monotonic()
        for thread in self.threads:
            thread.join(max(0.0, deadline - time.monotonic()) + JOIN_GRACE_S)
            if thread.is_alive():
                log.warning("%s did not stop in time", thread.name)
        undelivered = 0
        if self.producer is not None:
            self.producer.close(deadline)
            undelivered = len(self.producer)
        if undelivered and not self.state.failed:
            log.warning("Mirror maker stopped with %d records the target has not acknowledged; "
                        "their offsets were not committed, so they are mirrored again on restart",
                        undelivered)
        elif not self.state.failed:
            log.info("Kafka mirror maker shutdown successfully")

    def exit_status(self) -> int:
        if self.state.failure is not None:
            return exit_codes.FATAL
        if self.state.stop_signal is not None:
            return SIGNAL_EXIT.get(self.state.stop_signal, exit_codes.FATAL)
        return exit_codes.OK

    # -- signals -----------------------------------------------------------------------

    def install_signal_handlers(self) -> None:
        if threading.current_thread() is not threading.main_thread():
            return
        for signum in SIGNAL_EXIT:
            self._previous_handlers[signum] = signal.signal(signum, self._on_signal)

    def restore_signal_handlers(self) -> None:
        for signum, previous in self._previous_handlers.items():
            signal.signal(signum, previous)
        self._previous_handlers.clear()

    def _on_signal(self, signum, frame) -> None:
        if self.state.stopping:
            log.warning("Second signal: exiting without waiting for the clean shutdown")
            os._exit(SIGNAL_EXIT.get(signum, exit_codes.FATAL))
        log.info("Received %s, shutting down", signal.Signals(signum).name)
        self.state.request_stop(signum)


def run(config: MirrorMakerConfig, handler=None, listener=None) -> int:
    """Run the mirror in this process until a signal, a failure or the end; return the status."""
    if handler is None and listener is None:
        handler, listener = load_plugins(config)
    mirror = MirrorMaker(config, handler, listener)
    mirror.install_signal_handlers()
    try:
        mirror.start()
        mirror.run_until_stopped()
    finally:
        mirror.shutdown()
        mirror.restore_signal_handlers()
    if mirror.state.failure is not None:
        log.error("%s - the mirror maker stopped without committing past it", mirror.state.failure)
    return mirror.exit_status()
