"""Where the machine's CPU went during one run: the tool's own threads, both brokers, the rest.

The goals of record mode and raw mode are ratios to limits measured on the same 2 cores that
also run both brokers, so a ratio below its goal says little by itself: a tool can be slow, or
the machine can be full. This reads /proc at the start of a window and at its end, and splits
the CPU seconds of that window into:

* the tool's librdkafka threads (librdkafka names its threads ``rdk:*``) and its other threads
  (Python's, all named after the process; or a JVM's), sampled per thread while it runs, since
  a thread that ends takes its counts with it;
* each broker's process (their JVMs, or Tansu);
* the benchmark itself (the watcher's ListOffsets every step);
* the rest of the machine (the kernel's softirq work for loopback TCP lands on whichever
  process was running, so most of it is in the figures above).

``busy`` is every core's non-idle time in the window, from /proc/stat; ``cores_busy`` is that
over the window's length: 2.0 is a full machine here. For the tool's busiest thread other than
librdkafka's, how long it ran and how long it was runnable but waited for a core (schedstat):
whether it was held back by the machine or by its own waits.
"""

from __future__ import annotations

import os
import time
from typing import Dict, Optional

_TICK = os.sysconf("SC_CLK_TCK")
#: A shorter window is within a few clock ticks: its split would be noise.
MIN_WINDOW_S = 0.1
_IDLE_FIELDS = (3, 4)  # idle, iowait in /proc/stat's cpu line
_TIME_FIELDS = 8  # user nice system idle iowait irq softirq steal (guest is inside user)


def _machine() -> tuple:
    """(busy, all) CPU seconds of every core since boot."""
    with open("/proc/stat") as stat:
        fields = [int(value) for value in stat.readline().split()[1:1 + _TIME_FIELDS]]
    idle = sum(fields[i] for i in _IDLE_FIELDS)
    return (sum(fields) - idle) / _TICK, sum(fields) / _TICK


def _stat_cpu(path: str) -> Optional[tuple]:
    """(name, CPU seconds) of a /proc/<pid>/stat or task stat file; None once it is gone."""
    try:
        with open(path) as stat:
            text = stat.read()
    except OSError:
        return None
    name = text[text.index("(") + 1:text.rindex(")")]
    fields = text.rsplit(")", 1)[1].split()
    return name, (int(fields[11]) + int(fields[12])) / _TICK  # utime, stime


def _schedstat(path: str) -> tuple:
    """(seconds running, seconds runnable but waiting for a core) of a thread, 0s once it is gone."""
    try:
        with open(path) as stat:
            running, waiting = stat.read().split()[:2]
    except (OSError, ValueError):
        return 0.0, 0.0
    return int(running) / 1e9, int(waiting) / 1e9


def _own_cpu() -> float:
    times = os.times()
    return times.user + times.system


class CpuSplit:
    """One run's window: ``start`` before the tool starts (or ``restart`` later, at its first
    record), ``sample`` at watcher steps, ``stop`` at the end of what is timed; ``result`` is the
    split in CPU seconds."""

    def __init__(self, others: Dict[str, int]) -> None:
        """``others``: name -> pid of the processes to account for (the brokers)."""
        self._others = dict(others)
        self._threads: Dict[str, tuple] = {}  # tid -> (name, CPU seconds), the latest reading
        self._sched: Dict[str, tuple] = {}  # tid -> (running, waiting for a core), the latest
        self._sched_start: Dict[str, tuple] = {}
        self._start = self._end = None
        self._exited = False

    def start(self) -> None:
        self._start = self._read()

    def restart(self, pid: int) -> None:
        """The window starts now instead, the tool running (its start-up left out)."""
        self.sample(pid)
        self._sched_start = dict(self._sched)
        self._start = self._read()

    def sample(self, pid: int) -> None:
        """Read the tool's threads now (each keeps its latest reading: one that ended is kept)."""
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            return
        for tid in tids:
            reading = _stat_cpu(f"/proc/{pid}/task/{tid}/stat")
            if reading is not None:
                self._threads[tid] = reading
                self._sched[tid] = _schedstat(f"/proc/{pid}/task/{tid}/schedstat")

    def stop(self, pid: int, exited_cpu: Optional[float] = None) -> None:
        """The end of the window: the tool still running (its threads are read now), or already
        exited and reaped with ``exited_cpu`` CPU seconds in all (its threads as last sampled
        give the librdkafka part; the rest is its other threads')."""
        if exited_cpu is None:
            self.sample(pid)
        self._exited = exited_cpu is not None
        self._end = self._read(exited_cpu)

    def _read(self, exited_cpu: Optional[float] = None) -> dict:
        others = {}
        for name, pid in self._others.items():
            reading = _stat_cpu(f"/proc/{pid}/stat")
            others[name] = reading[1] if reading else 0.0
        librdkafka = sum(cpu for name, cpu in self._threads.values() if name.startswith("rdk:"))
        other = sum(cpu for name, cpu in self._threads.values() if not name.startswith("rdk:"))
        if exited_cpu is not None:
            other = max(0.0, exited_cpu - librdkafka)
        others.update(tool_other_threads=other, tool_librdkafka_threads=librdkafka, benchmark=_own_cpu())
        return {"at": time.monotonic(), "machine": _machine(), "cpu": others}

    def result(self) -> Optional[dict]:
        """The split, CPU seconds (and the window's seconds); None if the window was not closed."""
        if self._start is None or self._end is None:
            return None
        start, end = self._start, self._end
        seconds = end["at"] - start["at"]
        if seconds < MIN_WINDOW_S:  # the first and the last record in one watcher step: nothing to split
            return None
        busy = end["machine"][0] - start["machine"][0]
        out = {"seconds": seconds, "busy": busy, "cores_busy": busy / seconds if seconds > 0 else 0.0}
        parts = {name: end["cpu"][name] - start["cpu"][name] for name in end["cpu"]}
        return {**out, **parts, "rest": busy - sum(parts.values()), **self._busiest_thread(seconds)}

    def _busiest_thread(self, seconds: float) -> dict:
        """The tool's busiest thread other than librdkafka's (a mirror's stream thread), in the
        window: the shares of it running and runnable but waiting for a core (/proc schedstat);
        the rest of the window it slept (on its data, a lock, the GIL). Only for a tool read
        while still running: the last sample of one that exited is up to a sample step old."""
        if self._exited or seconds <= 0:
            return {}
        deltas = []
        for tid, (running, waiting) in self._sched.items():
            if not self._threads[tid][0].startswith("rdk:"):
                run0, wait0 = self._sched_start.get(tid, (0.0, 0.0))
                deltas.append((running - run0, waiting - wait0))
        if not deltas:
            return {}
        running, waiting = max(deltas)
        return thread_shares(running, waiting, seconds)


def thread_shares(running: float, waiting: float, seconds: float) -> dict:
    """A thread's seconds running and waiting for a core as shares of a window of ``seconds``."""
    return {"busiest_thread_running": running / seconds, "busiest_thread_waiting": waiting / seconds}


def own_thread_times() -> tuple:
    """(seconds running, seconds waiting for a core) of the calling thread so far."""
    return _schedstat("/proc/thread-self/schedstat")
