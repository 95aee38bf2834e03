"""The state every mirror thread shares: whether to stop, and the first fatal failure.

Threads never exit the process; they record a failure here and return. The runner turns the
outcome into an exit code. The first failure wins; later ones are consequences and are only
logged at DEBUG.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable, List, Optional

from ..errors import MirrorFailure

log = logging.getLogger("mirror_maker.state")


class RunState:
    def __init__(self, shutdown_timeout_s: float = 30.0) -> None:
        self._shutdown_timeout_s = shutdown_timeout_s
        #: When stopping, the ``time.monotonic()`` by which flushing must give up (bounded shutdown).
        self.deadline: Optional[float] = None
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self.failure: Optional[MirrorFailure] = None
        self.stop_signal: Optional[int] = None
        self._on_stop: List[Callable[[], None]] = []

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    @property
    def failed(self) -> bool:
        return self.failure is not None

    def request_stop(self, signum: Optional[int] = None) -> None:
        with self._lock:
            if self.stop_signal is None and signum is not None:
                self.stop_signal = signum
            if self.deadline is None:
                self.deadline = time.monotonic() + self._shutdown_timeout_s
        self._set_stop()

    def fail(self, failure: MirrorFailure) -> bool:
        """Record a fatal failure and stop everything; True if it was the first one."""
        with self._lock:
            first = self.failure is None
            if first:
                self.failure = failure
        if not first:
            log.debug("further failure after the first: %s", failure)
        self._set_stop()
        return first

    def on_stop(self, wake: Callable[[], None]) -> None:
        """Call ``wake`` when a stop is requested (at once if it already was): for a thread that
        waits on something other than :meth:`wait`, such as a network selector's poll."""
        with self._lock:
            self._on_stop.append(wake)
        if self.stopping:
            wake()

    def _set_stop(self) -> None:
        self._stop.set()
        with self._lock:
            wakes = list(self._on_stop)
        for wake in wakes:
            try:
                wake()
            except Exception:  # a closed selector: its thread is gone already
                log.debug("waking a thread for the stop failed", exc_info=True)

    def wait(self, timeout_s: float) -> bool:
        """Wait up to ``timeout_s`` for a stop; True if stopping."""
        return self._stop.wait(timeout_s)
