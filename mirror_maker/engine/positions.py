"""Where a stream starts reading a partition, and where it goes on when its position is gone.

Written once for every mode. A partition starts at its committed offset (in the source group, or
on the target in exactly-once mode); a partition added to a topic this group mirrored before
starts at its beginning (with --refresh.topics.enabled, as MirrorMaker 2 does); any other starts
where ``auto.offset.reset`` says. A position the source no longer holds (retention deleted the
records before they were read) is reset the same way, and the records lost are counted in one
WARN line. With ``auto.offset.reset=none`` both are a failure naming the partitions, as Kafka's
consumer raises NoOffsetForPartitionException and MirrorMaker v1 exits: users set ``none`` so
that a lost offset never goes unnoticed.

librdkafka runs with ``auto.offset.reset=error`` in every stream consumer, so that it never resets
a position by itself: it reports the partition instead, and the stream resolves it here.
"""

from __future__ import annotations

import logging
from typing import Callable, Dict, Iterable, List, Optional, Set, Tuple

from confluent_kafka import KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from ..clients.committed import read_committed_offsets
from ..errors import ClientFailed, NoOffsetForPartition
from ..records import TopicPartition

log = logging.getLogger("mirror_maker.worker")

COMMITTED_TIMEOUT_S = 10.0
_EARLIEST = frozenset({"earliest", "smallest", "beginning"})
_LATEST = frozenset({"latest", "largest", "end"})
#: librdkafka's name for Java's ``none``; the translation maps one to the other.
_NONE = frozenset({"error", "none"})
#: The consumer setting that makes librdkafka report a reset instead of doing it.
REPORT_RESETS = {"auto.offset.reset": "error"}


def _describe(tps: Iterable[TopicPartition]) -> str:
    return ", ".join(f"{tp.topic}-{tp.partition}" for tp in sorted(tps))


class ResetPolicy:
    """The user's ``auto.offset.reset`` (Java's default, latest, when unset)."""

    def __init__(self, value: Optional[str]) -> None:
        self.name = (value or "latest").strip().lower()
        if self.name not in _EARLIEST | _LATEST | _NONE:
            raise ValueError(f"auto.offset.reset={self.name}")

    @property
    def refuses(self) -> bool:
        return self.name in _NONE

    @property
    def shown(self) -> str:
        return "none" if self.refuses else self.name

    def choose(self, low: int, high: int) -> int:
        return low if self.name in _EARLIEST else high


