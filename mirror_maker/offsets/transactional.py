"""Exactly-once (``--exactly.once``, KIP-656's idea): the source offsets are committed on the
*target*, inside the transaction that wrote the records, so a read_committed reader of the target
sees every source record once, whatever crashes.

A Kafka transaction cannot span two clusters: the target becomes the source of truth for where
mirroring resumes. The offsets go into a consumer group on the target named after the source
group (``--exactly.once.group`` overrides it), sent with ``send_offsets_to_transaction``. That
group has no members: the group metadata sent with the offsets comes from a consumer handle on the
target that never joins (no member id, generation -1). After each transaction the source group's
offsets are committed too, best effort, so lag monitoring on the source keeps working.
"""

from __future__ import annotations

import logging
import time
import zlib
from typing import Dict, Iterable, List, NamedTuple, Optional

import confluent_kafka
from confluent_kafka import KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from ..clients.retry import commit_retrying
from ..errors import ClientFailed
from ..ops.log import librdkafka_logger
from ..records import TopicPartition

log = logging.getLogger("mirror_maker.checkpoint")

TRANSACTION_TIMEOUT_S = 60.0
_CONSUMER_ONLY = ("acks", "enable.idempotence", "max.in.flight.requests.per.connection", "message.timeout.ms",
                  "partitioner", "queue.buffering.max.kbytes", "delivery.report.only.error", "compression.type",
                  "linger.ms", "batch.size", "batch.num.messages", "message.max.bytes", "transaction.timeout.ms",
                  "statistics.interval.ms", "compression.level", "retries", "queue.buffering.max.messages")


class Committed(NamedTuple):
    offset: int
    #: The transactional.id whose transaction committed it: the partition's last writer.
    writer: Optional[str]


class TransactionAborted(Exception):
    """The transaction was aborted (a refused record, a failed commit): nothing of it is visible,
    and the stream goes back to the offsets last committed on the target."""


class TargetOffsets:
    """The target's record of where mirroring resumes: its offsets group, read and described."""

    def __init__(self, producer_conf: Dict[str, str], group: str, client_id: str) -> None:
        conf = {k: v for k, v in producer_conf.items() if k not in _CONSUMER_ONLY}
        conf.update({"group.id": group, "client.id": client_id, "enable.auto.commit": False,
                     "logger": librdkafka_logger(client_id)})
        self.group = group
        self._conf = conf
        self._consumer = confluent_kafka.Consumer(conf)  # never subscribes: the group stays memberless
        self._peeking = None  # the same, read_uncommitted: see ``committed``

    def group_metadata(self):
        """No member id, generation -1: what a commit into a memberless group carries."""
        return self._consumer.consumer_group_metadata()

    def committed(self, tps: Iterable[TopicPartition], timeout_s: float = 30.0,
                  stable: bool = True) -> Dict[TopicPartition, Committed]:
        """Each partition's committed offset on the target, with the transactional.id that
        committed it (the commit's metadata).

        A stable read waits while a transaction that holds offsets of these partitions is open;
        ``stable=False`` leaves such offsets out instead (read_uncommitted: librdkafka asks with
        require_stable only under read_committed). A new owner reads so first, to learn which
        writers to fence: a writer killed between its offsets and its commit held the stable
        read until its transaction timed out (60 s)."""
        request = [KafkaTopicPartition(tp.topic, tp.partition) for tp in tps]
        if not request:
            return {}
        consumer = self._consumer if stable else self._peek()
        answer = commit_retrying()(consumer.committed, request, timeout=timeout_s)
        return {TopicPartition(tp.topic, tp.partition): Committed(tp.offset, tp.metadata or None)
                for tp in answer if tp.offset >= 0}

    def _peek(self):
        if self._peeking is None:
            self._peeking = confluent_kafka.Consumer({**self._conf, "isolation.level": "read_uncommitted"})
        return self._peeking

    def close(self) -> None:
        self._consumer.close()
        if self._peeking is not None:
            self._peeking.close()


