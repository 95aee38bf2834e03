"""SIGTERM and SIGINT handled in a thread of their own, where taking a lock is safe.

Python runs a signal handler in the main thread between two of its bytecodes, possibly while that
thread holds a lock the handler needs: inside ``threading.Event.wait()``, whose lock is not
reentrant, or inside a stop's own lock. The handler would then wait for ever on its own thread,
and the stop's watchdog, armed only once the main loop sees the stop, would never fire. So the
installed handler only puts the signal on a ``queue.SimpleQueue`` (whose ``put`` is documented as
safe in a signal handler) and a daemon thread calls the real one.
"""

from __future__ import annotations

import logging
import queue
import signal
import threading
from typing import Callable, Dict, Iterable, Optional

SIGNALS = (signal.SIGTERM, signal.SIGINT)

log = logging.getLogger("mirror_maker.signals")

_END = -1


class SignalDispatch:
    """``on_signal(signum)`` for each of ``signals``, called in the thread ``name``."""

    def __init__(self, on_signal: Callable[[int], None], name: str = "signal-handler",
                 signals: Iterable[int] = SIGNALS) -> None:
        self._on_signal = on_signal
        self._name = name
        self._signals = tuple(signals)
        self._received: "queue.SimpleQueue[int]" = queue.SimpleQueue()
        self._previous: Dict[int, object] = {}
        self._thread: Optional[threading.Thread] = None

    def install(self) -> None:
        """Take the signals (only the main thread may); again after a library took one back (a
        SparkContext takes SIGINT), keeping what was there first for :meth:`restore`."""
        if threading.current_thread() is not threading.main_thread():
            return
        if self._thread is None:
            self._thread = threading.Thread(target=self._dispatch, name=self._name, daemon=True)
            self._thread.start()
        for signum in self._signals:
            previous = signal.signal(signum, self._handle)
            self._previous.setdefault(signum, previous)

    def restore(self) -> None:
        for signum, previous in self._previous.items():
            signal.signal(signum, previous)
        self._previous.clear()
        if self._thread is not None:
            self._received.put(_END)
            self._thread = None

    def _handle(self, signum, frame) -> None:
        self._received.put(signum)

    def _dispatch(self) -> None:
        while True:
            signum = self._received.get()
            if signum == _END:
                return
            try:
                self._on_signal(signum)
            except Exception as exc:  # the next signal must still be handled
                log.error("Handling %s failed: %s", signal.Signals(signum).name, exc)
