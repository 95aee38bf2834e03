"""One flow's comparison, planned from the mirror's own configuration: the topics its include
regex and replication policy select, their names on the target, and how its handler places
records (which decides whether partitions are compared in order or as multisets).

The ends are taken when the check begins, the target's first: the target then holds nothing
the source did not have at its own ends, so a record past the matched ones is an extra, not a
later one. Records written after that are not compared (a stopped producer makes that nothing).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import confluent_kafka
from confluent_kafka.admin import ConfigResource, ResourceType

from ..clients.admin import REQUEST_TIMEOUT_S, admin_client, list_topic_partitions
from ..config.topics import select_topics
from ..errors import ClientFailed, ConfigError
from ..handlers import DefaultMessageHandler, PartitionPreservingHandler, RawBatchHandler, is_raw_handler
from ..records import ConsumerRecord, TopicPartition
from ..replication.policies import topic_rules
from . import compare, reading
from .fingerprint import Fingerprints, fingerprint
from .report import IN_ORDER, LATEST_BY_KEY, MULTISET, Progress, Report, Row

log = logging.getLogger("mirror_maker.verify")

_NO_TIMESTAMP = confluent_kafka.TIMESTAMP_NOT_AVAILABLE
_LOG_APPEND_TIME = "LogAppendTime"


@dataclass(frozen=True)
class VerifyOptions:
    #: Compare only the first ``sample`` records of each partition (a bounded read).
    sample: Optional[int] = None
    #: How long the reads may take in all.
    timeout_s: float = 3600.0
    #: A progress line on stderr (None: when it is a terminal).
    progress: Optional[bool] = None


@dataclass
class _Topic:
    """A source topic, where it goes, and how it is compared."""

    name: str
    partitions: int
    target: str
    method: str
    timestamps: bool


def verify(config, handler, options: VerifyOptions = VerifyOptions(), source_name: str = "source",
           target_name: str = "target") -> Report:
    """Compare what ``config``'s mirror copies from its source to its target."""
    report = Report(source_name, target_name, time.time(), sample=options.sample)
    rules = topic_rules(config.replication)
    in_order = keeps_partitions(handler)
    custom = None if type(handler) in (DefaultMessageHandler, PartitionPreservingHandler, RawBatchHandler) else handler
    source_admin = admin_client(config.source_admin_conf(), "mirror-verify-source")
    target_admin = admin_client(config.target_admin_conf(), "mirror-verify-target")
    source_partitions = _answered("source", config.consumer, list_topic_partitions, source_admin)
    target_partitions = _answered("target", config.producer, list_topic_partitions, target_admin)
    selected = select_topics(config.include, source_partitions, config.exclude_internal_topics,
                             rules.selects if rules.mm2_rules else None)
    heartbeats = [t for t in selected if rules.mm2_rules and rules.policy.is_heartbeats_topic(t)]
    if heartbeats:
        report.notes.append(f"heartbeats topics not compared (written all the time): {', '.join(heartbeats)}")
    names = [t for t in selected if t not in heartbeats]
    if not names:
        raise ConfigError(f"no source topic matches {config.include.pattern!r}: nothing to verify")
    targets = {t: rules.remote(_target_topic(custom, t)) for t in names}
    source_configs = _answered("source", config.consumer, _configs, source_admin, names)
    target_configs = _answered("target", config.producer, _configs, target_admin,
                               [t for t in targets.values() if t in target_partitions])
    topics = []
    for name in names:
        target = targets[name]
        compacted = any("compact" in c.get(target if side else name, {}).get("cleanup.policy", "")
                        for side, c in enumerate((source_configs, target_configs)))
        log_append = any(c.get(target if side else name, {}).get("message.timestamp.type") == _LOG_APPEND_TIME
                         for side, c in enumerate((source_configs, target_configs)))
        method = LATEST_BY_KEY if compacted else IN_ORDER if in_order and custom is None else MULTISET
        topics.append(_Topic(name, source_partitions[name], target, method, not (log_append or custom)))
        if log_append:
            report.notes.append(f"{name}: timestamps not compared (LogAppendTime on one side)")
        if target not in target_partitions:
            report.notes.append(f"{name}: the target has no topic {target}")
    if custom is not None:
        report.notes.append(f"each source record compared as --message.handler {type(custom).__name__} returns it "
                            f"(timestamps not compared: a handler may leave them to the producer)")
    deadline = time.monotonic() + options.timeout_s
    source_consumer = reading.consumer_for(config.consumer, "mirror-verify-source")
    target_consumer = reading.consumer_for(config.producer, "mirror-verify-target")
    try:
        target_bounds = reading.watermarks(target_consumer, [
            TopicPartition(topic.target, p) for topic in topics for p in range(target_partitions.get(topic.target, 0))])
        source_bounds = reading.watermarks(source_consumer, [
            TopicPartition(topic.name, p) for topic in topics for p in range(topic.partitions)])
        held_back = reading.open_transactions(config.consumer, source_bounds, "mirror-verify-source-ends")
        progress = Progress(sum(end - low for low, end in (*source_bounds.values(), *target_bounds.values())),
                            options.progress)
        comparison = _Comparison(topics, custom, rules, in_order and custom is None)
        unfinished = reading.read(source_consumer, source_bounds, comparison.source_record, deadline, options.sample,
                                  progress)
        unfinished |= reading.read(target_consumer, target_bounds, comparison.target_record, deadline,
                                   options.sample, progress)
        progress.end()
    finally:
        source_consumer.close()
        target_consumer.close()
    report.rows = comparison.rows(source_bounds, target_bounds, unfinished, options.sample)
    for row in report.rows:  # what an open transaction holds back may be followed by committed records
        for partition, _low, _end in row.source_ranges:
            stable = held_back.get(TopicPartition(row.topic, partition))
            if stable is not None:
                row.outcome.not_compared.append(f"{row.topic}-{partition}: a transaction is open at offset {stable}: "
                                                f"nothing after it is readable yet")
    if options.sample:
        report.notes.append(f"only the first {options.sample} records of each partition compared (--sample): "
                            f"not a proof of the rest")
    report.finished = time.time()
    return report