class TransactionalCommitter:
    """The exactly-once committer: offsets into the open transaction, commit it, open the next.

    It takes :class:`~mirror_maker.offsets.committer.OffsetCommitter`'s place in the checkpoint.
    A commit either makes the transaction's records and offsets visible together, or raises
    :class:`TransactionAborted` after aborting it; a fenced producer is fatal.
    """

    def __init__(self, producer, target: TargetOffsets, source_consumer, transactional_id: str) -> None:
        self._producer = producer  # the confluent transactional producer
        self._target = target
        self._source = source_consumer
        self._transactional_id = transactional_id

    def commit(self, offsets: Dict[TopicPartition, int], deadline: Optional[float] = None) -> Dict[TopicPartition, int]:
        # The metadata names the writer, so that a later owner of a partition can fence it.
        request = [KafkaTopicPartition(tp.topic, tp.partition, off, metadata=self._transactional_id)
                   for tp, off in offsets.items()]
        timeout = TRANSACTION_TIMEOUT_S if deadline is None else max(0.5, deadline - time.monotonic())
        try:
            if request:
                self._producer.send_offsets_to_transaction(request, self._target.group_metadata(), timeout)
            self._producer.commit_transaction(timeout)
        except KafkaException as exc:
            self._failed(exc, "commit")
        self.begin()
        if request:
            try:  # for lag monitoring on the source: best effort
                self._source.commit(offsets=request, asynchronous=True)
            except KafkaException as exc:
                log.debug("best-effort commit to the source group failed: %s", exc)
        return dict(offsets)

    def begin(self) -> None:
        try:
            self._producer.begin_transaction()
        except KafkaException as exc:
            self._failed(exc, "begin")

    def abort(self, timeout_s: float = TRANSACTION_TIMEOUT_S) -> None:
        try:
            self._producer.abort_transaction(timeout_s)
        except KafkaException as exc:
            if exc.args[0].fatal():
                raise self.fenced_or_fatal(exc) from None
            log.debug("abort_transaction: %s", exc)

    def _failed(self, exc: KafkaException, what: str) -> None:
        error = exc.args[0]
        if error.fatal():
            raise self.fenced_or_fatal(exc) from None
        if error.txn_requires_abort() or error.retriable():
            self.abort()
            raise TransactionAborted(f"the transaction's {what} failed: {error.str()}") from None
        raise ClientFailed(f"transaction {what} failed: {error.str()}")

    def fenced_or_fatal(self, exc: KafkaException) -> ClientFailed:
        return fenced_or_fatal(exc.args[0], self._transactional_id)


_FENCED_CODES = frozenset({confluent_kafka.KafkaError._FENCED, confluent_kafka.KafkaError.PRODUCER_FENCED,
                           confluent_kafka.KafkaError.INVALID_PRODUCER_EPOCH})


def fenced_or_fatal(error, transactional_id: str) -> ClientFailed:
    """The one line for a transactional producer's fatal error, from the commit or from poll()."""
    if error.code() in _FENCED_CODES:
        return ClientFailed(f"fenced: another mirror with the same group took over transactional.id "
                            f"{transactional_id} (exactly-once shard), so this one stops: {error.str()}")
    return ClientFailed(f"fatal transaction error ({transactional_id}): {error.str()}")


def transactional_id(group: str, shard: int) -> str:
    return f"{group}.eos.{shard}"


def shard_number(group: str, writer: str) -> Optional[int]:
    """The shard a transactional.id of this group belongs to (None: not one of ours)."""
    prefix = transactional_id(group, "")
    suffix = writer[len(prefix):] if writer.startswith(prefix) else ""
    return int(suffix) if suffix.isdigit() else None


def fence(producer_conf: Dict[str, str], transactional_id: str, timeout_s: float = TRANSACTION_TIMEOUT_S) -> None:
    """Fence a transactional.id this process does not run: init_transactions with it aborts its
    open transaction and bumps its epoch, so its holder (if alive) cannot commit again."""
    conf = {k: v for k, v in producer_conf.items() if k != "client.id"}
    conf.update({"transactional.id": transactional_id, "client.id": f"fence-{transactional_id}",
                 "logger": librdkafka_logger(f"fence-{transactional_id}")})
    producer = confluent_kafka.Producer(conf)
    try:
        producer.init_transactions(timeout_s)
    except KafkaException as exc:
        raise ClientFailed(f"cannot fence {transactional_id}, the last writer of partitions this "
                           f"stream now owns: {exc.args[0].str()}") from None
    finally:
        producer.flush(0)


def shard_of(topic: str, partition: int, shards: int) -> int:
    """The exactly-once stream (shard) a source partition belongs to: stable across restarts,
    processes and added topics, so that one transactional.id always covers the same partitions.
    A topic's partitions go round-robin from a point its name picks, so every shard gets its
    share of each topic."""
    return (zlib.crc32(topic.encode()) + partition) % shards


def shard_partitions(partitions: Dict[str, int], shard: int, shards: int) -> List[TopicPartition]:
    """This shard's partitions of the given topics (name -> partition count)."""
    return sorted(TopicPartition(topic, p) for topic, count in partitions.items() for p in range(count)
                  if shard_of(topic, p, shards) == shard)
