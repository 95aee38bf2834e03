"""One flow's cutover: drain, final checkpoints, verify, and each group placed on the target.

Nothing is placed unless everything before it held: the flow drained, the target holds every
record of the source, and nothing moved on the source while it was checked (no producer wrote,
no group committed): a place computed from a moving source would be stale the moment it is
written. Each step that does not hold is one line of the report, and the exit status says which
kind it was (exit_codes.for_cutover).
"""

from __future__ import annotations

import contextlib
import logging
import signal
import threading
import time
from dataclasses import dataclass, field
from typing import List, Optional

from confluent_kafka import KafkaException

from ..clients.admin import admin_client, connection_settings
from ..errors import ConfigError
from ..handlers import PartitionPreservingHandler, RawBatchHandler
from ..records import TopicPartition
from ..replication.policies import topic_rules
from ..verify import reading
from ..verify.check import VerifyOptions, keeps_partitions, verify
from ..verify.report import Report, aligned
from .drain import Drained, drain
from .groups import Placement, active_on_source, committed_offsets, groups_moved, place, plan

log = logging.getLogger("mirror_maker.cutover")


@dataclass(frozen=True)
class CutoverOptions:
    #: How long the whole cutover may take (the drain gets what is left of it after its start).
    timeout_s: float = 600.0
    #: verify's progress line on stderr (None: when it is a terminal).
    progress: Optional[bool] = None


@dataclass
class Cutover:
    """What one flow's cutover did, step by step."""

    source: str
    target: str
    timeout_s: float
    drained: Optional[Drained] = None
    verified: Optional[Report] = None
    placements: List[Placement] = field(default_factory=list)
    #: What was written on the source while it was checked (a producer, a group's commit).
    moved: List[str] = field(default_factory=list)
    #: What else did not hold (a checkpoint that says another place).
    problems: List[str] = field(default_factory=list)
    #: The signal that stopped the checks, if one did.
    stopped: Optional[int] = None

    @property
    def complete(self) -> bool:
        return (self.drained is not None and self.drained.ok and self.verified is not None
                and self.verified.proven and not self.moved and not self.problems and self.stopped is None
                and all(p.ok for p in self.placements))

    def status(self) -> int:
        from ..cli import exit_codes

        drained, verified = self.drained, self.verified
        if self.stopped is not None:
            return exit_codes.for_signal(self.stopped)
        settled = bool(drained and drained.ok) and not self.moved
        return exit_codes.for_cutover(drained.status if drained else 0, settled, bool(verified and verified.differs),
                                      bool(verified and verified.proven), self.complete)

    def verdict(self) -> str:
        if self.complete:
            groups = len({p.group for p in self.placements})
            return (f"cut over: the target holds every record of the source and {groups} "
                    f"{'group is' if groups == 1 else 'groups are'} placed ({len(self.placements)} partitions): "
                    f"start producers and consumers on the target")
        return "not cut over: " + "; ".join(self.reasons())

    def reasons(self) -> List[str]:
        reasons = []
        if self.drained is not None and not self.drained.ok:
            reasons.append(self.drained.describe(self.timeout_s))
        if self.stopped is not None:
            placed = sum(1 for p in self.placements if p.ok)
            reasons.append(f"stopped by {signal.Signals(self.stopped).name} "
                           + (f"after placing {placed} group partitions" if placed else "before placing any group"))
        reasons += self.moved
        if self.verified is not None and not self.verified.proven:
            reasons.append(self.verified.verdict())
        reasons += self.problems
        unplaced = [p for p in self.placements if not p.ok]
        if unplaced:
            reasons.append(f"{len(unplaced)} group partitions not placed")
        return reasons

    def table(self) -> List[str]:
        lines = [f"{self.source} -> {self.target}: {self.drained.describe(self.timeout_s)}"] if self.drained else []
        if self.verified is not None:
            lines += self.verified.table()
        if self.placements:
            header = ("GROUP", "TOPIC", "PARTITION", "SOURCE OFFSET", "TARGET TOPIC", "TARGET OFFSET", "RESULT")
            rows = [header] + [(p.group, p.source.topic, str(p.source.partition), str(p.source_offset),
                                p.target_topic, "-" if p.target_offset is None else str(p.target_offset), p.result)
                               for p in self.placements]
            lines += aligned(rows)
        lines += [f"{self.source} -> {self.target}: {problem}" for problem in self.moved + self.problems]
        lines.append(f"{self.source} -> {self.target}: {self.verdict()}")
        return lines

    def as_json(self) -> dict:
        drained = self.drained
        return {"source": self.source, "target": self.target, "complete": self.complete, "verdict": self.verdict(),
                "drain": None if drained is None else {"status": drained.status, "caught_up": drained.caught_up,
                                                       "lag": drained.lag, "failure": drained.failure},
                "verify": None if self.verified is None else self.verified.as_json(),
                "groups": [p.as_json() for p in self.placements], "moved": self.moved, "problems": self.problems,
                "stopped_by": None if self.stopped is None else signal.Signals(self.stopped).name}


