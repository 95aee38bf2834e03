"""Exactly-once's parts (``--exactly.once``): a static shard of the source partitions, its own
transactional producer, and its offsets committed on the target inside each transaction.

Fencing across two clusters. The target's group coordinator cannot check the source group's
generation, so partitions are not handed out by the source group: stream n of ``--num.streams``
N owns the partitions whose stable hash is n mod N (``ShardMembership``), and its
transactional.id is ``<offsets group>.eos.<n>``. Whoever runs shard n (this stream after a
restart, the same stream number in a second process, a Spark task that replaced a lost one)
calls init_transactions with that id first, which aborts the predecessor's open transaction and
fences it. A process also fences every shard of its group numbered N or more that the target
knows (a process still running an older, larger ``--num.streams``), and the last writer of a
partition it takes over when that writer is no shard of the current layout: at any time one
writer per partition can commit.

Every commit interval (or ``MAX_TRANSACTION_RECORDS``) one transaction commits the records
mirrored since the last one together with the source offsets, into a memberless group on the
target. A partition resumes at the offset committed on the target; when the target has none but
the source group has one (a mirror that ran at-least-once before), that one is used once, with a
line saying so; otherwise ``auto.offset.reset`` (the stream's ``StartPositions``). A failed
transaction is aborted and the stream goes back to its last commit (``Stream.rewind``): with
``--abort.on.send.failure true`` a refused record then stops the mirror (255); with ``false``
the range is mirrored again one record at a time (``copier.Tracker``), the refused records are
counted and skipped, and the rest is committed exactly once.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Callable, Dict, List, Optional, Set

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from ..callbacks import client_callback
from ..clients.producer import _PURGED, MirrorProducer, _where
from ..clients.committed import read_committed_offsets
from ..errors import ClientFailed, SendFailed
from ..offsets.transactional import (CALL_GRACE_S, ProducerUnusable, TargetOffsets, TransactionStuck, bounded,
                                     close_unused, fence, shard_number, transactional_id)
from ..records import TopicPartition
from .copier import Tracker
from .positions import COMMITTED_TIMEOUT_S

log = logging.getLogger("mirror_maker.worker")

#: Errors that say the transaction failed, not the record: the producer's state or a fatal error
#: (produce() raises them once a record before was refused), a fence or the coordinator's epoch
#: bump, or a target that did not answer in time. The record goes again after the abort.
_TRANSACTION_FAILED = frozenset({
    KafkaError._STATE, KafkaError._FATAL, KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
    KafkaError.INVALID_PRODUCER_EPOCH, KafkaError.INVALID_TXN_STATE, KafkaError.UNKNOWN_PRODUCER_ID,
    KafkaError.OUT_OF_ORDER_SEQUENCE_NUMBER, KafkaError.INVALID_PRODUCER_ID_MAPPING,
    KafkaError.TRANSACTION_COORDINATOR_FENCED, KafkaError._MSG_TIMED_OUT, KafkaError._TIMED_OUT,
    KafkaError._TIMED_OUT_QUEUE,
})


def failed_the_transaction(error: KafkaError) -> bool:
    """Whether ``error`` (of produce() or of a delivery) is the transaction's, not the record's."""
    return error.code() in _TRANSACTION_FAILED or error.fatal() or error.txn_requires_abort()


def _send_failure(where: str, topic, reason: str) -> str:
    """The line of a record the transaction could not send (Kafka's words, as record mode's)."""
    return f"Error when sending message from {where} to topic {topic}: {reason}"


#: A transaction also commits once it holds this many records (besides the commit interval).
MAX_TRANSACTION_RECORDS = 500_000
INIT_TRANSACTIONS_TIMEOUT_S = 60.0
#: An init_transactions still waiting after this is announced (it is milliseconds, or seconds while
#: the coordinator aborts what the id left open after an outage).
INIT_SLOW_S = 10.0
#: A new producer's start after one became unusable is tried again after this, doubling up to
#: the most, and a failure logged at most this often.
RENEW_RETRY_S = 0.5
RENEW_RETRY_MAX_S = 5.0
RENEW_LOG_EVERY_S = 30.0
LIST_TIMEOUT_MS = 10000


class TransactionalProducer(MirrorProducer):
    """The stream's own producer, transactional: a record the target refuses does not stop the
    run by itself; it makes the transaction abort (the committer raises TransactionAborted)."""

    def __init__(self, conf, *args, **kwargs) -> None:
        self._transactional_id = conf["transactional.id"]
        self.failures: List[str] = []
        #: A fatal error librdkafka raised (a fence, or the coordinator's epoch bump): the
        #: committer decides what it means, at the next commit.
        self.fatal = None
        self._committed = 0  # records of committed transactions: what "mirrored" counts
        self._transaction_start = 0
        super().__init__(conf, *args, **kwargs)

    def acknowledged(self) -> int:
        return self._committed

    def in_transaction(self) -> int:
        return self._produced - self._transaction_start

    def transaction_ended(self, committed: bool) -> None:
        with self._count_lock:
            if committed:
                self._committed += self._produced - self._transaction_start
            self._transaction_start = self._produced

    @client_callback
    def _on_delivery(self, err, msg) -> None:
        if err is not None and err.code() in _PURGED:
            # An aborted transaction's records: the transaction, not the flush, decides what
            # becomes visible, and they are mirrored again from the last commit.
            with self._count_lock:
                self._failed += 1
            return
        super()._on_delivery(err, msg)

    def _fatal(self, exc: KafkaException) -> None:
        self.fatal = exc.args[0]

    def _send_failed(self, where: str, topic, key, value, reason: str) -> None:
        self.failures.append(_send_failure(where, topic, reason))

    def _not_taken(self, where: str, topic, key, value, error: KafkaError, on_delivery=None) -> None:
        """A record produce() would not take because the transaction failed (a record before it
        was refused, an epoch bump), not for what the record is: the transaction aborts and the
        record goes again, never counted as refused (a tracked one was then skipped for good)."""
        if failed_the_transaction(error):
            self._not_queued()
            self.transaction_failed(where, topic, error)
            return
        super()._not_taken(where, topic, key, value, error, on_delivery)

    def transaction_failed(self, where: str, topic, error: KafkaError) -> None:
        """The record from ``where`` failed with its transaction: the transaction aborts."""
        self._send_failed(where, topic, None, None, f"{error.str()} (the transaction failed)")

    def _stop_waiting(self) -> bool:
        # librdkafka holds a failed transaction's queued records back until it is aborted.
        return bool(self.failures) or self.fatal is not None

    def carry_over(self, old: "TransactionalProducer") -> None:
        """Count what the producer this one replaces had committed (a counter never goes down)."""
        with self._count_lock:
            self._committed += old.acknowledged()

    def abandon(self) -> None:
        """Drop what is queued: this producer is not used again (a new one took its place). It is
        not closed: Producer.close() aborts the open transaction first, and an abort that must
        bump the epoch (records purged in flight) fences a newer producer's open transaction
        (the coordinator checks the producer id, not the epoch, of an InitProducerId there)."""
        self.purge()
        try:
            self._producer.flush(0)
        except Exception as exc:  # a producer whose call hung may answer nothing any more
            log.debug("abandoning a transactional producer: %s", exc)


class TransactionalSink:
    """The sink of an exactly-once stream: its transactional producer, what the target refused
    in the open transaction, (after a refusal, with abort false) the one-by-one tracking, and a
    new producer in place of one that became unusable (``renew``: a new one's start is retried
    until the target answers)."""

    def __init__(self, producer: TransactionalProducer, metrics, stream_log, state, start_new, on_new,
                 abort_on_send_failure: bool = True) -> None:
        self.producer = producer
        self._abort = abort_on_send_failure
        self._metrics = metrics
        self._log = stream_log
        self._state = state
        self._start_new = start_new
        self._on_new = on_new
        #: Records sent one by one until a transaction commits (after a refusal, abort false).
        self.tracker: Optional[Tracker] = None

    @property
    def refusals(self) -> List[str]:
        return self.producer.failures

    @property
    def fatal(self):
        return self.producer.fatal

    @property
    def tracking(self) -> bool:
        return self.tracker is not None

    def flush(self, deadline=None) -> bool:
        return self.producer.flush(deadline)

    def serve(self) -> None:
        self.producer.serve()

    def acknowledged(self) -> int:
        return self.producer.acknowledged()

    def delivered(self) -> int:
        return self.producer.delivered()

    def waiting(self) -> int:
        return len(self.producer)

    def needs_commit(self) -> bool:
        """A refused record or a fatal error dooms the open transaction: end it now rather than at
        the interval."""
        producer = self.producer
        return bool(producer.failures) or producer.fatal is not None or producer.in_transaction() >= MAX_TRANSACTION_RECORDS

    def joins_commit(self) -> bool:
        return False  # its producer is the stream's own

    def transaction_ended(self, committed: bool) -> None:
        self.producer.transaction_ended(committed)
        if committed:
            self.tracker = None

    def rolled_back(self, aborted) -> List[str]:
        """The refusals that aborted the transaction; a producer that cannot go on is replaced
        first (its refusals, if any, are met again when its records are mirrored again)."""
        refused = list(self.producer.failures)
        self.producer.failures.clear()
        if isinstance(aborted, ProducerUnusable):
            self.renew(str(aborted), aborted.settle)
            return []
        return refused

    def renew(self, reason: str, settle: Optional[Callable[[], None]] = None) -> None:
        """A new producer under the same transactional.id (its start fences the old one and aborts
        what it left open), tried again until the target answers or a stop; ``settle`` first
        ends what the old one still has going on."""
        self._log.warning("%s: going on from the last commit with a new producer under the same transactional.id",
                          reason)
        old = self.producer
        old.abandon()
        if settle is not None:
            settle()
        delay, last_log = RENEW_RETRY_S, 0.0
        while not self._state.stopping:
            try:
                new = self._start_new()
            except ClientFailed as exc:  # the target away: its start is tried again
                if time.monotonic() - last_log >= RENEW_LOG_EVERY_S:
                    last_log = time.monotonic()
                    self._log.warning("%s; trying again", exc)
                self._state.wait(delay)
                delay = min(delay * 2, RENEW_RETRY_MAX_S)
                continue
            self.producer = new
            new.carry_over(old)
            try:
                self._on_new(new)  # its first transaction: a fence of the new one stops the stream
            except ProducerUnusable as exc:  # (the coordinator aborted again, or a call hung)
                new.abandon()
                self._log.warning("%s; trying again with another new producer", exc)
                old = new
                self._state.wait(delay)
                delay = min(delay * 2, RENEW_RETRY_MAX_S)
                continue
            except BaseException:
                new.abandon()
                raise
            self._log.info("New transactional producer started")
            return

    def track(self) -> None:
        if self.tracker is None:
            self.tracker = Tracker(self._refused, failed_the_transaction, self._transaction_failed)

    def _transaction_failed(self, tp: TopicPartition, offset: int, topic: str, error: KafkaError) -> None:
        """A tracked record failed with its transaction (told to the producer now in use)."""
        self.producer.transaction_failed(_where(tp.topic, tp.partition, offset), topic, error)

    def _refused(self, tp: TopicPartition, offset: int, topic: str, reason: str) -> None:
        """A tracked record the target refused, known by its source offset: the mirror stops
        (abort on send failure, nothing committed past it), or it is counted and skipped."""
        # The transaction holds its queued records back until it is aborted: no flush waits.
        self.producer.failures.append(reason)
        self._metrics.dropped_many(1)
        text = _send_failure(_where(tp.topic, tp.partition, offset), topic, reason)
        if self._abort:
            self._state.fail(SendFailed(text))
        else:
            self._log.error("%s (dropped; --abort.on.send.failure is false)", text)

    def close(self, deadline) -> None:
        self.producer.close(deadline)


class TargetStarts:
    """Where an exactly-once stream's partitions resume: the offsets committed on the target
    (after fencing a last writer outside the current layout); else, once, the source group's
    (a mirror that ran at-least-once before)."""

    def __init__(self, stream, target: TargetOffsets, producer_conf: Dict[str, str], consumer, group: str,
                 shards: int, own_id: str) -> None:
        self._stream = stream
        self._target = target
        self._producer_conf = producer_conf
        self._consumer = consumer
        self._group = group
        self._shards = shards
        self._own_id = own_id
        self._fenced: Set[str] = set()

    def __call__(self, tps: List[TopicPartition]) -> Dict[TopicPartition, int]:
        self._fence_last_writers(self._target.committed(tps, stable=False))
        committed = self._target.committed(tps)  # nothing pending from a writer fenced above
        positions = {tp: c.offset for tp, c in committed.items()}
        missing = [tp for tp in tps if tp not in positions]
        if missing:
            source = read_committed_offsets(self._consumer,
                                            [KafkaTopicPartition(tp.topic, tp.partition) for tp in missing],
                                            COMMITTED_TIMEOUT_S)
            for tp in source:
                if tp.offset >= 0:
                    positions[TopicPartition(tp.topic, tp.partition)] = tp.offset
                    self._stream.log.info("Starting %s-%d at the source group's committed offset %d (the target has "
                                          "none yet: migrating from at-least-once)", tp.topic, tp.partition, tp.offset)
        return positions

    def _fence_last_writers(self, committed) -> None:
        """A partition whose last writer is no shard of the current layout (``--num.streams``
        changed) moved to this shard: fence that writer before reading the partition. A writer
        that is a shard of the current layout is fenced by that shard's own start."""
        for tp, entry in sorted(committed.items()):
            writer = entry.writer
            if not writer or writer == self._own_id or writer in self._fenced:
                continue
            number = shard_number(self._group, writer)
            if number is not None and number < self._shards:
                continue
            fence(self._producer_conf, writer)
            self._fenced.add(writer)
            self._stream.log.info("Fenced %s, the last writer of %s-%d (the shards changed: --num.streams is now %d)",
                                  writer, tp.topic, tp.partition, self._shards)


