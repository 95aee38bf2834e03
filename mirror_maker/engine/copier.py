"""The hot path: consumed records through the handler to a producer, for every mode.

Record mode, exactly-once and raw mode's record path all hand records over here, so naming (the
replication policy), refusal handling (a full queue waits, a record the producer rejects is a
send failure), byte counts and the stop during a send are the same for each of them.

Records come in runs of one partition; per record there is only what the copy needs, the rest
(the pending offset, counts, bytes, ages) is done once per run by the stream. A run holds only
records already handed to the producer: a stop that interrupts a send ends the batch there, and
what was not queued is not committed.
"""

from __future__ import annotations

import logging
from itertools import groupby
from typing import Callable, List, Optional

import confluent_kafka
from confluent_kafka import KafkaError, KafkaException

from ..callbacks import client_callback
from ..clients.producer import _PURGED, SendInterrupted
from ..errors import HandlerFailed, MirrorFailure
from ..handlers import DefaultMessageHandler, PartitionPreservingHandler
from ..records import ConsumerRecord, TopicPartition

log = logging.getLogger("mirror_maker.worker")

_NO_TIMESTAMP = confluent_kafka.TIMESTAMP_NOT_AVAILABLE
_UNASSIGNED = -1  # librdkafka's RD_KAFKA_PARTITION_UA: the partitioner chooses
_TOPIC_OF = confluent_kafka.Message.topic
_PARTITION_OF = confluent_kafka.Message.partition

#: A run: (topic, partition, first message, last message, records, value bytes, records written).
#: Records written is records for the target (0: none of the run's were written, as with a
#: filtering handler; more than records with one that sends several for one).
Run = tuple


def _contiguous_runs(topic: str, partition: int, sent: List) -> List[Run]:
    """``sent`` (one partition's records, each written once) as runs without gaps in their
    source offsets, so that an offset sync can place every record of each (a compacted or
    transactional source leaves gaps); one comparison when there is none."""
    # len(message) is its value's length (0 for none).
    if sent[-1].offset() - sent[0].offset() + 1 == len(sent):
        return [(topic, partition, sent[0], sent[-1], len(sent), sum(map(len, sent)), len(sent))]
    runs, start = [], 0
    for at in range(1, len(sent) + 1):
        if at == len(sent) or sent[at].offset() != sent[at - 1].offset() + 1:
            piece = sent[start:at]
            runs.append((topic, partition, piece[0], piece[-1], len(piece), sum(map(len, piece)), len(piece)))
            start = at
    return runs


def _index(run: List, msg) -> int:
    """Where ``msg`` is in ``run``, by identity: Messages compare equal by their fields, and two
    consumer errors of one partition can be equal."""
    return next(i for i, each in enumerate(run) if each is msg)


class Tracker:
    """Records sent one by one, each with its own delivery callback, so that a refused record
    is known by its source offset (exactly-once after a refusal: the transaction is mirrored
    again without it). ``refused`` holds the (partition, offset) pairs to skip from now on.

    A delivery error that says the transaction failed rather than the record (an epoch bump, a
    fence, a timeout: ``failed_the_transaction``) is no refusal: it goes to
    ``on_transaction_failed``, the transaction aborts and the record is mirrored again. Taken for
    a refusal, it was skipped for good with --abort.on.send.failure false."""

    def __init__(self, on_refused: Callable[[TopicPartition, int, str, str], None],
                 failed_the_transaction: Callable[[KafkaError], bool] = lambda err: False,
                 on_transaction_failed: Callable[..., None] = lambda tp, offset, topic, err: None) -> None:
        self.refused = set()
        self._on_refused = on_refused
        self._failed_the_transaction = failed_the_transaction
        self._on_transaction_failed = on_transaction_failed

    def callback(self, tp: TopicPartition, offset: int, topic: str):
        @client_callback
        def delivered(err, _msg) -> None:
            if err is None or err.code() in _PURGED:
                return
            if self._failed_the_transaction(err):
                self._on_transaction_failed(tp, offset, topic, err)
            else:
                self.refuse(tp, offset, topic, err.str())
        return delivered

    def refuse(self, tp: TopicPartition, offset: int, topic: str, reason: str) -> None:
        if (tp, offset) not in self.refused:
            self.refused.add((tp, offset))
            self._on_refused(tp, offset, topic, reason)


