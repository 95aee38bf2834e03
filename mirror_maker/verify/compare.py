"""Finding and naming what differs between a partition on the source and its copy on the target.

In order (the mirror keeps partitions): the two sequences of fingerprints are walked side by side;
where they part, the nearer of "the target lacks these source records" and "the target has these
records the source has not" (within ``WINDOW`` records) is taken, else one record differs, and the
walk goes on from there, so that each difference is named once by the first offset it touches.
As a multiset (the producer's partitioner chose the target partition, or a handler made the
records): every source record must be on the target exactly as many times. By key (either side is
compacted): each key's latest record must be the same, a tombstone being the same as no record.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from .fingerprint import SIZE, Fingerprints

#: How far ahead a walk looks for a record again after the sequences part.
WINDOW = 10000
#: Differences named per kind in a report's row; the counts cover all of them.
NAMED = 20

MISSING, EXTRA, DIFFERENT = "missing", "extra", "different"


@dataclass
class Difference:
    """A run of ``count`` records: on the source and not the target (missing), on the target and
    not the source (extra: a duplicate or a foreign record), or changed on the way (different).
    Offsets are the run's first; ``partition`` where the row spans a topic."""

    kind: str
    count: int
    source_offset: Optional[int] = None
    target_offset: Optional[int] = None
    source_partition: Optional[int] = None
    target_partition: Optional[int] = None
    duplicate_of: Optional[int] = None

    def describe(self) -> str:
        records = "record" if self.count == 1 else f"{self.count} records"
        source = _where("source", self.source_partition, self.source_offset)
        target = _where("target", self.target_partition, self.target_offset)
        if self.kind == MISSING:
            return f"{records} missing on the target from {source}" + (f" (before {target})" if target else "")
        if self.kind == EXTRA:
            again = f", a duplicate of source offset {self.duplicate_of}" if self.duplicate_of is not None else ""
            return f"{records} extra on the target at {target}{again}" + (f" (before {source})" if source else "")
        return f"{records} different from {source} at {target}"


def _where(side: str, partition: Optional[int], offset: Optional[int]) -> str:
    if offset is None:
        return ""
    return f"{side} partition {partition} offset {offset}" if partition is not None else f"{side} offset {offset}"


@dataclass
class Outcome:
    """What a comparison found: how many records matched, every difference counted, the first
    ``NAMED`` named, and what could not be compared."""

    matched: int = 0
    counts: Counter = field(default_factory=Counter)
    differences: List[Difference] = field(default_factory=list)
    not_compared: List[str] = field(default_factory=list)

    def add(self, difference: Difference) -> None:
        self.counts[difference.kind] += difference.count
        if sum(1 for named in self.differences if named.kind == difference.kind) < NAMED:
            self.differences.append(difference)

    @property
    def differs(self) -> bool:
        return bool(sum(self.counts.values()))


def _common_prefix(a: memoryview, b: memoryview) -> int:
    """How many whole fingerprints the two start with in common (C compares, halving)."""
    n = min(len(a), len(b)) // SIZE
    if a[:n * SIZE] == b[:n * SIZE]:
        return n
    low, high = 0, n  # a[:low] equal, a[:high] not
    while high - low > 1:
        mid = (low + high) // 2
        if a[:mid * SIZE] == b[:mid * SIZE]:
            low = mid
        else:
            high = mid
    return low