class StreamsReady:
    """Every exactly-once stream of this process has fenced its transactional.id's predecessor
    (a stream fences a partition's last writer only if no stream of this process will)."""

    def __init__(self, streams: int) -> None:
        self._left = streams
        self._lock = threading.Lock()
        self._all = threading.Event()

    def arrive(self) -> None:
        with self._lock:
            self._left -= 1
            if self._left <= 0:
                self._all.set()

    def wait(self, state) -> bool:
        while not self._all.wait(0.1):
            if state.stopping:
                return False
        return True


def fence_larger_layouts(producer_conf: Dict[str, str], group: str, shards: int) -> None:
    """Fence every shard of ``group`` numbered ``shards`` or more that the target's transaction
    coordinators know: a process still running with a larger ``--num.streams`` would otherwise
    go on writing partitions (an idle or a new one) that now belong to a shard of this layout.
    Needs ListTransactions (Kafka 3.0+, KIP-664); without it only last writers are fenced."""
    try:
        admin = _target_admin(producer_conf, f"{group}-eos-fencing")
    except Exception as exc:  # kafka-python missing, or the target away: the shards' own starts still fence
        log.warning("Cannot list the target's transactional ids (%s: %s); shards of an earlier, larger "
                    "--num.streams are fenced only where they were a partition's last writer", type(exc).__name__, exc)
        return
    try:
        listings = [txn for per_broker in admin.list_transactions().values() for txn in per_broker]
    except Exception as exc:
        log.warning("Cannot list the target's transactional ids (%s: %s); shards of an earlier, larger "
                    "--num.streams are fenced only where they were a partition's last writer", type(exc).__name__, exc)
        return
    finally:
        admin.close()
    larger = sorted({txn.transactional_id for txn in listings
                     if (shard_number(group, txn.transactional_id) or 0) >= shards})
    for writer in larger:
        fence(producer_conf, writer)
        log.info("Fenced %s, a shard of an earlier layout (--num.streams is now %d)", writer, shards)


