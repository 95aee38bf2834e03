"""The periodic status line, and the bounded run's "caught up" check with its progress display.

Every ``--status.interval.ms`` one INFO line says how fast the mirror goes and how far behind it
is. With ``--exit.when.caught.up`` the mirror stops (flushing and committing as on SIGTERM) and
exits 0 once every assigned partition reached its end at a check; on a terminal a tqdm bar shows
the remaining lag, off a terminal the status lines do.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Callable, List, Optional

from .metrics import MirrorMetrics
from .stall import STALL_S, ProgressWatch

log = logging.getLogger("mirror_maker.status")


def snapshot(metrics: MirrorMetrics, threads: List) -> dict:
    """This process's numbers for the status line and the "caught up" check.

    The same keys come from every Spark worker over the control channel, so the driver's
    reporter sums them (``combine``) and reads them exactly as a single process's.
    """
    totals = metrics.totals()
    totals["assigned"] = sum(len(thread.assigned) for thread in threads)
    totals["queued"] = metrics.queue_depth()
    # Every thread has taken part in a rebalance, and every assigned partition's position
    # reached the high watermark of its last fetch.
    totals["rebalanced"] = bool(threads) and all(thread.rebalanced for thread in threads)
    totals["at_end"] = all(thread.assigned <= thread.at_end for thread in threads)
    return totals


SUMMED = ("records", "bytes", "acked", "delivered", "lag", "dropped", "filtered", "assigned", "queued", "commits")


def combine(snapshots: List[dict]) -> dict:
    """The snapshot of several processes: counts summed, flags true only if true in all."""
    combined = {key: sum(s.get(key, 0) for s in snapshots) for key in SUMMED}
    combined["rebalanced"] = bool(snapshots) and all(s.get("rebalanced") for s in snapshots)
    combined["at_end"] = all(s.get("at_end") for s in snapshots)
    combined["unreachable"] = {}
    for snapshot_ in snapshots:
        for side, seconds in snapshot_.get("unreachable", {}).items():
            combined["unreachable"][side] = max(seconds, combined["unreachable"].get(side, 0.0))
    return combined


class StatusReporter:
    def __init__(self, snapshot: Callable[[], dict], interval_s: float, progress: bool = False,
                 clock: Callable[[], float] = time.monotonic, stall_s: float = STALL_S, label: str = "") -> None:
        """``label``: what the line is about when a process has several (a flow's name)."""
        self._snapshot = snapshot
        self._label = f" {label}" if label else ""
        self._interval_s = interval_s
        self._clock = clock
        self._watch = ProgressWatch(stall_s, clock)
        #: Seconds without progress while records wait (``ops.stall``); 0 while progressing.
        self.stalled_s = 0.0
        self._warned_stall_s = 0.0  # the stall's age at its last WARN line
        self._started = clock()
        self._last_time = self._started
        self._last = snapshot()
        self._bar = None
        self._progress = progress and sys.stderr.isatty()

    def tick(self) -> None:
        """Called often by the runner; watches progress, logs when the interval passed, updates
        the bar."""
        now = self._clock()
        self.stalled_s = self._watch.look(self._snapshot())
        if self._progress:
            self._update_bar()
        if self._interval_s > 0 and now - self._last_time >= self._interval_s:
            self.log_line(now)

    def log_line(self, now: Optional[float] = None) -> None:
        now = self._clock() if now is None else now
        totals = self._snapshot()
        elapsed = max(now - self._last_time, 1e-9)
        # A mirror started again (a flow of the dedicated mode) counts from zero: no negative rate.
        rate = max(0.0, totals["records"] - self._last["records"]) / elapsed
        mbps = max(0.0, totals["bytes"] - self._last["bytes"]) / elapsed / 1e6
        away = "".join(f", the {side} cluster unreachable for {seconds:.0f} s"
                       for side, seconds in sorted(totals.get("unreachable", {}).items()))
        stalled = (f"; STALLED for {self.stalled_s:.0f} s: nothing acknowledged by the target or committed while "
                   f"records wait" if self.stalled_s else "")
        log.log(self._stall_level(),
                "Status%s: %.1f records/s, %.2f MB/s, lag %d, dropped %d, %d partitions assigned, "
                "%d records mirrored in total, %d waiting for the target%s%s", self._label, rate, mbps, totals["lag"],
                totals["dropped"], totals["assigned"], totals["acked"], totals["queued"], away, stalled)
        self._last, self._last_time = totals, now

    def _stall_level(self) -> int:
        """WARN when a stall is first reported and each time its age doubles; the lines between
        say it at INFO (a 30 s outage is two WARN lines, not one every status interval)."""
        if not self.stalled_s:
            self._warned_stall_s = 0.0
            return logging.INFO
        if self.stalled_s >= 2 * self._warned_stall_s:
            self._warned_stall_s = self.stalled_s
            return logging.WARNING
        return logging.INFO

    def caught_up(self) -> bool:
        """Every consumer has taken part in a rebalance, some partition is assigned, and every
        assigned partition's position reached the high watermark of its last fetch."""
        totals = self._snapshot()
        return totals["rebalanced"] and totals["assigned"] > 0 and totals["at_end"]

    def summary(self) -> str:
        totals = self._snapshot()
        seconds = self._clock() - self._started
        return (f"Caught up: {totals['acked']} records ({totals['bytes'] / 1e6:.2f} MB of values) "
                f"mirrored in {seconds:.1f} s, {totals['dropped']} dropped; every assigned "
                f"partition is at its end and committed")

    def _update_bar(self) -> None:
        lag = self._snapshot()["lag"]
        if self._bar is None:
            from tqdm import tqdm

            self._bar = tqdm(total=max(lag, 1), desc="remaining lag", unit="rec", file=sys.stderr)
        if lag > self._bar.total:
            self._bar.total = lag
        self._bar.n = self._bar.total - lag
        self._bar.refresh()

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