def in_order(source: Fingerprints, target: Fingerprints, source_trimmed: bool = False,
             target_trimmed: bool = False) -> Outcome:
    """``source_trimmed``: the source's log no longer starts at 0 (retention, deleted records), so
    the target may hold records from before it; ``target_trimmed``: the same of the target, whose
    missing first records are then not comparable rather than missing."""
    outcome = Outcome()
    i = j = 0
    if source_trimmed and not len(source) and len(target):  # retention emptied the source
        outcome.not_compared.append(f"{len(target)} target records, and the source's log holds none any more: "
                                    f"removed from the source, not comparable")
        return outcome
    if len(source) and len(target) and source.at(0) != target.at(0):
        if source_trimmed and (k := target.index_of(source.at(0))) > 0:
            outcome.not_compared.append(f"{k} target records before the source's log start (offset "
                                        f"{source.offset(0)}): removed from the source, not comparable")
            j = k
        elif target_trimmed and (k := source.index_of(target.at(0))) > 0:
            outcome.not_compared.append(f"source offsets {source.offset(0)} to {source.offset(k - 1)}: the target's "
                                        f"log starts at offset {target.offset(0)} (removed there), not comparable")
            i = k
    a, b = memoryview(source.digests), memoryview(target.digests)
    while i < len(source) and j < len(target):
        common = _common_prefix(a[i * SIZE:], b[j * SIZE:])
        outcome.matched += common
        i, j = i + common, j + common
        if i >= len(source) or j >= len(target):
            break
        lacking = _found(source, target.at(j), i)  # target[j] is further on in the source
        surplus = _found(target, source.at(i), j)  # source[i] is further on in the target
        if lacking is not None and (surplus is None or lacking - i <= surplus - j):
            outcome.add(Difference(MISSING, lacking - i, source.offset(i), target.offset(j)))
            i = lacking
        elif surplus is not None:
            duplicate = source.offset(i - 1) if i and target.at(j) == source.at(i - 1) else None
            outcome.add(Difference(EXTRA, surplus - j, source.offset(i), target.offset(j), duplicate_of=duplicate))
            j = surplus
        else:
            outcome.add(Difference(DIFFERENT, 1, source.offset(i), target.offset(j)))
            i, j = i + 1, j + 1
    if i < len(source):
        outcome.add(Difference(MISSING, len(source) - i, source.offset(i)))
    if j < len(target):
        duplicate = source.offset(i - 1) if i and target.at(j) == source.at(i - 1) else None
        outcome.add(Difference(EXTRA, len(target) - j, target_offset=target.offset(j), duplicate_of=duplicate))
    return outcome


def _found(sequence: Fingerprints, digest: bytes, start: int) -> Optional[int]:
    index = sequence.index_of(digest, start, start + WINDOW)
    return None if index < 0 else index


Located = Tuple[int, int]  # (partition, offset)


class Multiset:
    """Source records counted in, target records counted out; an extra one is known (and located)
    as it is read, since the source is read first."""

    def __init__(self) -> None:
        self._counts: Dict[bytes, int] = {}
        self._first: Dict[bytes, Located] = {}
        self.outcome = Outcome()

    def add_source(self, digest: bytes, where: Located) -> None:
        self._counts[digest] = self._counts.get(digest, 0) + 1
        self._first.setdefault(digest, where)

    def take_target(self, digest: bytes, where: Located) -> None:
        left = self._counts.get(digest, 0)
        if left:
            self._counts[digest] = left - 1
            self.outcome.matched += 1
        else:
            self.outcome.add(Difference(EXTRA, 1, target_partition=where[0], target_offset=where[1]))

    def finish(self) -> Outcome:
        for digest, left in self._counts.items():
            if left:
                partition, offset = self._first[digest]
                self.outcome.add(Difference(MISSING, left, offset, source_partition=partition))
        _by_location(self.outcome)
        return self.outcome


class LatestByKey:
    """Each key's latest record on either side (a compacted topic's meaning); a tombstone is the
    same as no record, since compaction removes both in time."""

    def __init__(self) -> None:
        self._sides: Tuple[Dict[bytes, Tuple[bytes, Located]], ...] = ({}, {})
        self.keyless = 0

    def add(self, side: int, key: Optional[bytes], tombstone: bool, digest: bytes, where: Located) -> None:
        if key is None:
            self.keyless += 1
            return
        if tombstone:
            self._sides[side].pop(key, None)
        else:
            self._sides[side][key] = (digest, where)

    def finish(self) -> Outcome:
        outcome = Outcome()
        source, target = self._sides
        for key, (digest, (partition, offset)) in source.items():
            on_target = target.get(key)
            if on_target is None:
                outcome.add(Difference(MISSING, 1, offset, source_partition=partition))
            elif on_target[0] != digest:
                outcome.add(Difference(DIFFERENT, 1, offset, on_target[1][1], partition, on_target[1][0]))
            else:
                outcome.matched += 1
        for key, (_digest, (partition, offset)) in target.items():
            if key not in source:
                outcome.add(Difference(EXTRA, 1, target_partition=partition, target_offset=offset))
        if self.keyless:
            outcome.not_compared.append(f"{self.keyless} records without a key (a compacted topic keeps them "
                                        f"only until compaction)")
        _by_location(outcome)
        return outcome


def _by_location(outcome: Outcome) -> None:
    """Missing and different records by their source position, then the extras by their target one."""
    outcome.differences.sort(key=lambda d: (d.source_offset is None, d.source_partition or 0, d.source_offset or 0,
                                            d.target_partition or 0, d.target_offset or 0))
