"""Consumer failover (MirrorMaker 2's ``MirrorCheckpointTask`` and ``MirrorHeartbeatTask``), run
as jobs of the process's background thread (``topic_sync``):

* checkpoints: the committed offsets of the source's consumer groups (``--groups`` minus
  ``--groups.exclude``) translated with the offset syncs, written to
  ``<source alias>.checkpoints.internal`` on the target in MirrorMaker 2's format (keyed by group,
  remote topic and partition);
* group offset sync: the translated offsets committed to the same groups on the target, only
  while a group has no active member there, and never backwards;
* heartbeats: (source alias, target alias, time) to the target's ``heartbeats`` topic.

The translation is exact where the syncs allow it, and MirrorMaker 2's
(``OffsetSyncStore.translateDownstream``) elsewhere: a group offset equal to a sync's source offset
maps to its target offset; one between two syncs whose source and target spans are equal, the
later one saying it continues the earlier (a contiguous stretch: our writer syncs both sides of
every gap and says so in a header, ``offset_syncs``), maps to the same distance past the first;
one past the newest sync maps to its target offset + 1 (never ahead of what is mirrored); any
other one to the earlier sync's target offset + 1, but never past the later sync's (it reads some
records again, it skips none); one older than every known sync is not translated. A checkpoint
never goes back unless the group itself went back on the source (MirrorMaker 2's
``checkpointIsMoreRecent``), and those written before a restart are read at start.
"""

from __future__ import annotations

import bisect
import logging
import time
from typing import Dict, List, Optional, Set, Tuple

import confluent_kafka
from confluent_kafka import ConsumerGroupState, ConsumerGroupTopicPartitions, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import OffsetSpec

from ..callbacks import client_callback
from ..clients.admin import REQUEST_TIMEOUT_S, group_offsets
from ..clients.polling import poll
from ..ops.log import librdkafka_logger
from ..records import TopicPartition
from .formats import (Checkpoint, Heartbeat, decode_continues, decode_offset_sync, encode_checkpoint,
                      encode_heartbeat)
from .offset_syncs import ensure_topic
from .translate import read_checkpoints

log = logging.getLogger("mirror_maker.replication")

#: Syncs kept per source partition (MirrorMaker 2 keeps 64, spread over the partition's history).
SYNCS_KEPT = 1000


