"""The source's consumer groups, and their exact places on the target.

A group's place comes from ``verify``'s pairing of source and target records (each row compared
in order holds both partitions' offsets), not from the offset syncs: the target offset of the
first record it had not read, so it reads nothing twice and skips nothing. A group with members
on the target is never moved: its offsets are its own there.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional

from confluent_kafka import KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka import ConsumerGroupTopicPartitions

from ..clients.admin import REQUEST_TIMEOUT_S, group_offsets
from ..errors import ClientFailed
from ..records import TopicPartition
from ..replication.checkpoints import has_active_members, selected_groups

#: A group's committed offsets on the source: group -> partition -> offset.
Committed = Dict[str, Dict[TopicPartition, int]]


@dataclass
class Placement:
    """One group's place in one partition, and what became of it."""

    group: str
    source: TopicPartition
    source_offset: int
    target_topic: str
    target_offset: Optional[int]
    #: "placed", or why not.
    result: str = "placed"

    @property
    def ok(self) -> bool:
        return self.result == "placed"

    def as_json(self) -> dict:
        return {"group": self.group, "topic": self.source.topic, "partition": self.source.partition,
                "source_offset": self.source_offset, "target_topic": self.target_topic,
                "target_offset": self.target_offset, "result": self.result}


def committed_offsets(admin, options, own: Iterable[str]) -> Committed:
    """The committed offsets of every group ``--groups`` selects but the mirror's ``own`` (its
    group on the source, and the one holding an exactly-once mirror's offsets)."""
    skipped = set(own)
    try:
        groups = [g for g in selected_groups(admin, options) if g not in skipped]
        committed: Committed = {}
        for group in groups:
            offsets = group_offsets(admin, group)
            if offsets:
                committed[group] = offsets
        return committed
    except KafkaException as exc:
        raise ClientFailed(f"cannot read the source's consumer groups: {exc.args[0].str()}") from None


def active_on_source(admin, groups: Iterable[str]) -> List[str]:
    """The groups that still have members on the source: their consumers have not stopped."""
    return sorted(g for g in groups if has_active_members(admin, g))


def groups_moved(before: Committed, after: Committed) -> List[str]:
    """The groups whose offsets changed between two reads: a consumer still runs on the source."""
    return sorted(g for g in set(before) | set(after) if before.get(g) != after.get(g))


def plan(committed: Committed, rows) -> List[Placement]:
    """Each group's exact place on the target, from the rows ``verify`` compared in order."""
    by_partition = {TopicPartition(row.topic, row.partition): row for row in rows if row.partition is not None}
    placements = []
    for group, offsets in sorted(committed.items()):
        for tp, offset in sorted(offsets.items()):
            row = by_partition.get(tp)
            if row is None:
                placements.append(Placement(group, tp, offset, "", None,
                                            "not placed: the partition was not compared record for record"))
                continue
            position = row.target_position(offset)
            placements.append(Placement(group, tp, offset, row.target_topic, position,
                                        "placed" if position is not None
                                        else "not placed: the target does not hold this partition's records"))
    return placements


def place(target_admin, placements: List[Placement]) -> None:
    """Commit each group's places on the target, all of a group's partitions at once, and only
    when every one of them can be placed."""
    by_group: Dict[str, List[Placement]] = {}
    for placement in placements:
        by_group.setdefault(placement.group, []).append(placement)
    for group, places in sorted(by_group.items()):
        ready = [p for p in places if p.ok]
        if len(ready) < len(places):  # half a group placed would start its other partitions anywhere
            for p in ready:
                p.result = "not placed: another partition of the group cannot be placed"
            continue
        if has_active_members(target_admin, group):
            for p in ready:
                p.result = "not placed: the group has members on the target (its offsets are its own there)"
            continue
        request = [KafkaTopicPartition(p.target_topic, p.source.partition, p.target_offset) for p in ready]
        try:
            target_admin.alter_consumer_group_offsets([ConsumerGroupTopicPartitions(group, request)],
                                                      request_timeout=REQUEST_TIMEOUT_S)[group].result()
        except KafkaException as exc:
            for p in ready:
                p.result = f"not placed: the target refused the offsets ({exc.args[0].str()})"
