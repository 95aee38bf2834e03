"""Which node runs a flow's singletons: its topic, config and ACL syncs, checkpoints, group
offset sync and heartbeats, which must run on exactly one live node however many run the file.

Each flow has a small consumer group on its target cluster, ``mm2-<source>-><target>-singletons``,
whose members subscribe to a topic of one partition, ``mm2-singletons.<source>.internal`` (created
empty, never written; ``.internal`` so no flow ever mirrors it). Kafka's group coordinator gives
that partition to exactly one member: that node runs the singletons. A node that stops leaves the
group and the partition moves at once; one that dies is dropped after its session timeout
(``<target>.consumer.session.timeout.ms``, Kafka's 45 s by default) and the partition moves then.
The assignment is sticky: a node that joins leaves the singletons where they run.
"""

from __future__ import annotations

import logging
import threading
from typing import Dict, Optional

import confluent_kafka
from confluent_kafka import KafkaException

from ..callbacks import client_callback
from ..clients.admin import admin_client, connection_settings
from ..ops.log import librdkafka_logger
from ..replication.offset_syncs import ensure_topic

log = logging.getLogger("mirror_maker.dedicated")

POLL_S = 0.5
TOPIC_RETRY_S = 5.0


def election_group(source: str, target: str) -> str:
    return f"mm2-{source}->{target}-singletons"


def election_topic(source: str) -> str:
    return f"mm2-singletons.{source}.internal"


class SingletonElection:
    """``leading`` is True while this node holds the election topic's partition."""

    def __init__(self, flow: str, consumer_conf: Dict[str, str], topic: str, group: str,
                 replication_factor: Optional[int], admin_overrides: Optional[Dict[str, str]] = None) -> None:
        """``consumer_conf``: librdkafka settings of a consumer of the target (its connection,
        security and group timeouts); ``admin_overrides``: the target's ``<alias>.admin.*``."""
        self.flow = flow
        self.topic = topic
        self.group = group
        self._conf = {k: v for k, v in consumer_conf.items() if k != "group.instance.id"}
        # Sticky: a node that joins leaves the singletons where they run.
        self._conf.update({"group.id": group, "client.id": group, "enable.auto.commit": "false",
                           "partition.assignment.strategy": "cooperative-sticky", "logger": librdkafka_logger(group)})
        self._replication_factor = replication_factor
        self._admin_overrides = dict(admin_overrides or {})
        self._stop = threading.Event()
        self._leading = False
        self._thread = threading.Thread(target=self._run, name=f"{flow}/election", daemon=True)

    @property
    def leading(self) -> bool:
        return self._leading

    def start(self) -> "SingletonElection":
        self._thread.start()
        return self

    def stop(self) -> None:
        """Leave the group (another node takes over at once); the singletons stop first."""
        self._lead(False)
        self._stop.set()

    def join(self, timeout_s: float) -> None:
        self._thread.join(timeout_s)

    def _lead(self, leading: bool) -> None:
        if leading != self._leading:
            self._leading = leading
            log.info("This node %s the syncs, checkpoints and heartbeats of %s",
                     "now runs" if leading else "no longer runs", self.flow)

    def _run(self) -> None:
        """Takes part until the stop; a failure of its consumer is logged and it joins again
        (an exactly-once flow runs only on the node that holds the election: a node that left
        it silently would stand by for ever)."""
        while not self._stop.is_set():
            if not self._ensure_topic():
                return
            try:
                self._take_part()
            except Exception as exc:  # the consumer failed: join again with a new one
                reason = exc.args[0].str() if isinstance(exc, KafkaException) else f"{type(exc).__name__}: {exc}"
                log.error("The singleton election of %s failed: %s (joining again in %.0f s)", self.flow, reason,
                          TOPIC_RETRY_S)
                self._stop.wait(TOPIC_RETRY_S)

    def _take_part(self) -> None:
        consumer = confluent_kafka.Consumer(self._conf)
        said = None
        try:
            consumer.subscribe([self.topic], on_assign=self._assigned, on_revoke=self._revoked,
                               on_lost=self._revoked)
            while not self._stop.is_set():
                msg = consumer.poll(POLL_S)  # serves the group's callbacks; the topic is never written
                error = msg.error() if msg is not None else None
                if error is not None and error.str() != said:  # (an unauthorized group, say): once each
                    said = error.str()
                    log.warning("The singleton election of %s (group %s): %s", self.flow, self.group, said)
        finally:
            self._lead(False)
            consumer.close()

    def _ensure_topic(self) -> bool:
        admin = admin_client({**connection_settings(self._conf), **self._admin_overrides}, f"{self.group}-admin")
        warned = False
        while not self._stop.is_set():
            try:
                ensure_topic(admin, self.topic, self._replication_factor)
                return True
            except KafkaException as exc:
                if not warned:
                    log.warning("Cannot create the election topic %s of %s yet: %s (retrying every %.0f s)",
                                self.topic, self.flow, exc.args[0].str(), TOPIC_RETRY_S)
                    warned = True
            self._stop.wait(TOPIC_RETRY_S)
        return False

    @client_callback
    def _assigned(self, _consumer, partitions) -> None:
        if any(p.partition == 0 for p in partitions):
            self._lead(True)

    @client_callback
    def _revoked(self, _consumer, partitions) -> None:
        if any(p.partition == 0 for p in partitions):
            self._lead(False)