def _target_topic(custom, topic: str) -> str:
    """The one target topic a custom handler names for ``topic`` (before the replication policy)."""
    if custom is None or not hasattr(custom, "target_topics"):
        return topic
    named = list(custom.target_topics(topic))
    if len(named) != 1:
        raise ConfigError(f"verify compares one target topic per source topic; --message.handler names "
                          f"{len(named)} for {topic}")
    return named[0]


def keeps_partitions(handler) -> bool:
    if is_raw_handler(handler):
        if type(handler) is not RawBatchHandler:
            raise ConfigError("verify cannot apply a raw-mode --message.handler (it decides per batch): verify "
                              "with raw mode's own handler")
        return True
    return bool(getattr(handler, "keep_partition", False))


def _answered(side: str, conf: Dict[str, str], call, *args):
    """``call(*args)`` of one side's admin client, a failure as one line naming the cluster."""
    try:
        return call(*args)
    except confluent_kafka.KafkaException as exc:
        error = exc.args[0]
        raise ClientFailed(f"the {side} cluster ({conf.get('bootstrap.servers')}) did not answer: "
                           f"{error.str() if isinstance(error, confluent_kafka.KafkaError) else error}") from None


def _configs(admin, topics: List[str]) -> Dict[str, Dict[str, str]]:
    if not topics:
        return {}
    futures = admin.describe_configs([ConfigResource(ResourceType.TOPIC, t) for t in topics],
                                     request_timeout=REQUEST_TIMEOUT_S)
    described = {}
    for resource, future in futures.items():
        entries = future.result()
        described[resource.name] = {name: entry.value or "" for name, entry in entries.items()}
    return described


