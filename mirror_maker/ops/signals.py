"""SIGTERM and SIGINT handled in threads of their own, where taking a lock is safe.

Python runs a signal handler in the main thread between two of its bytecodes, possibly while that
thread holds a lock the handler needs: inside ``threading.Event.wait()``, whose lock is not
reentrant, or inside a stop's own lock. The handler would then wait for ever on its own thread,
and the stop's watchdog, armed only once the main loop sees the stop, would never fire. So the
installed handler only puts the signal on a ``queue.SimpleQueue`` (whose ``put`` is documented as
safe in a signal handler), and a daemon thread starts a thread per signal for the real handler:
a second signal (impatient: exit at once) is not held up behind a first one that waits.
"""

from __future__ import annotations

import logging
import queue
import signal
import threading
from typing import Callable, Dict, Iterable, List, Optional

from .stop_watchdog import exit_process

SIGNALS = (signal.SIGTERM, signal.SIGINT)
#: How long :meth:`SignalDispatch.restore` waits for the handling of a signal already received.
RESTORE_WAIT_S = 1.0

log = logging.getLogger("mirror_maker.signals")


def exit_on_sigterm_until_handled() -> None:
    """Until a :class:`SignalDispatch` takes SIGTERM (once the command line is read and the run
    begins), SIGTERM ends the process with status 143, as the JVM does from its first moment:
    Python's default action would end it by the signal itself, which a parent sees as -15, not as
    the exit code Kafka's tool gives. Nothing is connected yet, so nothing waits to be flushed."""
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _exit_on_signal)


def _exit_on_signal(signum, frame) -> None:
    exit_process(128 + signum)


class SignalDispatch:
    """``on_signal(signum)`` for each of ``signals``, each call in a thread named after ``name``."""

    def __init__(self, on_signal: Callable[[int], None], name: str = "signal-handler",
                 signals: Iterable[int] = SIGNALS) -> None:
        self._on_signal = on_signal
        self._name = name
        self._signals = tuple(signals)
        self._received: Optional["queue.SimpleQueue[Optional[int]]"] = None
        self._previous: Dict[int, object] = {}
        self._dispatcher: Optional[threading.Thread] = None
        self._handlers: List[threading.Thread] = []

    def install(self) -> None:
        """Take the signals (only the main thread may); again after a library took one back (a
        SparkContext takes SIGINT), keeping what was there first for :meth:`restore`."""
        if threading.current_thread() is not threading.main_thread():
            return
        if self._dispatcher is None:
            self._received = queue.SimpleQueue()
            self._dispatcher = threading.Thread(target=self._dispatch, args=(self._received,), name=self._name,
                                                daemon=True)
            self._dispatcher.start()
        for signum in self._signals:
            previous = signal.signal(signum, self._handle)
            self._previous.setdefault(signum, previous)

    def restore(self) -> None:
        """Put the handlers there before back, once a signal already received is handled (its
        stop counts in the exit status), waiting at most ``RESTORE_WAIT_S``."""
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        self._previous.clear()
        if self._dispatcher is None:
            return
        self._received.put(None)
        self._dispatcher.join(RESTORE_WAIT_S)
        for handler in list(self._handlers):
            handler.join(RESTORE_WAIT_S)
        self._dispatcher, self._handlers = None, []

    def _handle(self, signum, frame) -> None:
        self._received.put(signum)

    def _dispatch(self, received: "queue.SimpleQueue[Optional[int]]") -> None:
        while True:
            signum = received.get()
            if signum is None:
                return
            handler = threading.Thread(target=self._call, args=(signum,), name=f"{self._name}-{len(self._handlers)}",
                                       daemon=True)
            self._handlers.append(handler)
            handler.start()

    def _call(self, signum: int) -> None:
        try:
            self._on_signal(signum)
        except Exception as exc:  # a thread's exception would print a traceback
            log.error("Handling %s failed: %s", signal.Signals(signum).name, exc)