def transactional_conf(config, index: int) -> Dict[str, str]:
    """The stream's transactional producer settings."""
    conf = {**config.producer, "transactional.id": transactional_id(config.exactly_once_group, index),
            "client.id": f"producer-eos-{index}"}
    conf.setdefault("transaction.timeout.ms", str(config.transaction_timeout_ms))
    # librdkafka re-bootstraps once every target broker is unreachable, which replaces its broker
    # handles; send_offsets_to_transaction then waited on the group coordinator's old handle for
    # ever, past its timeout (https://github.com/confluentinc/librdkafka/issues/5456, /5511).
    conf.setdefault("metadata.recovery.strategy", "none")
    # send_offsets_to_transaction (AddOffsetsToTxn) and the commit (EndTxn) are refused while the
    # coordinator still writes the step before (CONCURRENT_TRANSACTIONS), and retried after
    # retry.backoff.ms, doubling up to 1 s; librdkafka retries AddPartitionsToTxn after 20 ms
    # already. The shorter backoff also shortens produce retries: not where `retries` is finite,
    # which it would run out sooner.
    if not any(key in conf for key in ("retries", "message.send.max.retries")):
        conf.setdefault("retry.backoff.ms", "20")
    # librdkafka: a record's delivery timeout must fit in its transaction's.
    conf["message.timeout.ms"] = str(min(int(conf["message.timeout.ms"]), int(conf["transaction.timeout.ms"])))
    return conf