class _Comparison:
    """Where each record read goes: a partition's fingerprints (in order), a target topic's
    multiset, or a topic's latest records by key."""

    def __init__(self, topics: List[_Topic], custom, rules, partitions_kept: bool) -> None:
        """``partitions_kept``: a key's latest record is compared per partition (a key written to
        several partitions has a latest record in each)."""
        self._partitions_kept = partitions_kept
        #: Per source topic, the records a handler sent to another topic than the one compared.
        self._strays: Dict[str, int] = {}
        self._topics = {t.name: t for t in topics}
        self._by_target = {t.target: t for t in topics}
        self._custom = custom
        self._remote = rules.remote
        self._sequences: Dict[Tuple[int, TopicPartition], Fingerprints] = {}
        self._multisets: Dict[str, compare.Multiset] = {}
        self._latest: Dict[str, compare.LatestByKey] = {}
        self._counts: Dict[Tuple[int, TopicPartition], int] = {}

    def _digest(self, message, timestamps: bool) -> bytes:
        ts_type, ts = message.timestamp()
        return fingerprint(message.key(), message.value(), message.headers(),
                           ts if timestamps and ts_type != _NO_TIMESTAMP else None)

    def source_record(self, tp: TopicPartition, message) -> None:
        topic = self._topics[tp.topic]
        if topic.method == MULTISET and self._custom is not None:
            self._counts[(0, tp)] = self._counts.get((0, tp), 0) + 1
            self._handled(tp, message)
        else:
            self._add(0, topic, tp, message)

    def target_record(self, tp: TopicPartition, message) -> None:
        self._add(1, self._by_target[tp.topic], tp, message)

    def _add(self, side: int, topic, tp: TopicPartition, message) -> None:
        """A record of the source (``side`` 0) or the target (1), by its topic's method."""
        self._counts[(side, tp)] = self._counts.get((side, tp), 0) + 1
        digest, where = self._digest(message, topic.timestamps), (tp.partition, message.offset())
        if topic.method == IN_ORDER:
            self._sequences.setdefault((side, tp), Fingerprints()).add(message.offset(), digest)
        elif topic.method == LATEST_BY_KEY:
            key = message.key()
            self._latest.setdefault(topic.target, compare.LatestByKey()).add(
                side, (tp.partition, key) if self._partitions_kept and key is not None else key,
                message.value() is None, digest, where)
        else:
            multiset = self._multisets.setdefault(topic.target, compare.Multiset())
            (multiset.take_target if side else multiset.add_source)(digest, where)

    def _handled(self, tp: TopicPartition, message) -> None:
        ts_type, ts = message.timestamp()
        record = ConsumerRecord(tp.topic, tp.partition, message.offset(), None if ts_type == _NO_TIMESTAMP else ts,
                                message.key(), message.value(), message.headers() or [])
        compared = self._topics[tp.topic].target
        for out in self._custom.handle(record) or ():
            if self._remote(out.topic) != compared:  # not read on the target: never passed unseen
                self._strays[tp.topic] = self._strays.get(tp.topic, 0) + 1
                continue
            self._multisets.setdefault(compared, compare.Multiset()).add_source(
                fingerprint(out.key, out.value, out.headers, None), (tp.partition, message.offset()))

    def rows(self, source_bounds, target_bounds, unfinished, sample: Optional[int] = None) -> List[Row]:
        """One row per partition compared in order (a target partition the source lacks too),
        one per topic otherwise; what was not read to its end is compared only as far as both
        sides were read, and never passed."""
        rows = []
        for topic in self._topics.values():
            source_tps = [TopicPartition(topic.name, p) for p in range(topic.partitions)]
            target_tps = sorted(tp for tp in target_bounds if tp.topic == topic.target)
            if topic.method == IN_ORDER:
                for partition in sorted({p for p in range(topic.partitions)} | {tp.partition for tp in target_tps}):
                    rows.append(self._in_order_row(topic, partition, source_bounds, target_bounds, unfinished, sample))
                continue
            cut = [f"{t.topic}-{t.partition}" for t in (*source_tps, *target_tps) if t in unfinished]
            if cut or sample:
                outcome = compare.Outcome()  # a multiset read in part says nothing of the rest
                outcome.not_compared.append("not read to the end on both sides: not compared")
            elif topic.method == LATEST_BY_KEY:
                outcome = self._latest.get(topic.target, compare.LatestByKey()).finish()
            else:
                outcome = self._multisets.get(topic.target, compare.Multiset()).finish()
            if self._strays.get(topic.name):
                outcome.not_compared.append(f"{self._strays[topic.name]} records the handler sent to other topics "
                                            f"than {topic.target}: not compared")
            rows.append(Row(topic.name, None, topic.target, topic.method,
                            [(tp.partition, *source_bounds[tp]) for tp in source_tps],
                            [(tp.partition, *target_bounds[tp]) for tp in target_tps],
                            sum(self._counts.get((0, tp), 0) for tp in source_tps),
                            sum(self._counts.get((1, tp), 0) for tp in target_tps), outcome=outcome, unfinished=cut))
        return rows

    def _in_order_row(self, topic: _Topic, partition: int, source_bounds, target_bounds, unfinished,
                      sample: Optional[int]) -> Row:
        tp, remote = TopicPartition(topic.name, partition), TopicPartition(topic.target, partition)
        source = self._sequences.get((0, tp), Fingerprints())
        target = self._sequences.get((1, remote), Fingerprints())
        cut = [side for side, t, read in ((0, tp, source), (1, remote, target))
               if t in unfinished or (sample is not None and len(read) >= sample)]
        compared_source, compared_target = source, target
        if cut:  # as far as the sides read only in part were read
            limit = min(len(source if side == 0 else target) for side in cut)
            compared_source, compared_target = source.prefix(limit), target.prefix(limit)
        low = source_bounds[tp][0] if tp in source_bounds else 0
        target_low, target_end = target_bounds.get(remote, (0, 0))
        outcome = compare.in_order(compared_source, compared_target, source_trimmed=low > 0,
                                   target_trimmed=target_low > 0)
        if cut and sample is not None and not any(t in unfinished for t in (tp, remote)):
            outcome.not_compared.append(f"records after the first {sample} not compared (--sample)")
        return Row(topic.name, partition, topic.target, topic.method,
                   [(partition, *source_bounds[tp])] if tp in source_bounds else [],
                   [(partition, target_low, target_end)] if remote in target_bounds else [],
                   len(source), len(target), source.digest(), target.digest(), outcome,
                   [f"{t.topic}-{t.partition}" for t in (tp, remote) if t in unfinished],
                   (source, target, target_end))
