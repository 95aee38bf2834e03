"""The Spark configuration a mirror run needs: master, forced and default settings, worker Python.

Pure functions (no pyspark import), so every rule here is unit-tested without a JVM.

The design runs the N streams as one barrier job of N tasks that never end on their own. That
makes a few Spark settings wrong for it, whatever the user asks for, and those are forced with
a WARN naming the reason when the user's value differs:

* speculation would start a second copy of a stream, consuming in the same group;
* dynamic allocation is refused by barrier jobs, and would take executors from running streams;
* the Python worker idle timeout kills a task whose source is quiet.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Mapping, Optional, Tuple

from ..config import spec
from ..errors import ConfigError

#: The ``--spark.*`` options' defaults, from the spec.
_DEFAULTS = spec.defaults("spark")

FORCED: Dict[str, Tuple[str, str]] = {
    "spark.speculation": ("false", "a speculative copy of a stream would consume the same partitions"),
    "spark.dynamicAllocation.enabled": ("false", "barrier jobs refuse it, and it would take "
                                        "executors away from running streams"),
    "spark.python.worker.idleTimeoutSeconds": ("0", "a stream whose source is quiet would be killed"),
    "spark.python.worker.killOnIdleTimeout": ("false", "a stream whose source is quiet would be killed"),
}

DEFAULTS = {
    "spark.app.name": "kafka-mirror-maker",
    "spark.ui.showConsoleProgress": "false",
    "spark.log.level": "WARN",
    # "Not enough slots" after about 30 s (executors may still be registering) instead of
    # Spark's 15 s x 40 checks (10 minutes). A local master's slots are checked before starting.
    "spark.scheduler.barrier.maxConcurrentTasksCheck.interval": "2s",
    "spark.scheduler.barrier.maxConcurrentTasksCheck.maxFailures": "15",
    "spark.python.worker.faulthandler.enabled": "true",
}

#: Local mode stays on loopback and opens no web UI.
LOCAL_DEFAULTS = {
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.ui.enabled": "false",
}

_LOCAL = re.compile(r"^local(\[(\*|\d+)(,\s*\d+)?\])?$")


@dataclass(frozen=True)
class SparkOptions:
    """The ``--spark.*`` options as given."""

    master: Optional[str] = _DEFAULTS["master"]
    conf: Tuple[str, ...] = _DEFAULTS["conf"]
    py_files: Tuple[str, ...] = ()
    max_restarts: int = _DEFAULTS["max_restarts"]


@dataclass(frozen=True)
class SparkPlan:
    """What the driver starts: the master, the full conf, and the notes to log about it."""

    master: str
    conf: Dict[str, str]
    local: bool
    notes: List[Tuple[str, str]] = field(default_factory=list)  # (level name, message)
    #: Keys whose value is only our default: a setting spark-submit was given wins over them.
    defaulted: frozenset = frozenset()


def is_local(master: str) -> bool:
    return master.startswith("local")


def local_slots(master: str) -> Optional[int]:
    """How many tasks ``local[K]`` runs at once (None for ``local[*]`` and non-local masters)."""
    match = _LOCAL.match(master.strip())
    if not match:
        return None
    if match.group(2) is None:
        return 1
    return None if match.group(2) == "*" else int(match.group(2))


def parse_conf(items: Iterable[str]) -> Dict[str, str]:
    conf = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--spark.conf: '{item}' is not key=value")
        conf[key.strip()] = value.strip()
    return conf


def plan(options: SparkOptions, streams: int, cpu_count: Optional[int] = None,
         submitted_master: Optional[str] = None, asked: Optional[str] = None) -> SparkPlan:
    """Master and conf for ``streams`` concurrent tasks; refuses a local master with too few slots.

    ``submitted_master`` is spark-submit's ``--master`` when spark-submit started the tool;
    ``asked``: what asks for the streams, for the refusal's line (``--num.streams N``).
    """
    master = (options.master or submitted_master or f"local[{streams}]").strip()
    local = is_local(master)
    slots = local_slots(master) if local else None
    if local and slots is None and master.startswith("local[*"):
        slots = cpu_count or os.cpu_count() or 1
    if local and slots is not None and slots < streams:
        asked = asked or f"--num.streams {streams}"
        raise ConfigError(f"--spark.master {master} runs {slots} task(s) at once but {asked} needs "
                          f"{streams}: use local[{streams}]")
    user = parse_conf(options.conf)
    conf = dict(DEFAULTS)
    if local:
        conf.update(LOCAL_DEFAULTS)
    conf.update(user)
    notes = []
    for key, (value, reason) in FORCED.items():
        if key in user and user[key].lower() != value:
            notes.append(("WARNING", f"--spark.conf {key}={user[key]} is overridden with {value}: "
                                     f"{reason}"))
        conf[key] = value
    defaulted = frozenset(key for key in conf if key not in user and key not in FORCED)
    return SparkPlan(master, conf, local, notes, defaulted)


def submitted_notes(submitted: Mapping[str, str], user: Iterable[str]) -> List[Tuple[str, str]]:
    """WARNs for forced settings that spark-submit was given differently (``--conf``)."""
    notes = []
    for key, (value, reason) in FORCED.items():
        if key in submitted and key not in user and submitted[key].lower() != value:
            notes.append(("WARNING", f"spark-submit's {key}={submitted[key]} is overridden with "
                                     f"{value}: {reason}"))
    return notes


def worker_python(local: bool, env: Mapping[str, str],
                  executable: str) -> Tuple[Optional[str], Optional[str]]:
    """The ``PYSPARK_PYTHON`` to set (None: leave it) and a note for the log.

    In local mode the workers must run this very interpreter, which has confluent-kafka and the
    tool (Spark's default, ``python3`` from PATH, usually has neither). On a cluster the user
    knows what the executors have (an image, or a packed venv in ``spark.archives``).
    """
    current = env.get("PYSPARK_PYTHON")
    if local:
        if current and os.path.realpath(current) != os.path.realpath(executable):
            return executable, (f"PYSPARK_PYTHON={current} is overridden with {executable}: local "
                                f"workers must run the mirror maker's own Python")
        return executable, None
    if not current:
        return None, ("PYSPARK_PYTHON is not set: executors run Spark's default python3, which "
                      "needs confluent-kafka and kafka-mirror-maker installed")
    return None, None