def start_producer(config, index: int, state, metrics, errors) -> TransactionalProducer:
    """The stream's transactional producer, with its predecessor fenced (init_transactions)."""
    conf = transactional_conf(config, index)
    producer = TransactionalProducer(conf, state, False, False, config.max_block_ms, metrics, errors=errors)

    def slow(waited_s: float) -> None:
        log.warning("mirrormaker-thread-%d: the target's transaction coordinator has not started %s after %.0f s "
                    "(it finishes what the transactional.id left open first); waiting up to %.0f s", index,
                    conf["transactional.id"], waited_s, INIT_TRANSACTIONS_TIMEOUT_S)

    try:
        bounded(producer._producer.init_transactions, (INIT_TRANSACTIONS_TIMEOUT_S,),
                INIT_TRANSACTIONS_TIMEOUT_S + CALL_GRACE_S, "init_transactions", INIT_SLOW_S, slow)
    except (KafkaException, TransactionStuck) as exc:
        # No transaction to abort yet: closing ends the start it would go on with (``close_unused``).
        producer.abandon()
        close_unused(producer._producer, conf["transactional.id"])
        reason = exc.args[0].str() if isinstance(exc, KafkaException) else str(exc)
        raise ClientFailed(f"mirrormaker-thread-{index}: cannot start its transactional producer "
                           f"{conf['transactional.id']}: {reason}") from None
    return producer


