"""What the test legs need once per machine, paid before them: ``python -m tests.brokers.first_run``.

``make test`` runs this before its timed legs, so that no test pays for Maven Central, a class-data
archive's training or a Java compile on a cold machine (each is cached outside the repository,
``maven_jars.cache_root``). Each step prints one line with its duration, or that it was cached.
Run alone (a direct ``pytest``), the tests still fetch and build what they lack, on a larger budget
(``apache_kafka.start_budget_s``).
"""

from __future__ import annotations

import sys
import tempfile
import time
from typing import Callable, List, Tuple

from .apache_kafka import KAFKA_3_9, KAFKA_4, MIRROR_MAKER_2, KafkaCluster, first_start_cached
from .java_mirror_makers import MIRROR_CLIENT_CHECK
from .maven_jars import jar_folder, jars_cached, java_program, java_program_cached


def _first_start(version: str) -> None:
    """The jars, and the class-data archive every later start of this version maps."""
    with tempfile.TemporaryDirectory(prefix="kafka-first-run-") as work:
        KafkaCluster("first-run", work, version)._share_classes()


def steps() -> List[Tuple[str, Callable[[], bool], Callable[[], object]]]:
    """(what, whether it is cached, how to make it), in the order they depend on each other."""
    return [
        *[(f"Apache Kafka {version}: jars from Maven Central and a class-data archive",
           lambda v=version: first_start_cached(v), lambda v=version: _first_start(v))
          for version in (KAFKA_4, KAFKA_3_9)],
        (f"Kafka's MirrorMaker 2 ({MIRROR_MAKER_2}): jars from Maven Central",
         lambda: jars_cached(MIRROR_MAKER_2), lambda: jar_folder(MIRROR_MAKER_2)),
        (f"{MIRROR_CLIENT_CHECK.name} compiled", lambda: java_program_cached(MIRROR_CLIENT_CHECK, MIRROR_MAKER_2),
         lambda: java_program(MIRROR_CLIENT_CHECK, MIRROR_MAKER_2)),
    ]


def main() -> int:
    started = time.monotonic()
    for what, cached, make in steps():
        if cached():
            print(f"first-run cost: {what}: cached", flush=True)
            continue
        began = time.monotonic()
        try:
            make()
        except Exception as exc:  # one line, and the legs then say what they lack
            print(f"first-run cost: {what}: FAILED after {time.monotonic() - began:.1f} s: {exc}", flush=True)
            return 1
        print(f"first-run cost: {what}: {time.monotonic() - began:.1f} s", flush=True)
    print(f"first-run costs: {time.monotonic() - started:.1f} s in all", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