class OffsetSyncStore:
    """The offset syncs read from their topic, per source partition, in source-offset order."""

    def __init__(self, consumer_conf: Dict[str, str], topic: str) -> None:
        conf = dict(consumer_conf)  # the connection settings of the topic's cluster
        conf.update({"group.id": "mirror-offset-syncs-reader", "enable.auto.commit": False,
                     "enable.partition.eof": True, "client.id": "mirror-offset-syncs-reader",
                     "logger": librdkafka_logger("mirror-offset-syncs-reader")})
        self._consumer = confluent_kafka.Consumer(conf)
        self._consumer.assign([KafkaTopicPartition(topic, 0, confluent_kafka.OFFSET_BEGINNING)])
        self._topic = topic
        #: Per source partition: (upstream, downstream, contiguous up to the next sync), by upstream.
        self._syncs: Dict[TopicPartition, List[Tuple[int, int, bool]]] = {}
        #: Source partitions whose target partition went back since the checkpoints last looked.
        self.reset: Set[TopicPartition] = set()

    def add(self, tp: TopicPartition, upstream: int, downstream: int,
            continues: Optional[Tuple[int, int]] = None) -> None:
        """One sync; ``continues``: the sync its writer says it follows without a break (its
        header), the only case in which the stretch from the one before is contiguous."""
        syncs = self._syncs.setdefault(tp, [])
        if syncs and downstream < syncs[-1][1]:
            # The target partition went back (recreated, or truncated): nothing before holds. (A
            # mirror that goes back on the source appends its records after the ones it wrote.)
            syncs.clear()
            self.reset.add(tp)
        rewound = bool(syncs) and upstream <= syncs[-1][0]
        if rewound:  # mirrored again from earlier (a restart): start over there
            del syncs[bisect.bisect_left(syncs, (upstream, -1)):]
        if syncs:
            before_up, before_down, _ = syncs[-1]
            # Only what the writer vouches for, and never across a rewind: a sync lost or not
            # ours (Kafka's MirrorMaker 2, an owner before a rebalance) breaks the chain.
            syncs[-1] = (before_up, before_down, not rewound and continues == (before_up, before_down)
                         and upstream - before_up == downstream - before_down)
        syncs.append((upstream, downstream, False))
        if len(syncs) > SYNCS_KEPT:
            self._thin(syncs)

    @staticmethod
    def _thin(syncs: List[Tuple[int, int, bool]]) -> None:
        """Drop every other sync of the older half (old offsets stay translatable): the stretch
        that takes a dropped sync's place is contiguous only if both of its parts were."""
        half = len(syncs) // 2
        kept = syncs[:1]
        for at in range(1, half):
            if at % 2:
                upstream, downstream, contiguous = kept[-1]
                kept[-1] = (upstream, downstream, contiguous and syncs[at][2])
            else:
                kept.append(syncs[at])
        syncs[:half] = kept

    def update(self, timeout_s: float = 10.0) -> None:
        """Read what was written since the last update (to the topic's end, bounded)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            messages = poll(self._consumer, 10000, 0.5)
            if not messages:
                return
            done = False
            for msg in messages:
                if msg.error() is not None:
                    done = True  # at the end, or the topic is not there yet: the next update reads on
                    continue
                sync = decode_offset_sync(msg.key(), msg.value())
                self.add(TopicPartition(sync.topic, sync.partition), sync.upstream_offset, sync.downstream_offset,
                         decode_continues(msg.headers()))
            if done:
                return

    def update_to_end(self, timeout_s: float) -> bool:
        """Read up to the topic's end as it is now (a final round must see the last syncs, not
        only what one poll brings); whether it got there within ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        try:
            low, end = self._consumer.get_watermark_offsets(KafkaTopicPartition(self._topic, 0), timeout=timeout_s,
                                                            cached=False)
        except KafkaException as exc:  # not there (no sync written yet) or not answering
            log.debug("cannot read the end of %s: %s", self._topic, exc)
            return False
        if end <= low:
            return True  # nothing to read
        while time.monotonic() < deadline:
            position = self._consumer.position([KafkaTopicPartition(self._topic, 0)])[0].offset
            if position >= end:
                return True
            self.update(max(0.0, deadline - time.monotonic()))
        return False

    def partitions(self) -> List[TopicPartition]:
        return list(self._syncs)

    def translate(self, tp: TopicPartition, offset: int) -> Optional[int]:
        syncs = self._syncs.get(tp)
        if not syncs:
            return None
        at = bisect.bisect_right(syncs, (offset, float("inf"))) - 1
        if at < 0:
            return None  # older than every known sync
        upstream, downstream, contiguous = syncs[at]
        if upstream == offset:
            return downstream
        if at + 1 == len(syncs):
            return downstream + 1  # past the newest sync: never ahead of what is mirrored
        if contiguous:
            return downstream + offset - upstream
        return min(downstream + 1, syncs[at + 1][1])

    def close(self) -> None:
        self._consumer.close()


def more_recent(checkpoint: Checkpoint, last: Optional[Checkpoint]) -> bool:
    """Whether ``checkpoint`` replaces ``last`` of its group and partition (MirrorMaker 2's
    ``checkpointIsMoreRecent``): the first one; after the group went back on the source; or
    further on the target. Never backwards on the target otherwise."""
    if last is None or checkpoint.upstream_offset < last.upstream_offset:
        return True
    return checkpoint.downstream_offset > last.downstream_offset


def selected_groups(admin, options) -> List[str]:
    """The source's consumer groups that ``--groups`` and ``--groups.exclude`` select."""
    include, exclude = options.groups_pattern, options.groups_exclude_pattern
    listed = admin.list_consumer_groups(request_timeout=REQUEST_TIMEOUT_S).result()
    return sorted(g.group_id for g in listed.valid
                  if include.fullmatch(g.group_id) and not exclude.fullmatch(g.group_id))


def has_active_members(admin, group: str) -> bool:
    """Whether ``group`` has members on ``admin``'s cluster: its offsets are then its own."""
    try:
        described = admin.describe_consumer_groups([group], request_timeout=REQUEST_TIMEOUT_S)[group].result()
    except KafkaException:
        return False  # not there yet
    return described.state not in (ConsumerGroupState.EMPTY, ConsumerGroupState.DEAD,
                                   ConsumerGroupState.UNKNOWN) or bool(described.members)