def cutover(config, handler, listener, options: CutoverOptions = CutoverOptions(), source_name: str = "source",
            target_name: str = "target") -> Cutover:
    """Drain the flow, prove the target complete and place every group; each step only after
    the one before it held. A SIGTERM or SIGINT after the drain stops before the placement (or
    once it is done, never half way), with the report of what was done."""
    if not keeps_partitions(handler) or type(handler) not in (PartitionPreservingHandler, RawBatchHandler):
        raise ConfigError("cutover places consumer groups record for record, which needs the source partitions "
                          "kept as they are: --message.handler mirror_maker.handlers.PartitionPreservingHandler, "
                          "or --use.raw.bytes")
    deadline = time.monotonic() + options.timeout_s
    result = Cutover(source_name, target_name, options.timeout_s)
    log.info("Cutover %s -> %s: mirroring until every partition is at its end", source_name, target_name)
    result.drained = drain(config, handler, listener, deadline)
    if not result.drained.ok:
        return result
    stop = _StopBeforePlacing()
    with stop:
        try:
            _check_and_place(config, handler, options, result, deadline, stop)
        except _Stopped as stopped:
            result.stopped = stopped.signum
    return result


def _check_and_place(config, handler, options: CutoverOptions, result: Cutover, deadline: float,
                     stop: "_StopBeforePlacing") -> None:
    rules = topic_rules(config.replication)
    source_admin = admin_client(config.source_admin_conf(), "mirror-cutover-source")
    target_admin = admin_client(config.target_admin_conf(), "mirror-cutover-target")
    own = {config.group_id, config.exactly_once_group}
    before = committed_offsets(source_admin, config.replication, own)
    failover = config.replication.emit_checkpoints and config.replication.emit_offset_syncs
    if failover:
        _final_checkpoints(config, rules, source_admin, target_admin, deadline)
    result.verified = verify(config, handler, VerifyOptions(None, max(1.0, deadline - time.monotonic()),
                                                            options.progress), result.source, result.target)
    # A source still written to explains a target that differs (records written after the drain).
    result.moved = _source_moved(config, result.verified)
    after = committed_offsets(source_admin, config.replication, own)
    result.moved += [f"group {g} committed on the source during the cutover: stop its consumers, then run "
                     f"cutover again" for g in groups_moved(before, after)]
    result.moved += [f"group {g} still has members on the source: stop its consumers, then run cutover again"
                     for g in active_on_source(source_admin, before)]
    if result.moved or result.verified.differs or not result.verified.proven:
        return
    verified_topics = {row.topic for row in result.verified.rows}
    result.placements = plan({g: {tp: o for tp, o in offsets.items() if tp.topic in verified_topics}
                              for g, offsets in before.items()}, result.verified.rows)
    with stop.deferred():
        place(target_admin, result.placements)
    if failover:
        result.problems += _checkpoints_off(config, result.placements, result.verified.rows)


class _Stopped(Exception):
    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


