"""The last bound on a stop, for when no Python code can run any more.

A stop is bounded by ``--shutdown.timeout.ms``: threads are joined with a deadline and are
daemons, so a thread stuck in a client call is left behind. That holds only while the stuck call
lets go of the GIL. confluent-kafka 2.16 does not always: at a consumer's close, its rebalance
callback asks librdkafka for the rebalance protocol while holding the GIL, and librdkafka may
never answer (https://github.com/confluentinc/librdkafka/issues/4041), so every Python thread,
the one enforcing the deadline included, waits for ever. A stop serves that callback before the
close (``GroupMembership._revoke_before_close``), except for a static member; the watchdog stays
for that case and for any other call that keeps the GIL.

So the stop also arms two timers that need no GIL: faulthandler's, which writes every thread's
stack to stderr (what the log then shows), and one second later the kernel's SIGALRM with its
default action, which ends the process (status 142, 128 + SIGALRM). A stop that finishes
disarms both.

Once the run is over the process ends through :func:`exit_process`, without the interpreter's
finalization: the run has flushed, committed and closed what it must by then, and what
finalization would still do is destroy the client handles left (the admin clients, a consumer of
a stream the stop gave up on), where librdkafka's destroy can wait for ever on a broker thread
(https://github.com/confluentinc/librdkafka/issues/1640) with no watchdog left to end it.
"""

from __future__ import annotations

import atexit
import faulthandler
import logging
import math
import os
import signal
import sys
import threading
from typing import NoReturn

#: Added to the stop's own bound before the watchdog fires: it is for a stop that cannot end.
GRACE_S = 10.0


class StopWatchdog:
    def __init__(self) -> None:
        self._previous = None
        self._armed = False

    def arm(self, seconds: float) -> None:
        """End the process ``seconds`` from now (whole seconds, at least one) unless disarmed.
        Only the main thread may set signal handlers: elsewhere (a Spark task's thread) nothing
        is armed."""
        if threading.current_thread() is not threading.main_thread() or self._armed:
            return
        whole = max(1, math.ceil(seconds))
        try:
            faulthandler.dump_traceback_later(whole, exit=False, file=sys.stderr)
        except (RuntimeError, ValueError, OSError):  # no stderr with a file descriptor: no stacks
            pass
        self._previous = signal.signal(signal.SIGALRM, signal.SIG_DFL)
        signal.alarm(whole + 1)
        self._armed = True

    def disarm(self) -> None:
        if not self._armed:
            return
        signal.alarm(0)
        faulthandler.cancel_dump_traceback_later()  # a no-op when none was armed
        signal.signal(signal.SIGALRM, self._previous if self._previous is not None else signal.SIG_DFL)
        self._armed = False


def dump_stacks_on_sigusr1() -> None:
    """``kill -USR1 <pid>`` writes every thread's stack to stderr (the log), as ``jstack`` does
    for Kafka's tools: faulthandler needs no GIL, so it shows a process that seems hung too."""
    if hasattr(signal, "SIGUSR1") and threading.current_thread() is threading.main_thread():
        try:
            faulthandler.register(signal.SIGUSR1, file=sys.stderr, all_threads=True, chain=False)
        except (RuntimeError, ValueError, OSError):  # no stderr with a file descriptor: no dump
            pass


def exit_process(status: int) -> NoReturn:
    """End the process with ``status``: atexit's callbacks (a private directory's removal), the
    log and the standard streams flushed, then ``os._exit``; all of it bounded by the watchdog.
    Each step runs whatever the one before raised (Python 3.9's atexit raises a callback's
    exception again)."""
    StopWatchdog().arm(GRACE_S)
    for step in (atexit._run_exitfuncs, logging.shutdown, lambda: sys.stdout.flush(),
                 lambda: sys.stderr.flush()):  # either stream may be None (closed at the start)
        try:
            step()
        except BaseException:  # nothing may keep the process from ending
            pass
    os._exit(status)
