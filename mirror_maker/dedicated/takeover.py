"""Switching a flow between Kafka's MirrorMaker 2 and this tool, in either direction, so that
neither mirrors the source again from its start nor skips what came in between.

Both keep a flow's progress in Kafka Connect's offsets topic on the target (``connect_offsets``).
Before a flow starts here, each source partition takes MirrorMaker 2's position where the flow's
committed offsets have none, or where MirrorMaker 2 wrote a position after ours that is ahead of
them (it ran since we last did); a position we wrote ourselves is never taken back, so an
operator's rewind of the flow's group stands. While the flow runs, the node that holds its
election keeps the topic current with the flow's committed offsets (``ConnectOffsetsKeeper``), and
once more after the flow's last commit at a stop, so that MirrorMaker 2 started on the same file
resumes there.

A flow's committed offsets are its consumer group's on the source, or, for an exactly-once flow,
its offsets group's on the target, kept under the target topics (``offsets.transactional``).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable, Dict, Optional

from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from ..clients.admin import admin_client, connection_settings, group_offsets
from ..records import TopicPartition
from ..replication.policies import topic_rules
from .connect_offsets import ConnectOffsetsWriter, Position, read_positions

log = logging.getLogger("mirror_maker.dedicated")

#: The bound of each admin step (the flow's offsets, committing them): a target that cannot be
#: reached holds the flow's start this long at most, then it starts as a new one would.
TIMEOUT_S = 10.0
#: How often the keeper looks whether the flow's committed offsets moved.
KEEP_EVERY_S = 5.0
#: The last write after the flow's final commit (the supervisor's stop allows for it).
FINAL_WRITE_S = 3.0


class FlowOffsets:
    """The flow's committed offsets, by source partition, where the flow resumes from."""

    def __init__(self, flow) -> None:
        config = flow.config
        self._name = f"{flow.name}-offsets"
        if config.exactly_once:
            rules = topic_rules(config.replication)
            self._conf, self.group = config.target_admin_conf(), config.exactly_once_group
            self._to_group = rules.remote

            def to_source(topic: str) -> Optional[str]:
                upstream = rules.policy.upstream_topic(topic)
                # Another flow into this cluster may share the group: only this flow's topics.
                return upstream if upstream is not None and rules.remote(upstream) == topic else None
            self._to_source = to_source
        else:
            self._conf, self.group = config.source_admin_conf(), config.group_id
            self._to_group = self._to_source = lambda topic: topic
        self._admin = None

    def _client(self):
        if self._admin is None:
            self._admin = admin_client(connection_settings(self._conf), self._name)
        return self._admin

    def committed(self, timeout_s: float = TIMEOUT_S) -> Dict[TopicPartition, int]:
        found = {}
        for tp, offset in group_offsets(self._client(), self.group, timeout_s).items():
            source = self._to_source(tp.topic)
            if source is not None:
                found[TopicPartition(source, tp.partition)] = offset
        return found

    def commit(self, positions: Dict[TopicPartition, int], timeout_s: float = TIMEOUT_S) -> None:
        """The group has no member before the flow starts here, so its offsets may be altered."""
        keys = [KafkaTopicPartition(self._to_group(tp.topic), tp.partition, offset)
                for tp, offset in sorted(positions.items())]
        self._client().alter_consumer_group_offsets([ConsumerGroupTopicPartitions(self.group, keys)],
                                                    request_timeout=timeout_s)[self.group].result()


def to_take(points: Dict[TopicPartition, Position], committed: Dict[TopicPartition, int],
            mirrored: Callable[[str], object]) -> Dict[TopicPartition, int]:
    """The positions to commit for the flow: MirrorMaker 2's where the flow has none, or where
    MirrorMaker 2 wrote after us and is ahead; never one of ours (``mirrored``: the flow's topic
    filter)."""
    return {tp: position.next_offset for tp, position in points.items()
            if mirrored(tp.topic) and (tp not in committed
                                       or (not position.ours and position.next_offset > committed[tp]))}


