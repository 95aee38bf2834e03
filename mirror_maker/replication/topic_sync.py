"""The background loop that keeps the target's topics like the source's (MirrorMaker 2's
``MirrorSourceConnector`` scheduled jobs), each on its own interval:

* partitions (``--refresh.topics.enabled``): a target topic with fewer partitions than its source
  topic grows to the same count (``createPartitions``; never shrinks); the mirror threads start
  the new partitions at their beginning;
* configs (``--sync.topic.configs.enabled``): ``topic_configs``;
* ACLs (``--sync.topic.acls.enabled``): ``acls``;
* and consumer failover's checkpoints, group offset sync and heartbeats (``checkpoints``), added
  with ``add``.

Each job covers the (source, target) topic pairs the mirror writes to (``TargetTopics.mapping``).
A job that fails (a cluster away, a refused request) logs one WARN and runs again at its next
interval: it never stops the mirror. With ``active`` (several nodes running the same flow, as in
MirrorMaker 2's dedicated mode) the jobs run only while it says this node is the one; a node that
becomes the one runs every job at once.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Dict, List, Tuple

from confluent_kafka import KafkaException

from .acls import TopicAcls

log = logging.getLogger("mirror_maker.replication")

#: The first run of each job comes this soon after start (the threads create target topics first).
FIRST_RUN_S = 2.0
IDLE_WAIT_S = 0.5


class TopicSync(threading.Thread):
    def __init__(self, options, target_topics, configs, source_admin, target_admin, state, active=None) -> None:
        super().__init__(name="mirrormaker-topic-sync", daemon=True)
        self._active = active
        self._was_active = True
        self._options = options
        self._target_topics = target_topics
        self._configs = configs
        self._acls = TopicAcls(source_admin, target_admin)
        self._target = target_admin
        self._state = state
        self._jobs = []  # [next run, interval, job]
        if options.refresh_topics:
            self.add(options.refresh_topics_interval_s, self.sync_partitions)
        if options.sync_topic_configs:
            self.add(options.sync_topic_configs_interval_s, self.sync_configs)
        if options.sync_topic_acls:
            self.add(options.sync_topic_acls_interval_s, self.sync_acls)

    def add(self, interval_s: float, job) -> None:
        """A job on its own interval, first run soon after the start."""
        self._jobs.append([time.monotonic() + FIRST_RUN_S, interval_s, job])

    def run(self) -> None:
        while not self._state.stopping:
            now = time.monotonic()
            if self._active is not None and not self._active():
                self._was_active = False
                self._state.wait(IDLE_WAIT_S)
                continue
            if not self._was_active:  # this node took over: what the last one did may be a while ago
                self._was_active = True
                for job in self._jobs:
                    job[0] = now
            for job in self._jobs:
                if now >= job[0] and not self._state.stopping:
                    job[0] = now + job[1]
                    try:
                        job[2]()
                    except KafkaException as exc:
                        log.warning("%s failed: %s; again in %d s", job[2].__doc__.split(":")[0],
                                    exc.args[0].str(), job[1])
                    except Exception as exc:  # a sync must never take the mirror down
                        log.warning("%s failed: %s: %s; again in %d s", job[2].__doc__.split(":")[0],
                                    type(exc).__name__, exc, job[1])
            self._state.wait(IDLE_WAIT_S)

    def targets(self) -> Dict[str, List[str]]:
        """Source topic -> its target topics, a copy (the mirror threads add to the mapping)."""
        targets: Dict[str, List[str]] = {}
        for src, dst in self.pairs():
            targets.setdefault(src, []).append(dst)
        return targets

    def pairs(self) -> List[Tuple[str, str]]:
        mapping = self._target_topics.mapping
        return sorted((src, dst) for src, dsts in list(mapping.items()) for dst in list(dsts))

    def sync_partitions(self) -> int:
        """Partition sync: target topics grown to their source topics' partition counts."""
        short = self._target_topics.short_topics(self.targets())
        return len(short) - len(self._target_topics.grow(short))

    def sync_configs(self) -> int:
        """Config sync: target topic configs brought in line with their source topics'."""
        return self._configs.sync(self.pairs())

    def sync_acls(self) -> int:
        """ACL sync: the source's topic ACLs copied to the target topics."""
        return self._acls.sync(self.targets())