class _StopBeforePlacing:
    """SIGTERM and SIGINT while the cutover checks (the drain has its own): the checks end at
    once, and during the placement the signal waits until every group is committed, so no group
    is left half placed. Installed in the main thread only (Python's rule for handlers)."""

    def __init__(self) -> None:
        self._placing = False
        self._pending: Optional[int] = None
        self._previous: dict = {}

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            self._previous = {s: signal.signal(s, self._handle) for s in (signal.SIGTERM, signal.SIGINT)}
        return self

    def __exit__(self, *_exc) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)

    def _handle(self, signum, _frame) -> None:
        log.info("Received %s: the cutover stops %s", signal.Signals(signum).name,
                 "once every group is placed" if self._placing else "before placing any group")
        if self._placing:
            self._pending = signum
        else:
            raise _Stopped(signum)

    @contextlib.contextmanager
    def deferred(self):
        self._placing = True
        try:
            yield
        finally:
            self._placing = False
        if self._pending is not None:
            raise _Stopped(self._pending)


def _final_checkpoints(config, rules, source_admin, target_admin, deadline: float) -> None:
    """One round of checkpoints after the drain's last offset syncs (read to the topic's end),
    as the mirror writes them, so that MirrorMaker 2's clients (``RemoteClusterUtils``,
    ``translate-offsets``) find the groups where they are placed."""
    from ..engine.runner import offset_syncs_topic
    from ..replication.checkpoints import ConsumerFailover, OffsetSyncStore

    _on_source, cluster, name = offset_syncs_topic(config, rules)
    store = OffsetSyncStore(cluster, name)
    failover = ConsumerFailover(config.replication, rules, store, source_admin, target_admin,
                                connection_settings(config.producer))
    try:
        if not store.update_to_end(max(1.0, min(60.0, deadline - time.monotonic()))):
            log.warning("The offset syncs were not read to their end in time: the last checkpoints may lag")
        failover.emit_checkpoints()
    finally:
        failover.close(time.monotonic() + 30.0)


def _checkpoints_off(config, placements: List[Placement], rows) -> List[str]:
    """The placed partitions whose newest checkpoint would have a group read a record twice or
    skip one (a checkpoint at a commit marker before the place reads the same records). A
    partition without a checkpoint contradicts nothing (a group below every sync gets none)."""
    from ..replication.translate import read_checkpoints

    topic = topic_rules(config.replication).policy.checkpoints_topic(config.replication.source_alias)
    try:
        checkpoints = read_checkpoints(connection_settings(config.producer), topic, 60.0, "mirror-cutover-checkpoints")
    except (KafkaException, TimeoutError) as exc:
        return [f"cannot read the checkpoints to compare the places with ({exc})"]
    if checkpoints is None:
        return [f"no checkpoints topic {topic} on the target to compare the places with"]
    targets = {(row.target_topic, row.partition): row.sequences[1] for row in rows if row.sequences}
    problems = []
    for p in placements:
        checkpoint = checkpoints.get((p.group, p.target_topic, p.source.partition))
        if not p.ok or checkpoint is None:
            continue
        said, target = checkpoint.downstream_offset, targets[(p.target_topic, p.source.partition)]
        if said <= p.target_offset and target.count_before(said) == target.count_before(p.target_offset):
            continue  # the same records from there
        problems.append(f"group {p.group}: the checkpoint of {p.target_topic}-{p.source.partition} says {said}, "
                        f"its exact place is {p.target_offset} (translate-offsets and RemoteClusterUtils would "
                        f"give {said})")
    return problems


def _source_moved(config, report: Report) -> List[str]:
    """The source partitions that grew since verify took their ends: a producer still writes
    (the high watermark: a transaction begun since and still open counts too)."""
    ends = {TopicPartition(row.topic, partition): end for row in report.rows
            for partition, _low, end in row.source_ranges}
    consumer = reading.consumer_for(config.consumer, "mirror-cutover-source", "read_uncommitted")
    try:
        now = reading.watermarks(consumer, list(ends))
    finally:
        consumer.close()
    return [f"{tp.topic}-{tp.partition} was written to during the cutover ({now[tp][1] - end} records since "
            f"the check began): stop its producers, then run cutover again"
            for tp, end in sorted(ends.items()) if now[tp][1] > end]
