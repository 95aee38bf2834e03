"""One exactly-once stream (``--exactly.once``): a static shard of the source partitions, its own
transactional producer, and its offsets committed on the target inside each transaction.

Fencing across two clusters. The target's group coordinator cannot check the source group's
generation, so partitions are not handed out by the source group: stream n of ``--num.streams``
N owns the partitions whose stable hash is n mod N (``shard_of``), and its transactional.id is
``<offsets group>.eos.<n>``. Whoever runs shard n (this stream after a restart, the same stream
number in a second process, a Spark task that replaced a lost one) calls init_transactions with
that id first, which aborts the predecessor's open transaction and fences it: a predecessor that
wakes up (a GC pause, SIGSTOP, a network partition) cannot commit anything again, and stops with
one line. So at any time one writer per shard can commit; partitions never move between shards
unless ``--num.streams`` changes.

Every commit interval (or ``MAX_TRANSACTION_RECORDS``) one transaction commits the records
mirrored since the last one together with the source offsets, into a memberless group on the
target. A partition resumes at the offset committed on the target; when the target has none but
the source group has one (a mirror that ran at-least-once before), that one is used once, with a
line saying so; otherwise ``auto.offset.reset``. A failed transaction is aborted and the shard goes
back to the target's offsets: with ``--abort.on.send.failure true`` the mirror then stops (255);
with ``false`` the range is mirrored again record by record, the refused records are counted and
skipped, and the rest is committed exactly once.
"""

from __future__ import annotations

import functools
import threading
import time
from typing import Dict, List, Optional, Set, Tuple

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from ..clients.polling import poll
from ..clients.producer import _PURGED, MirrorProducer
from ..clients.retry import commit_retrying
from ..errors import SendFailed
from ..offsets.transactional import (TargetOffsets, TransactionAborted, TransactionalCommitter, fence,
                                     fenced_or_fatal, shard_number, shard_partitions, transactional_id)
from ..records import TopicPartition
from .worker import (COMMITTED_TIMEOUT_S, LAG_UPDATE_S, POLL_TIMEOUT_S, MirrorThread, _NO_TIMESTAMP, _UNASSIGNED,
                     _describe)

#: A transaction also commits once it holds this many records (besides the commit interval).
MAX_TRANSACTION_RECORDS = 500_000


class TransactionalProducer(MirrorProducer):
    """The stream's own producer, transactional: a record the target refuses does not stop the
    run by itself; it makes the transaction abort (the committer raises TransactionAborted)."""

    def __init__(self, conf, *args, **kwargs) -> None:
        self._transactional_id = conf["transactional.id"]
        self.failures: List[str] = []
        self._committed = 0  # records of committed transactions: what "mirrored" counts
        self._transaction_start = 0
        super().__init__(conf, *args, **kwargs)

    def acknowledged(self) -> int:
        return self._committed

    def transaction_ended(self, committed: bool) -> None:
        with self._count_lock:
            if committed:
                self._committed += self._produced - self._transaction_start
            self._transaction_start = self._produced

    def _on_delivery(self, err, msg) -> None:
        if err is not None and err.code() in _PURGED:
            # An aborted transaction's records: the transaction, not the flush, decides what
            # becomes visible, and they are mirrored again from the target's offsets.
            with self._count_lock:
                self._failed += 1
            return
        super()._on_delivery(err, msg)

    def _fatal(self, exc: KafkaException) -> None:
        self._state.fail(fenced_or_fatal(exc.args[0], self._transactional_id))

    def _send_failed(self, where: str, topic, key, value, reason: str) -> None:
        self.failures.append(f"Error when sending message from {where} to topic {topic}: {reason}")

    def _stop_waiting(self) -> bool:
        # librdkafka holds a failed transaction's queued records back until it is aborted.
        return bool(self.failures)