class ConsumerFailover:
    """The checkpoint, group offset sync and heartbeat jobs."""

    def __init__(self, options, rules, store: Optional[OffsetSyncStore], source_admin, target_admin,
                 producer_conf: Dict[str, str], metrics=None) -> None:
        """``metrics``: the run's ``MirrorMetrics`` (checkpoints and heartbeats written, and
        MirrorMaker 2's checkpoint-latency-ms), if any."""
        self._metrics = metrics
        self._options = options
        self._rules = rules
        self._store = store
        self._source = source_admin
        self._target = target_admin
        conf = dict(producer_conf)  # the target's connection settings
        conf.update({"client.id": "mirror-checkpoints", "logger": librdkafka_logger("mirror-checkpoints")})
        self._producer = confluent_kafka.Producer(conf)
        self._target_conf = dict(producer_conf)
        self._loaded = False
        #: The checkpoints found on the target at start: none written goes back behind them.
        self._floor: Dict[Tuple[str, str, int], Checkpoint] = {}
        self.checkpoints_topic = rules.policy.checkpoints_topic(rules.source_alias)
        self.heartbeats_topic = rules.policy.heartbeats_topic()
        self._created = set()
        #: (group, remote topic, partition) -> the newest checkpoint written.
        self.latest: Dict[Tuple[str, str, int], Checkpoint] = {}

    def jobs(self):
        """(interval s, job) for the background thread."""
        options, jobs = self._options, []
        if options.emit_checkpoints:
            jobs.append((options.emit_checkpoints_interval_s, self.emit_checkpoints))
        if options.sync_group_offsets:
            jobs.append((options.sync_group_offsets_interval_s, self.sync_group_offsets))
        if options.emit_heartbeats:
            jobs.append((options.emit_heartbeats_interval_s, self.emit_heartbeat))
        return jobs

    def _ensure(self, topic: str) -> None:
        if topic not in self._created:
            kind = "checkpoints" if topic == self.checkpoints_topic else "heartbeats"
            ensure_topic(self._target, topic, self._options.internal_replication_factor(kind))
            self._created.add(topic)

    def _groups(self) -> List[str]:
        return selected_groups(self._source, self._options)

    def emit_checkpoints(self) -> int:
        """Checkpoints: source groups' offsets translated to the target's, written when they moved."""
        self._ensure(self.checkpoints_topic)  # at once, as MirrorMaker 2 creates it at its start
        if not self._loaded and not self._load_checkpoints():
            return 0  # no checkpoint before those written earlier are known: none goes back
        self._store.update()
        for tp in self._store.reset:  # a target partition that went back: its old checkpoints hold nothing
            remote = (self._rules.remote(tp.topic), tp.partition)
            for key in [k for k in {**self._floor, **self.latest} if k[1:] == remote]:
                self._floor.pop(key, None)
                self.latest.pop(key, None)
        self._store.reset.clear()
        mirrored = set(self._store.partitions())
        if not mirrored:
            return 0
        groups = self._groups()
        if not groups:
            return 0
        futures = {g: self._source.list_consumer_group_offsets([ConsumerGroupTopicPartitions(g)],  # one a call
                                                              request_timeout=REQUEST_TIMEOUT_S)[g] for g in groups}
        written = 0
        for group, future in futures.items():
            try:
                committed = future.result().topic_partitions or []
            except KafkaException as exc:
                log.debug("cannot read the offsets of group %s: %s", group, exc)
                continue
            for tp in committed:
                key_tp = TopicPartition(tp.topic, tp.partition)
                if tp.offset < 0 or key_tp not in mirrored:
                    continue
                downstream = self._store.translate(key_tp, tp.offset)
                if downstream is None:
                    continue
                checkpoint = Checkpoint(group, self._rules.remote(tp.topic), tp.partition, tp.offset, downstream,
                                        tp.metadata or "")
                key = (group, checkpoint.topic, checkpoint.partition)
                if not more_recent(checkpoint, self.latest.get(key, self._floor.get(key))):
                    continue
                record_key, value = encode_checkpoint(checkpoint)
                self._producer.produce(self.checkpoints_topic, value, record_key, 0,
                                       on_delivery=self._checkpoint_delivered(group, tp.topic, tp.partition))
                self.latest[key] = checkpoint
                written += 1
        if written:
            self._producer.flush(REQUEST_TIMEOUT_S)
            log.info("Wrote %d checkpoints to %s", written, self.checkpoints_topic)
        return written

    def _load_checkpoints(self) -> bool:
        """The checkpoints written before this start (by us or by MirrorMaker 2), as a floor: a
        restart never publishes an older position than they hold. Only those the target partition
        can hold count (one recreated since holds less); they are never synced to a group, only
        what this run translated is. False when they cannot be read (tried again next time)."""
        try:
            loaded = read_checkpoints(self._target_conf, self.checkpoints_topic, REQUEST_TIMEOUT_S,
                                      "mirror-checkpoints-reader") or {}
            ends = self._target_ends({(c.topic, c.partition) for c in loaded.values()})
        except (KafkaException, TimeoutError) as exc:
            log.warning("Cannot read the checkpoints written before this start (%s): none is written until "
                        "they are read", exc)
            return False
        self._floor = {key: c for key, c in loaded.items()
                       if c.downstream_offset <= ends.get((c.topic, c.partition), -1)}
        self._loaded = True
        if loaded:
            log.info("Read %d checkpoints written before this start from %s (%d beyond their target partition's "
                     "end left out)", len(loaded), self.checkpoints_topic, len(loaded) - len(self._floor))
        return True

    def _target_ends(self, partitions) -> Dict[Tuple[str, int], int]:
        """The target partitions' high watermarks (a partition missing there is left out)."""
        if not partitions:
            return {}
        request = {KafkaTopicPartition(t, p): OffsetSpec.latest() for t, p in partitions}
        ends = {}
        for tp, future in self._target.list_offsets(request, request_timeout=REQUEST_TIMEOUT_S).items():
            try:
                ends[(tp.topic, tp.partition)] = future.result().offset
            except KafkaException as exc:
                if exc.args[0].code() != confluent_kafka.KafkaError.UNKNOWN_TOPIC_OR_PART:
                    raise
        return ends

    def _checkpoint_delivered(self, group: str, topic: str, partition: int):
        """MirrorMaker 2's checkpoint-latency-ms: from the checkpoint's creation to the target's
        acknowledgement, per group and source partition."""
        if self._metrics is None:
            return None
        created = time.time()

        @client_callback
        def delivered(err, _msg) -> None:
            if err is None:
                self._metrics.checkpoint_written(group, TopicPartition(topic, partition),
                                                 (time.time() - created) * 1000.0)
        return delivered

    def sync_group_offsets(self) -> int:
        """Group offset sync: translated offsets committed to groups with no active member on the target."""
        by_group: Dict[str, List[Checkpoint]] = {}
        for checkpoint in list(self.latest.values()):
            by_group.setdefault(checkpoint.group, []).append(checkpoint)
        moved = 0
        for group, checkpoints in sorted(by_group.items()):
            if self._active_on_target(group):
                log.debug("group %s has active members on the target: its offsets are left alone", group)
                continue
            current = self._target_offsets(group)
            ahead = [KafkaTopicPartition(c.topic, c.partition, c.downstream_offset) for c in checkpoints
                     if c.downstream_offset > current.get((c.topic, c.partition), -1)]
            if not ahead:
                continue
            try:
                self._target.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, ahead)],
                                                          request_timeout=REQUEST_TIMEOUT_S)[group].result()
            except KafkaException as exc:
                log.warning("Cannot sync the offsets of group %s on the target: %s", group, exc.args[0].str())
                continue
            moved += 1
            log.info("Synced the offsets of group %s on the target: %s", group,
                     ", ".join(f"{tp.topic}-{tp.partition}={tp.offset}" for tp in ahead))
        return moved

    def _active_on_target(self, group: str) -> bool:
        return has_active_members(self._target, group)

    def _target_offsets(self, group: str) -> Dict[Tuple[str, int], int]:
        try:
            return {(tp.topic, tp.partition): offset for tp, offset in group_offsets(self._target, group).items()}
        except KafkaException:
            return {}

    def emit_heartbeat(self) -> int:
        """Heartbeat: (source alias, target alias, now) to the target's heartbeats topic."""
        self._ensure(self.heartbeats_topic)
        key, value = encode_heartbeat(Heartbeat(self._rules.source_alias, self._rules.target_alias,
                                                int(time.time() * 1000)))
        self._producer.produce(self.heartbeats_topic, value, key, 0, on_delivery=self._heartbeat_delivered)
        self._producer.poll(0)
        return 1

    @client_callback
    def _heartbeat_delivered(self, err, _msg) -> None:
        if err is None and self._metrics is not None:
            self._metrics.heartbeat_written()

    def close(self, deadline: float) -> None:
        """Flush the last checkpoints and heartbeats until the stop's ``deadline``: a checkpoint
        not written leaves the one before it, which a failed-over group resumes from (it reads
        some records again, it misses none)."""
        left = self._producer.flush(max(0.0, deadline - time.monotonic()))
        if left:
            log.warning("%d checkpoints and heartbeats were not written before the stop", left)
        if self._store is not None:
            self._store.close()