def transaction_states(producer_conf: Dict[str, str]):
    """What the target's transaction coordinators say of a transactional.id: its state
    ("CompleteAbort", "Empty", ...), or None when it cannot be asked (DescribeTransactions: Kafka
    3.0+, kafka-python)."""
    def state_of(transactional_id: str) -> Optional[str]:
        try:
            admin = _target_admin(producer_conf, f"{transactional_id}-describe")
        except Exception as exc:
            log.warning("Cannot ask the target about %s (%s: %s)", transactional_id, type(exc).__name__, exc)
            return None
        try:
            described = admin.describe_transactions([transactional_id]).get(transactional_id)
            return None if described is None else str(described.state.value)
        except Exception as exc:
            log.warning("Cannot ask the target about %s (%s: %s)", transactional_id, type(exc).__name__, exc)
            return None
        finally:
            admin.close()
    return state_of


def _target_admin(producer_conf: Dict[str, str], client_id: str):
    """kafka-python's admin client on the target (for the transaction APIs confluent-kafka lacks)."""
    from kafka.admin import KafkaAdminClient

    from ..shallow.connections import net_configs

    configs = {key: value for key, value in net_configs(producer_conf, client_id).items()
               if key in KafkaAdminClient.DEFAULT_CONFIG}
    configs.update(bootstrap_timeout_ms=LIST_TIMEOUT_MS, request_timeout_ms=LIST_TIMEOUT_MS)
    return KafkaAdminClient(**configs)