class ExactlyOnceThread(MirrorThread):
    def __init__(self, index, config, producer, *args, **kwargs) -> None:
        super().__init__(index, config, producer, *args, **kwargs)
        self._transactional_id = transactional_id(config.exactly_once_group, index)
        self._fenced: Set[str] = set()
        #: Set by the runner: every stream of this process has fenced its predecessor.
        self.streams_ready: Optional[StreamsReady] = None
        self._txp: TransactionalProducer = None
        self._target_offsets: TargetOffsets = None
        self._owned_version = -1
        #: After a refusal (abort false): records tracked one by one until a transaction commits.
        self._tracking = False
        self._refused: Set[Tuple[TopicPartition, int]] = set()
        self._in_transaction = 0
        #: --exit.when.caught.up: every partition was read to its end; commit without waiting.
        self._commit_now = False
        self._incremental = True  # partitions are added and removed one by one

    # -- set-up --------------------------------------------------------------------------

    def run(self) -> None:
        from ..errors import ClientFailed, MirrorFailure

        config = self._config
        try:
            self._target_offsets = TargetOffsets(config.producer, config.exactly_once_group,
                                                 f"{config.exactly_once_group}-offsets-{self.index}")
            producer_conf = {**config.producer, "transactional.id": self._transactional_id,
                             "client.id": f"producer-eos-{self.index}"}
            producer_conf.setdefault("transaction.timeout.ms", str(config.transaction_timeout_ms))
            # librdkafka re-bootstraps once every target broker is unreachable, which replaces its
            # broker handles; send_offsets_to_transaction then waits on the group coordinator's
            # old handle forever, past its timeout (librdkafka #5456, #5511; measured with a 30 s
            # target outage). Without re-bootstrap the handle reconnects and the call completes.
            producer_conf.setdefault("metadata.recovery.strategy", "none")
            # (Every producer connects to all brokers from the start, EAGER_CONNECTIONS: with sparse
            # connections init_transactions also waited for librdkafka's 500 ms coordinator timer
            # in half of the starts, 0.51 s against 0.007 s on Kafka 4.4.)
            # librdkafka: a record's delivery timeout must fit in its transaction's.
            producer_conf["message.timeout.ms"] = str(min(int(producer_conf["message.timeout.ms"]),
                                                          int(producer_conf["transaction.timeout.ms"])))
            self._txp_conf = producer_conf
            self._txp = TransactionalProducer(producer_conf, self._state, False, False, config.max_block_ms,
                                              self._metrics, errors=self._producer.errors)
            self._producer = self._txp
            # Aborts the predecessor's open transaction and fences it (see the module docstring).
            self._txp._producer.init_transactions(60)
            self._log.info("Exactly-once shard %d of %d: transactional.id %s", self.index, config.num_streams,
                           self._transactional_id)
        except MirrorFailure as exc:
            self._state.fail(exc)
            return
        except KafkaException as exc:
            self._state.fail(ClientFailed(f"{self.name}: cannot start its transactional producer "
                                          f"{self._transactional_id}: {exc.args[0].str()}"))
            return
        finally:
            if self.streams_ready is not None:
                self.streams_ready.arrive()
        # A partition's last writer may be a sibling stream's id: it is fenced once all are up.
        if self.streams_ready is not None and not self.streams_ready.wait(self._state):
            return
        super().run()

    def _committer(self):
        committer = TransactionalCommitter(self._txp._producer, self._target_offsets, self._consumer,
                                           self._transactional_id)
        committer.begin()
        self._transactions = committer
        return _FailureAware(committer, self._txp)

    def acknowledged(self) -> int:
        return self._txp.acknowledged() if self._txp is not None else 0

    def waiting(self) -> int:
        return len(self._txp) if self._txp is not None else 0

    # -- the loop ----------------------------------------------------------------------

    def _loop(self) -> None:
        consumer, checkpoint = self._consumer, self._checkpoint
        batch_size = self._config.batch_size
        bounded = self._config.exit_when_caught_up
        while not self._state.stopping:
            self.last_progress = time.monotonic()
            self._follow_shard()
            if not self.assigned:
                self._state.wait(0.2)
                continue
            messages = poll(consumer, batch_size, POLL_TIMEOUT_S)
            if messages:
                self._in_transaction += len(messages)
                if self._tracking:
                    self._copy_tracked(messages)
                else:
                    self._mirror(messages)
            self._txp.serve()
            # A bounded run's records become visible only when their transaction commits: a
            # batch short of batch.size may be the last one, so look at the lag now, before the
            # commit check (waiting for the timer and the next consume took 0.4 s per run).
            if self.last_progress >= self._next_lag_update or (bounded and len(messages) < batch_size):
                self._next_lag_update = self.last_progress + LAG_UPDATE_S
                self.update_lag()
            # A refused record dooms the open transaction: abort it now rather than at the interval.
            if (checkpoint.due() or self._commit_now or self._txp.failures
                    or self._in_transaction >= MAX_TRANSACTION_RECORDS) and not self._state.stopping:
                self._commit_now = False
                self._commit()

    def update_lag(self) -> None:
        """A partition is "at its end" only once its records are committed on the target too:
        a bounded run (``--exit.when.caught.up``) must not stop on records still in an open
        transaction, which may yet abort and be mirrored again. When every partition was read to
        its end, the transaction commits now rather than at the interval."""
        super().update_lag()
        pending = self._checkpoint.pending if self._checkpoint is not None else {}
        if not pending and not self._tracking:
            return
        if self._config.exit_when_caught_up and self.assigned and self.at_end >= self.assigned:
            self._commit_now = True
        for tp in list(self.at_end):
            if tp in pending or self._tracking:
                self.at_end.discard(tp)

    def _commit(self, deadline=None) -> bool:
        try:
            committed = self._checkpoint.commit(deadline=deadline)
        except TransactionAborted as aborted:
            self._aborted(str(aborted))
            return False
        if committed:
            self._txp.transaction_ended(committed=True)
            self._in_transaction = 0
            self._tracking = False
            self._refused.clear()
        return committed

    def _aborted(self, reason: str) -> None:
        """Back to the offsets committed on the target; stop, or track records one by one."""
        failures = list(self._txp.failures)
        self._txp.failures.clear()
        self._txp.transaction_ended(committed=False)
        self._log.warning("Transaction aborted (%s); back to the offsets committed on the target", reason)
        self._rewind()
        if failures and self._config.abort_on_send_failure:
            self._metrics.dropped_many(1)
            self._state.fail(SendFailed(failures[0]))
        elif failures:
            self._tracking = True
        self._transactions.begin()

    def _rewind(self) -> None:
        self._checkpoint.pending.clear()
        self._in_transaction = 0
        positions = self._start_positions(sorted(self.assigned), quiet=True)
        for tp, offset in positions.items():
            self._consumer.seek(KafkaTopicPartition(tp.topic, tp.partition, offset))

    def _finish(self) -> None:
        try:
            if not self._state.failed and self._checkpoint is not None and self._txp is not None:
                self._log.info("Committing the last transaction.")
                self._commit(self._state.deadline)
        finally:
            self._checkpoint = None  # committed above; the base class must not commit again
            super()._finish()
            if self._target_offsets is not None:
                self._target_offsets.close()
            if self._txp is not None:
                self._txp.close(self._state.deadline)

    # -- the shard's partitions ----------------------------------------------------------

    def _follow_shard(self) -> None:
        """Assign this shard's partitions of the matching topics, as topics come and go."""
        version, partitions = self._subscription.partitions()
        if version == self._owned_version:
            return
        self._owned_version = version
        wanted = set(shard_partitions(partitions, self.index, self._config.num_streams))
        gone, new = sorted(self.assigned - wanted), sorted(wanted - self.assigned)
        if gone:
            self._commit(self._state.deadline)  # a transaction holds every partition's offsets
            self._consumer.incremental_unassign([KafkaTopicPartition(tp.topic, tp.partition) for tp in gone])
            self._log.info("Revoked %s", _describe(gone))
            self._forget(gone)
            self._call_listener("on_partitions_revoked", gone)
        if new:
            self._ensure_target_topics(new)
            positions = self._start_positions(new)
            self._consumer.incremental_assign([KafkaTopicPartition(tp.topic, tp.partition, positions[tp])
                                               for tp in new])
            self.assigned.update(new)
            self._start_offsets.update(positions)
            self._log.info("Assigned %s", _describe(new))
            self._metrics.rebalanced("assigned")
            self._call_listener("on_partitions_assigned", new)
        self.rebalanced = True

    def _start_positions(self, tps: List[TopicPartition], quiet: bool = False) -> Dict[TopicPartition, int]:
        """Where each partition resumes: the target's committed offset; else, once, the source
        group's (a mirror that ran at-least-once before); else auto.offset.reset."""
        self._fence_last_writers(self._target_offsets.committed(tps, stable=False))
        committed = self._target_offsets.committed(tps)  # nothing pending from a writer fenced above
        positions = {tp: c.offset for tp, c in committed.items()}
        missing = [tp for tp in tps if tp not in positions]
        if missing:
            source = commit_retrying()(self._consumer.committed,
                                       [KafkaTopicPartition(tp.topic, tp.partition) for tp in missing],
                                       timeout=COMMITTED_TIMEOUT_S)
            for tp in source:
                if tp.offset >= 0:
                    key = TopicPartition(tp.topic, tp.partition)
                    positions[key] = tp.offset
                    self._log.info("Starting %s-%d at the source group's committed offset %d (the target has "
                                   "none yet: migrating from at-least-once)", tp.topic, tp.partition, tp.offset)
        reset = self._config.consumer.get("auto.offset.reset", "latest")
        grown = self._grown_partitions([tp for tp in tps if tp not in positions],
                                       lambda earlier: list(self._target_offsets.committed(earlier)))
        for tp in tps:
            if tp in positions:
                if not quiet:
                    self._log.info("Setting offset for partition %s-%d to the offset committed on the target %d",
                                   tp.topic, tp.partition, positions[tp])
                continue
            low, high = self._consumer.get_watermark_offsets(KafkaTopicPartition(tp.topic, tp.partition),
                                                             timeout=COMMITTED_TIMEOUT_S)
            added = tp in grown
            positions[tp] = low if added or reset in ("earliest", "smallest", "beginning") else high
            self._log.info("Resetting offset for partition %s-%d to position %d (%s)", tp.topic, tp.partition,
                           positions[tp], "a partition added while mirroring: from its start" if added
                           else f"no committed offset; auto.offset.reset={reset}")
        return positions

    def _fence_last_writers(self, committed) -> None:
        """A partition whose last writer is no shard of the current layout (``--num.streams``
        changed) moved to this shard: fence that writer before reading the partition, so that a
        process still running the old layout cannot commit it too. A writer that is a shard of
        the current layout is fenced by that shard's own start."""
        group, shards = self._config.exactly_once_group, self._config.num_streams
        for tp, entry in sorted(committed.items()):
            writer = entry.writer
            if not writer or writer == self._transactional_id or writer in self._fenced:
                continue
            number = shard_number(group, writer)
            if number is not None and number < shards:
                continue
            fence(self._txp_conf, writer)
            self._fenced.add(writer)
            self._log.info("Fenced %s, the last writer of %s-%d (the shards changed: --num.streams is now %d)",
                           writer, tp.topic, tp.partition, shards)

    def _maybe_subscribe(self) -> bool:
        return True  # no group subscription: the shard's partitions are assigned directly

    # -- after a refusal: one record at a time ---------------------------------------------

    def _copy_tracked(self, messages: List) -> None:
        """Produce each record with its own delivery callback, so that a refused record is known
        by its source offset: it is counted, skipped from then on, and the transaction aborted
        and mirrored again without it."""
        runs = []
        run = None
        sent = 0
        for msg in messages:
            if msg.error() is not None:
                if msg.error().code() != KafkaError._PARTITION_EOF:
                    self._consume_error(msg)
                continue
            tp = TopicPartition(msg.topic(), msg.partition())
            if (tp, msg.offset()) not in self._refused:
                outputs = self._outputs(msg, tp)
                for topic, value, key, partition, timestamp, headers in outputs:
                    sent += 1
                    self._txp._producer.produce(topic, value, key, partition, timestamp=timestamp,
                                                headers=headers, on_delivery=functools.partial(
                                                    self._tracked_delivery, tp, msg.offset()))
            if run is None or run[0] != tp:
                run = [tp, msg, msg, 0, 0]
                runs.append(run)
            run[2] = msg
            run[3] += 1
        if self._fast_keep_partition is None:
            self._txp.count_produced(sent)  # else _record counts the records of each run
        self._record([(tp.topic, tp.partition, first, last, count, nbytes) for tp, first, last, count, nbytes in runs])

    def _outputs(self, msg, tp: TopicPartition):
        ts_type, timestamp = msg.timestamp()
        timestamp = 0 if ts_type == _NO_TIMESTAMP or timestamp < 0 else timestamp
        if self._fast_keep_partition is not None:
            return [(tp.topic, msg.value(), msg.key(), tp.partition if self._fast_keep_partition else _UNASSIGNED,
                     timestamp, msg.headers())]
        from ..records import ConsumerRecord

        record = ConsumerRecord(tp.topic, tp.partition, msg.offset(), timestamp or None, msg.key(), msg.value(),
                                msg.headers() or [])
        return [(out.topic, out.value, out.key, _UNASSIGNED if out.partition is None else out.partition,
                 out.timestamp or 0, out.headers) for out in (self._handler.handle(record) or ())]

    def _tracked_delivery(self, tp: TopicPartition, offset: int, err, msg) -> None:
        if err is not None and err.code() not in _PURGED and (tp, offset) not in self._refused:
            self._refused.add((tp, offset))
            # The transaction holds its queued records back until it is aborted: no flush waits.
            self._txp.failures.append(err.str())
            self._metrics.dropped_many(1)
            self._log.error("Error when sending message from %s-%d offset %d to topic %s: %s (dropped; "
                            "--abort.on.send.failure is false)", tp.topic, tp.partition, offset, msg.topic(),
                            err.str())


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


class _FailureAware:
    """The committer, after a look at the records the target refused in this transaction: any
    refusal aborts the transaction instead of committing it."""

    def __init__(self, committer: TransactionalCommitter, producer: TransactionalProducer) -> None:
        self._committer, self._producer = committer, producer

    def commit(self, offsets, deadline=None):
        if self._producer.failures:
            self._committer.abort()
            raise TransactionAborted(self._producer.failures[0])
        return self._committer.commit(offsets, deadline)