def take_over(flow) -> Dict[TopicPartition, Position]:
    """Commit MirrorMaker 2's positions for the flow where they are news (the module docstring);
    what the offsets topic holds. A cluster that cannot be reached, or a topic that cannot be
    read, is one WARN: the flow then starts from its committed offsets, or as a new one would."""
    topic = flow.connect_offsets_topic
    try:
        points = read_positions(flow.config.producer, topic, flow.source) or {}
        if not points:
            return points
        offsets = FlowOffsets(flow)
        taken = to_take(points, offsets.committed(), flow.config.include.fullmatch)
        if taken:
            offsets.commit(taken)
    except KafkaException as exc:
        log.warning("Cannot read where Kafka's MirrorMaker 2 left flow %s (%s in %s): %s; the flow starts from its "
                    "committed offsets, and partitions without one as auto.offset.reset says", flow.name, topic,
                    flow.target, exc.args[0].str())
        return {}
    if taken:
        log.info("Flow %s resumes where Kafka's MirrorMaker 2 left it (%s): %s", flow.name, topic,
                 ", ".join(f"{tp.topic}-{tp.partition} at {offset}" for tp, offset in sorted(taken.items())))
    return points


class ConnectOffsetsKeeper(threading.Thread):
    """Keeps Connect's offsets topic at the flow's committed offsets while this node holds the
    flow's election (one writer, as MirrorMaker 2's one leader); ``final`` writes once more after
    the flow's last commit. Started once ``seen`` knows what the topic held (``take_over``), so it
    never writes over a position of MirrorMaker 2's before the flow took it. A target away is one
    WARN per outage: the next round writes it all."""

    def __init__(self, flow, leading: Callable[[], bool], wait: Callable[[float], bool]) -> None:
        """``wait(seconds)``: True once the process stops."""
        super().__init__(name=f"{flow.name}/connect-offsets", daemon=True)
        self._flow = flow
        self._leading = leading
        self._wait = wait
        self._lock = threading.Lock()  # a round and the final write, one at a time
        self._offsets: Optional[FlowOffsets] = None
        self._writer: Optional[ConnectOffsetsWriter] = None
        #: The positions the topic holds as ours (MirrorMaker 2's that the flow took are written
        #: again as ours at the first round: a later rewind of the flow's group is then not undone).
        self._ours: Dict[TopicPartition, int] = {}
        self._failing = False

    def seen(self, positions: Dict[TopicPartition, Position]) -> None:
        """What the topic held when the flow started (``take_over``)."""
        self._ours = {tp: p.next_offset for tp, p in positions.items() if p.ours}

    def run(self) -> None:
        while not self._wait(KEEP_EVERY_S):
            if self._leading():
                self.keep(TIMEOUT_S)

    def final(self) -> None:
        """After the flow's last commit: where a switch to MirrorMaker 2 right now resumes."""
        if self._leading():
            self.keep(FINAL_WRITE_S)
        with self._lock:
            if self._writer is not None:
                self._writer.close(0.5)

    def keep(self, timeout_s: float) -> int:
        """Write the committed offsets that moved; how many. Any failure is this round's only:
        the next one starts with a new producer (a fatal one is never usable again)."""
        flow = self._flow
        with self._lock:
            deadline = time.monotonic() + timeout_s
            try:
                if self._writer is None:
                    self._offsets = self._offsets or FlowOffsets(flow)
                    self._writer = ConnectOffsetsWriter(
                        flow.connect_offsets_topic, flow.source, flow.config.producer,
                        admin_client(connection_settings(flow.config.target_admin_conf()),
                                     f"{flow.name}-connect-offsets"),
                        flow.connect_offsets_partitions, flow.connect_offsets_replication_factor, written=self._ours)
                committed = {tp: offset for tp, offset in self._offsets.committed(timeout_s).items()
                             if flow.config.include.fullmatch(tp.topic)}
                written = self._writer.write(committed, max(0.1, deadline - time.monotonic()))
                self._ours = dict(self._writer.written)
            except Exception as exc:  # noqa: BLE001 - a round that failed must not end the keeping
                if self._writer is not None:
                    self._ours = dict(self._writer.written)
                    self._writer.close(0.0)
                self._writer = None
                if not self._failing:
                    reason = exc.args[0].str() if isinstance(exc, KafkaException) else f"{type(exc).__name__}: {exc}"
                    log.warning("Cannot keep %s (Kafka Connect's offsets, where Kafka's MirrorMaker 2 would resume) "
                                "current now: %s; again in %.0f s", flow.connect_offsets_topic, reason, KEEP_EVERY_S)
                self._failing = True
                return 0
        if self._failing:
            log.info("%s is current again", flow.connect_offsets_topic)
        self._failing = False
        return written