class StartPositions:
    """Resolves where partitions start, for one stream.

    ``committed(tps)`` reads the committed offsets (the committer's store: the source group, or
    the target's offsets group); ``watermarks(tp)`` the partition's log start and end (for
    ``latest`` the end a reader of the consumer's isolation level sees). ``deferrable``: when an
    offset cannot be read now, the partition may start at librdkafka's INVALID offset and be
    resolved at its first fetch (only where librdkafka reads the same store: the source group).
    """

    def __init__(self, policy: ResetPolicy, committed: Callable[[List[TopicPartition]], Dict[TopicPartition, int]],
                 watermarks: Callable[[TopicPartition], Tuple[int, int]], follows_new_partitions: bool,
                 deferrable: bool) -> None:
        self.policy = policy
        self._committed = committed
        self._watermarks = watermarks
        self._follows_new_partitions = follows_new_partitions
        self._deferrable = deferrable

    def committed(self, tps: List[TopicPartition]) -> Dict[TopicPartition, int]:
        """The offsets the store holds for these partitions (those it has one for)."""
        return self._committed(tps)

    def resolve(self, tps: List[TopicPartition]) -> Tuple[Dict[TopicPartition, int], Set[TopicPartition]]:
        """Each partition's start, and those worth committing at once: a start at the end
        (``latest``), which a restart before the first commit would resolve again, past what
        arrived meanwhile. A partition missing from the answer starts at librdkafka's INVALID
        offset (resolved at its first fetch)."""
        try:
            committed = self._committed(tps)
            missing = [tp for tp in tps if tp not in committed]
            grown = self._grown(missing)
        except KafkaException as exc:
            if not self._deferrable:
                raise ClientFailed(f"cannot read the committed offsets of {_describe(tps)}: "
                                   f"{exc.args[0].str()}") from None
            log.warning("Cannot read committed offsets (%s); they are read at the first fetch", exc.args[0].str())
            return {}, set()
        positions: Dict[TopicPartition, int] = {}
        for tp in tps:
            if tp in committed:
                positions[tp] = committed[tp]
                log.info("Setting offset for partition %s-%d to the committed offset %d", tp.topic, tp.partition,
                         committed[tp])
        refused = [tp for tp in missing if tp not in grown and self.policy.refuses]
        if refused:
            raise NoOffsetForPartition(
                f"no committed offset for {_describe(refused)} and auto.offset.reset=none: the mirror stops "
                f"rather than guess where to start (commit offsets for group, or set auto.offset.reset to "
                f"earliest or latest)")
        at_the_end = set()
        for tp in missing:
            try:
                low, high = self._watermarks(tp)
            except KafkaException as exc:
                if not self._deferrable:
                    raise ClientFailed(f"cannot read the log start and end of {tp.topic}-{tp.partition}: "
                                       f"{exc.args[0].str()}") from None
                log.warning("Cannot resolve auto.offset.reset for %s-%d (%s); it is resolved at the first fetch",
                            tp.topic, tp.partition, exc.args[0].str())
                continue
            added = tp in grown
            positions[tp] = low if added else self.policy.choose(low, high)
            if positions[tp] > low:
                at_the_end.add(tp)
            log.info("Resetting offset for partition %s-%d to position %d (%s)", tp.topic, tp.partition, positions[tp],
                     "a partition added while mirroring: from its start" if added
                     else f"no committed offset; auto.offset.reset={self.policy.shown}")
        return positions, at_the_end

    def _grown(self, missing: List[TopicPartition]) -> Set[TopicPartition]:
        """With ``--refresh.topics.enabled``: of the partitions without a committed offset, those
        added to a topic this group mirrored before (a lower partition has an offset). They are
        mirrored from their start, as MirrorMaker 2 does, whatever auto.offset.reset says: the
        records written to them before they were assigned would be skipped otherwise."""
        if not self._follows_new_partitions or not missing:
            return set()
        earlier = {TopicPartition(tp.topic, p) for tp in missing for p in range(tp.partition)} - set(missing)
        if not earlier:
            return set()
        mirrored = {tp.topic for tp in self._committed(sorted(earlier))}  # unread: none is placed yet
        return {tp for tp in missing if tp.topic in mirrored}

    def reset(self, tp: TopicPartition, position: int) -> int:
        """Where ``tp`` goes on when the source no longer holds ``position`` (out of range), with
        one WARN line counting what is lost; raises with ``auto.offset.reset=none``."""
        low, high = self._watermarks(tp)
        if self.policy.refuses:
            raise NoOffsetForPartition(
                f"offset {position} of {tp.topic}-{tp.partition} is out of range (its log holds offsets {low} to "
                f"{high}) and auto.offset.reset=none: the mirror stops rather than skip records")
        new = self.policy.choose(low, high)
        deleted = max(0, low - position) if position >= 0 else 0
        skipped = max(0, new - max(low, position))
        holds = f"offsets {low}..{high - 1}" if high > low else f"nothing, its log starts at {low}"
        log.warning("Offset %d of %s-%d is out of range (the partition now holds %s): going on from %d "
                    "(auto.offset.reset=%s); %d records were deleted by retention before they were mirrored%s",
                    position, tp.topic, tp.partition, holds, new, self.policy.shown, deleted,
                    f", and {skipped} more are skipped" if skipped else "")
        return new


def watermarks_of(consumer) -> Callable[[TopicPartition], Tuple[int, int]]:
    """A partition's log start and end, asked of the leader (ListOffsets with the consumer's
    isolation level: the end is the last stable offset under read_committed)."""
    def watermarks(tp: TopicPartition) -> Tuple[int, int]:
        return consumer.get_watermark_offsets(KafkaTopicPartition(tp.topic, tp.partition), timeout=COMMITTED_TIMEOUT_S)
    return watermarks


def committed_in_group(consumer, retrying) -> Callable[[List[TopicPartition]], Dict[TopicPartition, int]]:
    """The source group's committed offsets, through the stream's consumer."""
    def committed(tps: List[TopicPartition]) -> Dict[TopicPartition, int]:
        answer = read_committed_offsets(consumer, [KafkaTopicPartition(tp.topic, tp.partition) for tp in tps],
                                        COMMITTED_TIMEOUT_S, retrying)
        return {TopicPartition(tp.topic, tp.partition): tp.offset for tp in answer if tp.offset >= 0}
    return committed
