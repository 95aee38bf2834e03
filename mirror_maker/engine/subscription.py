"""Which source topics the mirror threads subscribe to, refreshed as topics come and go.

The include regex has Java semantics (full match, translated constructs), which librdkafka's
own regex subscription cannot give, so the runner lists the source's topics every
``metadata.max.age.ms`` and the threads subscribe to the exact names that match. A topic
created later is picked up at the next refresh, without a restart.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Dict, List, Pattern, Tuple

from confluent_kafka import KafkaException

from ..clients.admin import list_topic_partitions
from ..config.topics import select_topics

log = logging.getLogger("mirror_maker.subscription")

UNREACHABLE_LOG_EVERY_S = 10.0


class TopicSubscription:
    """The current list of matching topics, with a version the threads compare against."""

    def __init__(self, admin, pattern: Pattern[str], exclude_internal: bool,
                 refresh_ms: int, bootstrap: str, rules=None, state=None) -> None:
        """``rules``: MirrorMaker 2's topic rules (internal topics, cycles, heartbeats), when a
        replication policy is given; ``state``: the run's, whose stop ends a wait for the source's
        metadata (the runner's loop asks, and with the source away it held a SIGTERM up to 5 s)."""
        self._admin = admin
        self._state = state
        self._pattern = pattern
        self._rules = rules if rules is not None and rules.mm2_rules else None
        self._exclude_internal = exclude_internal
        self._refresh_s = refresh_ms / 1000.0
        self._bootstrap = bootstrap
        self._lock = threading.Lock()
        self._topics: List[str] = []
        self._partitions: Dict[str, int] = {}
        self._version = 0
        self._next_refresh = 0.0
        self._failing_since = None
        self._last_error_log = 0.0

    @property
    def version(self) -> int:
        """Changes whenever the topic list does; cheap to read on every loop iteration."""
        return self._version

    def current(self) -> Tuple[int, List[str]]:
        with self._lock:
            return self._version, list(self._topics)

    def partitions(self) -> Tuple[int, Dict[str, int]]:
        """The matching topics with their partition counts (a count that grows is a new version
        too): what exactly-once mode's streams split among themselves."""
        with self._lock:
            return self._version, dict(self._partitions)

    def refresh_if_due(self, now: float = None) -> None:
        now = time.monotonic() if now is None else now
        if now < self._next_refresh:
            return
        try:
            names = list_topic_partitions(self._admin, timeout_s=5.0, state=self._state)
        except KafkaException as exc:
            if self._state is not None and self._state.stopping:
                return
            self._unreachable(now, exc.args[0].str())
            self._next_refresh = now + 1.0
            return
        self._failing_since = None
        self._next_refresh = now + self._refresh_s
        topics = select_topics(self._pattern, names, self._exclude_internal,
                               self._rules.selects if self._rules is not None else None)
        partitions = {topic: names[topic] for topic in topics}
        with self._lock:
            if topics != self._topics:
                added = sorted(set(topics) - set(self._topics))
                removed = sorted(set(self._topics) - set(topics))
                log.info("Subscribed topics changed: +%s -%s", added or "[]", removed or "[]")
                self._version += 1
            elif partitions != self._partitions:
                self._version += 1
            self._topics, self._partitions = topics, partitions

    def _unreachable(self, now: float, reason: str) -> None:
        if self._failing_since is None:
            self._failing_since = now
        if now - self._last_error_log >= UNREACHABLE_LOG_EVERY_S:
            self._last_error_log = now
            log.error("Cannot reach the source cluster at %s to list its topics: %s (retrying)",
                      self._bootstrap, reason)