class RecordCopier:
    """Copies consumed records to ``producer`` (a MirrorProducer or one of its kind)."""

    def __init__(self, handler, producer, remote: Callable[[str], str], state, metrics,
                 sync_send: bool = False, on_error: Optional[Callable] = None) -> None:
        self._handler = handler
        self.producer = producer
        self._remote = remote
        self._state = state
        self._metrics = metrics
        self._sync = sync_send
        self._on_error = on_error
        #: The built-in handlers need no record objects: the copy is inline (the fast path).
        self._keep_partition = (handler.keep_partition
                                if type(handler) in (DefaultMessageHandler, PartitionPreservingHandler) else None)

    def copy(self, messages: List, route: Optional[Callable[[int], Optional[str]]] = None,
             tracker: Optional[Tracker] = None) -> List[Run]:
        """Hand ``messages`` to the producer; the runs handed over. ``route``: the target topic of
        a record by its offset, the record kept as it is (raw mode's record path: a raw handler
        decides per batch, None drops the batch); ``tracker``: one delivery callback per record."""
        runs: List[Run] = []
        try:
            if self._keep_partition is not None and route is None and tracker is None and not self._sync:
                self._copy_inline(messages, runs)
            else:
                self._copy_each(messages, runs, route, tracker)
        except SendInterrupted as interrupted:
            log.info("Stopping while the producer's queue is full: records from %s on are not committed "
                     "and are mirrored again on restart", interrupted)
        return runs

    def _copy_inline(self, messages: List, runs: List[Run]) -> None:
        """The default handlers: each record as it is, to the same topic (as the replication policy
        names it) and, with PartitionPreservingHandler, partition.

        The batch is cut into runs by C-level grouping, so that per record there is only what a
        bare consume -> produce loop does (its accessors and one produce call); what a run needs
        (its ends, records, bytes) is read once per run."""
        before, refused = len(runs), 0
        try:
            for _topic, by_topic in groupby(messages, _TOPIC_OF):
                for _partition, group in groupby(by_topic, _PARTITION_OF):
                    refused += self._copy_run(list(group), runs)
                    if self._state.failure is not None:
                        return  # nothing is committed once the run failed (another thread may fail it)
        finally:  # also when a stop interrupted a send: the runs so far were handed over
            self.producer.count_produced(sum(run[4] for run in runs[before:]) + refused)

    def _copy_run(self, run: List, runs: List[Run]) -> int:
        """One partition's records, inline; the records handed over become a run (a refusal that
        failed the mirror, or a stop during a send, ends it before that record). Returns 1 when
        a refused record ended it: handed over (the producer counts it), but in no run."""
        producer = self.producer
        produce = producer.produce
        first = run[0]
        topic, partition = first.topic(), first.partition()
        target = self._remote(topic) if topic is not None else None
        target_partition = partition if self._keep_partition else _UNASSIGNED
        handed, errors, refused = len(run), False, 0
        msg = first
        try:
            for msg in run:
                if msg.error() is not None:
                    errors = True
                    self._error(msg)
                    continue
                timestamp = msg.timestamp()[1]  # -1 when the record has none: 0 lets the producer stamp it
                try:
                    produce(target, msg.value(), msg.key(), target_partition, None, None,
                            timestamp if timestamp > 0 else 0, msg.headers())
                except (BufferError, KafkaException) as exc:
                    producer.refused(exc, target, msg.value(), msg.key(), target_partition,
                                     timestamp if timestamp > 0 else 0, msg.headers(), topic, partition, msg.offset())
                    if self._state.failure is not None:
                        handed, refused = _index(run, msg), 1
                        break
        except BaseException:  # a stop during a send, or a consumer error that ends the run
            handed = _index(run, msg)
            raise
        finally:
            sent = run[:handed]
            if errors:
                sent = [m for m in sent if m.error() is None]
            if sent:
                runs += _contiguous_runs(topic, partition, sent)
        return refused

    def _copy_each(self, messages: List, runs: List[Run], route, tracker: Optional[Tracker]) -> None:
        """Any other case, one record at a time: a user's handler, producer.type=sync, raw mode's
        record path (``route``) or tracked records; every send guarded as in the inline copy.

        A run ends at a gap in the source offsets (``_contiguous_runs``), where records start or
        stop being written (filtered, refused, dropped), and
        where a handler starts or stops sending more than one record for each: offset syncs pair
        a run's first and last source offsets with target offsets, and a record the target does
        not hold must never be one of them, or a group translated past it would skip the record
        after it (nor the last output of a record sent several times: its others would be skipped)."""
        state = self._state
        run: Optional[list] = None  # a Run being built
        filtered = produced = 0
        try:
            for msg in messages:
                if msg.error() is not None:
                    self._error(msg)
                    continue
                topic, partition = msg.topic(), msg.partition()
                offset = msg.offset()
                refused = tracker is not None and (TopicPartition(topic, partition), offset) in tracker.refused
                if refused:
                    sent = 0  # refused before: counted as dropped then, skipped now
                elif route is not None:
                    target = route(offset)
                    sent = 0 if target is None else self._send(msg, target, partition, topic, partition, offset, tracker)
                else:
                    sent = self._handled(msg, topic, partition, offset, tracker)
                if not sent and not (tracker is not None and (TopicPartition(topic, partition), offset) in tracker.refused):
                    filtered += 1  # (a record refused now or before is counted as dropped instead)
                produced += sent
                if state.failure is not None:
                    break  # nothing is committed past a failure; this record is not counted
                if run is None or (run[0], run[1]) != (topic, partition) or min(run[7], 2) != min(sent, 2) \
                        or offset != run[3].offset() + 1:
                    if run is not None:
                        runs.append(tuple(run[:7]))
                    run = [topic, partition, msg, msg, 0, 0, 0, sent]
                run[3] = msg
                run[4] += 1
                run[6] += sent
                value = msg.value()
                if value is not None:
                    run[5] += len(value)
        finally:
            if run is not None:
                runs.append(tuple(run[:7]))
            if filtered:
                self._metrics.filtered(filtered)
            self.producer.count_produced(produced)

    def _handled(self, msg, topic: str, partition: int, offset: int, tracker: Optional[Tracker]) -> int:
        """The record through the handler; how many records it sent (0: filtered)."""
        if self._keep_partition is not None:  # a built-in handler: no record objects
            return self._send(msg, self._remote(topic), partition if self._keep_partition else _UNASSIGNED,
                              topic, partition, offset, tracker)
        ts_type, ts = msg.timestamp()
        record = ConsumerRecord(topic, partition, offset, None if ts_type == _NO_TIMESTAMP or ts < 0 else ts,
                                msg.key(), msg.value(), msg.headers() or [])
        try:
            outputs = self._handler.handle(record) or ()
            sent = 0
            for out in outputs:
                sent += self._deliver(self._remote(out.topic), out.value, out.key,
                                      _UNASSIGNED if out.partition is None else out.partition, out.timestamp or 0,
                                      out.headers, topic, partition, offset, tracker)
            return sent
        except (MirrorFailure, SendInterrupted):
            raise
        except Exception as exc:
            log.debug("handler failure", exc_info=True)
            raise HandlerFailed(f"message handler raised on {topic}-{partition} offset {offset}: "
                                f"{type(exc).__name__}: {exc}") from None

    def _send(self, msg, target: str, target_partition: int, topic: str, partition: int, offset: int,
              tracker: Optional[Tracker]) -> int:
        """One record as it is (its key, value, headers and timestamp) to ``target``."""
        timestamp = msg.timestamp()[1]
        return self._deliver(target, msg.value(), msg.key(), target_partition, timestamp if timestamp > 0 else 0,
                             msg.headers(), topic, partition, offset, tracker)

    def _deliver(self, target, value, key, target_partition, timestamp, headers, topic, partition, offset,
                 tracker: Optional[Tracker]) -> int:
        """Hand one record to the producer (1: one record handed over, as the producer counts it
        even when it rejects it locally; a tracked record's rejection reaches its tracker)."""
        if tracker is None:
            self.producer.send(target, value, key, target_partition, timestamp, headers, topic, partition, offset)
            return 1
        callback = tracker.callback(TopicPartition(topic, partition), offset, target)
        try:
            # In ``callback``'s place: given as None there, confluent-kafka ignores ``on_delivery``.
            self.producer.produce(target, value, key, target_partition, callback, None, timestamp, headers)
        except (BufferError, KafkaException) as exc:
            self.producer.refused(exc, target, value, key, target_partition, timestamp, headers, topic, partition,
                                  offset, on_delivery=callback)
        return 1

    def _error(self, msg) -> None:
        if msg.error().code() == KafkaError._PARTITION_EOF:
            return
        if self._on_error is None:
            log.warning("Consumer error: %s", msg.error().str())
        else:
            self._on_error(msg)
