"""The two broker kinds a benchmark runs on: Apache Kafka (KRaft nodes from Maven jars, the
ground truth) and Tansu (the embedded broker of ``make demo``). Same interface for both."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Dict, Optional

from confluent_kafka import IsolationLevel, KafkaException, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic, OffsetSpec

PARTITIONS = 8


class Brokers:
    """A source and a target cluster; topics made and wiped between runs."""

    kind = ""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.source = self.target = None

    def __enter__(self) -> "Brokers":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.closing()
        self.source.stop()
        self.target.stop()

    def closing(self) -> None:
        """Before the clusters stop: clients held for the whole run let go (one left alive
        reconnects to a stopped broker every second, into the log, for the rest of the benchmark)."""

    def start(self) -> None:
        raise NotImplementedError

    def create_topic(self, bootstrap: str, topic: str, partitions: int = PARTITIONS,
                     config: Optional[Dict[str, str]] = None) -> None:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        admin.create_topics([NewTopic(topic, num_partitions=partitions, config=config or {})])[topic].result()

    def fresh_target(self, topic: str) -> None:
        """An empty target topic with the source's partitions, so runs do not pile up data."""
        raise NotImplementedError

    def delete_topic(self, bootstrap: str, topic: str) -> None:
        """A workload's backlog, gone once its rows ran (best effort: the broker frees the disk)."""
        admin = AdminClient({"bootstrap.servers": bootstrap})
        try:
            admin.delete_topics([topic], operation_timeout=30)[topic].result()
        except KafkaException:
            pass

    def end_offsets(self, topic: str) -> Optional[int]:
        """Records in ``topic`` on the target (exact), or None where the broker cannot tell."""
        return None


class KafkaBrokers(Brokers):
    kind = "kafka"

    def start(self) -> None:
        from tests.brokers.apache_kafka import KafkaCluster, start_together

        # The log cleaner looks for work every 200 ms (Kafka's default: 15 s): the record path's
        # compacted source is cleaned while the benchmark waits for it.
        cleaner = {"log.cleaner.backoff.ms": 200,
                   # A deleted topic's segments go at once, not a minute later: the steady backlogs
                   # and each run's target topic are gigabytes.
                   "log.segment.delete.delay.ms": 0}
        self.source, self.target = start_together([KafkaCluster("source", self.work, overrides=cleaner),
                                                   KafkaCluster("target", self.work, overrides=cleaner)])
        self._admin = AdminClient({"bootstrap.servers": self.target.bootstrap})

    def fresh_target(self, topic: str) -> None:
        if topic in self._admin.list_topics(timeout=10).topics:
            self._admin.delete_topics([topic], operation_timeout=30)[topic].result()
            while topic in self._admin.list_topics(timeout=10).topics:
                time.sleep(0.05)
        deadline = time.monotonic() + 30
        while True:  # a deleted topic's name is free again a moment after it left the metadata
            try:
                self.create_topic(self.target.bootstrap, topic)
                return
            except Exception:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def closing(self) -> None:
        self._admin = None

    def end_offsets(self, topic: str) -> Optional[int]:
        # One ListOffsets request for every partition (a round trip each made a watcher step
        # 10-40 ms longer: a sizeable error on a run whose records flow for 0.25 s).
        latest = {TopicPartition(topic, partition): OffsetSpec.latest() for partition in range(PARTITIONS)}
        try:
            answers = self._admin.list_offsets(latest, isolation_level=IsolationLevel.READ_COMMITTED,
                                               request_timeout=5)
            return sum(max(answer.result().offset, 0) for answer in answers.values())
        except KafkaException:  # a topic just made: its leader is not known everywhere yet
            return None


class TansuBrokers(Brokers):
    kind = "tansu"

    def start(self) -> None:
        from mirror_maker.embedded import EmbeddedBroker

        self.source = EmbeddedBroker("source", self.work).start()
        self.target = EmbeddedBroker("target", self.work).start()

    def fresh_target(self, topic: str) -> None:
        self.target.restart()  # memory storage: an empty broker
        self.create_topic(self.target.bootstrap, topic)


KINDS = {"kafka": KafkaBrokers, "tansu": TansuBrokers}
