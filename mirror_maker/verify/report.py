"""What ``verify`` found, as a table for the operator, a JSON document for the record of the move,
and a progress line while it reads (on a terminal only)."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import List, Optional, Tuple

from .compare import Outcome

IN_ORDER, MULTISET, LATEST_BY_KEY = "in order", "multiset per key", "latest record per key"


@dataclass
class Row:
    """One source partition and its target partition (in order), or one target topic and every
    source partition it gets records from (``partition`` None: a multiset, or by key)."""

    topic: str
    partition: Optional[int]
    target_topic: str
    method: str
    source_ranges: List[Tuple[int, int, int]] = field(default_factory=list)  # (partition, log start, end)
    target_ranges: List[Tuple[int, int, int]] = field(default_factory=list)
    source_records: int = 0
    target_records: int = 0
    source_digest: Optional[str] = None
    target_digest: Optional[str] = None
    outcome: Outcome = field(default_factory=Outcome)
    #: Partitions not read to their end before the deadline.
    unfinished: List[str] = field(default_factory=list)
    #: In order: both partitions' fingerprints and the target's end, where a reader of the
    #: source is found on the target (``target_position``); not in the report.
    sequences: Optional[tuple] = field(default=None, repr=False, compare=False)

    def target_position(self, source_offset: int) -> Optional[int]:
        """Where a reader at ``source_offset`` on the source resumes on the target: before the
        target record of the first source record it has not read (after the last one, the
        target's end). None unless this row was compared in order and holds everything: then
        the answer is exact, whatever the syncs say."""
        if self.sequences is None or self.status != "ok":
            return None
        source, target, target_end = self.sequences
        index = source.count_before(source_offset)
        return target.offset(index) if index < len(target) else target_end

    @property
    def status(self) -> str:
        if self.outcome.differs:
            return "differs"
        return "not proven" if self.unfinished or self.outcome.not_compared else "ok"

    def result(self) -> str:
        if self.outcome.differs:
            return ", ".join(f"{count} {kind}" for kind, count in sorted(self.outcome.counts.items()) if count)
        if self.unfinished:
            return "not read to the end"
        return "not all comparable" if self.outcome.not_compared else "ok"

    def as_json(self) -> dict:
        return {"topic": self.topic, "partition": self.partition, "target_topic": self.target_topic,
                "method": self.method, "status": self.status,
                "source": [{"partition": p, "log_start": low, "end": end} for p, low, end in self.source_ranges],
                "target": [{"partition": p, "log_start": low, "end": end} for p, low, end in self.target_ranges],
                "source_records": self.source_records, "target_records": self.target_records,
                "source_digest": self.source_digest, "target_digest": self.target_digest,
                "matched": self.outcome.matched, "counts": dict(self.outcome.counts),
                "differences": [{**vars(d), "text": d.describe()} for d in self.outcome.differences],
                "not_compared": self.outcome.not_compared + [f"{tp}: not read to the end before the deadline"
                                                             for tp in self.unfinished]}


@dataclass
class Report:
    source: str
    target: str
    started: float
    rows: List[Row] = field(default_factory=list)
    notes: List[str] = field(default_factory=list)
    sample: Optional[int] = None
    finished: float = 0.0

    @property
    def differs(self) -> bool:
        return any(row.status == "differs" for row in self.rows)

    @property
    def proven(self) -> bool:
        return all(row.status == "ok" for row in self.rows)

    def verdict(self) -> str:
        records = sum(row.source_records for row in self.rows)
        if self.differs:
            bad = sum(1 for row in self.rows if row.status == "differs")
            return f"the target differs from the source in {bad} of {len(self.rows)} rows"
        what = f"the first {self.sample} records of each partition" if self.sample else f"{records} records"
        if not self.proven:
            return f"nothing differs in what was compared ({what}), but not everything could be compared"
        held = "every record of the source"
        if any(row.method == LATEST_BY_KEY for row in self.rows):  # compaction leaves each key's latest
            held = ("each key's latest record of the source" if all(row.method == LATEST_BY_KEY for row in self.rows)
                    else "every record of the source (each key's latest in compacted topics)")
        return f"the target holds {held} ({what} in {len(self.rows)} rows), nothing else"

    def as_json(self) -> dict:
        return {"source": self.source, "target": self.target, "started": self.started, "finished": self.finished,
                "sample": self.sample, "complete": self.proven, "differs": self.differs, "verdict": self.verdict(),
                "notes": self.notes, "rows": [row.as_json() for row in self.rows]}

    def table(self) -> List[str]:
        header = ("TOPIC", "PARTITION", "TARGET TOPIC", "METHOD", "SOURCE OFFSETS", "TARGET OFFSETS",
                  "SOURCE RECORDS", "TARGET RECORDS", "RESULT")
        lines = [header] + [(row.topic, "*" if row.partition is None else str(row.partition), row.target_topic,
                             row.method, _ranges(row.source_ranges, row.partition),
                             _ranges(row.target_ranges, row.partition), str(row.source_records),
                             str(row.target_records), row.result()) for row in self.rows]
        text = aligned(lines)
        for row in self.rows:
            name = row.topic if row.partition is None else f"{row.topic}-{row.partition}"
            text += [f"{name}: {d.describe()}" for d in row.outcome.differences]
            text += [f"{name}: not compared: {reason}" for reason in row.outcome.not_compared]
            text += [f"{name}: not compared: {tp} not read to its end before --timeout.ms" for tp in row.unfinished]
        text += [f"note: {note}" for note in self.notes]
        text.append(f"{self.source} -> {self.target}: {self.verdict()}")
        return text


def aligned(rows: List[Tuple[str, ...]]) -> List[str]:
    """``rows`` (a header first) as lines of columns, each as wide as its widest cell."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)).rstrip() for row in rows]


def _ranges(ranges: List[Tuple[int, int, int]], partition: Optional[int]) -> str:
    if partition is not None:
        return " ".join(f"{low}-{end}" for _p, low, end in ranges) or "(none)"
    return f"{len(ranges)} partitions" if ranges else "(none)"


class Progress:
    """A progress line on stderr while reading, when it is a terminal (never in a log)."""

    def __init__(self, total: int, enabled: Optional[bool] = None) -> None:
        self.total = max(total, 1)
        self.done = 0
        self.enabled = sys.stderr.isatty() if enabled is None else enabled
        self._shown = 0.0
        self._started = time.monotonic()

    def __call__(self, records: int) -> None:
        self.done += records
        now = time.monotonic()
        if self.enabled and now - self._shown >= 0.2:
            self._shown = now
            rate = self.done / max(now - self._started, 1e-3)
            sys.stderr.write(f"\rverify: {self.done:,} of about {self.total:,} records read "
                             f"({min(100.0, 100.0 * self.done / self.total):.0f}%, {rate:,.0f}/s)")
            sys.stderr.flush()

    def end(self) -> None:
        if self.enabled:
            sys.stderr.write("\n")
            sys.stderr.flush()
