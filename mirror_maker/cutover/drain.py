"""Run a flow until every partition it mirrors is at its end and acknowledged by the target."""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Dict, Optional

log = logging.getLogger("mirror_maker.cutover")


@dataclass
class Drained:
    """How the drain ended: the mirror's exit status and whether it caught up in time."""

    #: The mirror's exit status when it failed or a signal stopped it (0 otherwise).
    status: int
    caught_up: bool
    #: Records still behind the source's ends when it stopped.
    lag: int
    failure: Optional[str] = None
    #: Records the target had not acknowledged when the stop's deadline passed.
    unacknowledged: int = 0
    #: Streams still waiting (to flush or commit) when the stop's deadline passed.
    unfinished: int = 0
    #: Cluster -> seconds it had been unreachable when the drain stopped.
    unreachable: Dict[str, float] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.status == 0 and self.caught_up and not self.unacknowledged and not self.unfinished

    def describe(self, seconds: float) -> str:
        away = "".join(f" (the {side} cluster unreachable for {seconds_away:.0f} s)"
                       for side, seconds_away in sorted(self.unreachable.items()))
        if self.failure is not None:
            return f"the drain failed: {self.failure}"
        if self.status:
            return f"the drain was stopped (exit {self.status})"
        if not self.caught_up:
            return f"not drained within --timeout.ms ({seconds:.0f} s): {self.lag} records still to mirror{away}"
        if self.unfinished and not self.unacknowledged:
            return f"not drained: {self.unfinished} streams had not committed when --shutdown.timeout.ms passed{away}"
        if self.unacknowledged:
            return (f"not drained: {self.unacknowledged} records not acknowledged by the target before "
                    f"--shutdown.timeout.ms{away}")
        return "drained: every partition is at its end and acknowledged by the target"


def drain(config, handler, listener, deadline: float) -> Drained:
    """The mirror with ``--exit.when.caught.up``, stopped at ``deadline`` (monotonic) if it has
    not caught up by then; the stop flushes and commits as any stop does."""
    from ..engine.runner import MirrorMaker, run_mirror

    mirror = MirrorMaker(dataclasses.replace(config, exit_when_caught_up=True), handler, listener)
    timer = threading.Timer(max(0.0, deadline - time.monotonic()), mirror.state.request_stop)
    timer.daemon = True
    timer.start()
    try:
        run_mirror(mirror)
    finally:
        timer.cancel()
    failure, totals = mirror.state.failure, mirror.snapshot()
    stopped = failure is not None or mirror.state.stop_signal is not None
    return Drained(mirror.exit_status() if stopped else 0, mirror.caught_up, int(totals.get("lag", 0)),
                   None if failure is None else str(failure), mirror.undelivered, mirror.unfinished,
                   dict(totals.get("unreachable") or {}))
