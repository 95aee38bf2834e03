"""One mirror thread: consume a batch, hand it to the handler, produce, commit when due.

Each thread (``mirrormaker-thread-{i}``) has its own consumer in the group and shares the
producer. It never exits the process: failures go to :class:`RunState` and every thread stops.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Dict, List, Optional

import confluent_kafka
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from ..offsets.checkpoint import Checkpoint
from ..offsets.committer import OffsetCommitter
from ..replication.offset_syncs import SyncingCommitter
from ..config.mirror_config import MirrorMakerConfig
from ..errors import ClientFailed, HandlerFailed, ListenerFailed, MirrorFailure
from ..handlers import DefaultMessageHandler, PartitionPreservingHandler
from ..ops.log import librdkafka_logger
from ..ops.metrics import MirrorMetrics
from ..clients.client_errors import AUTHORIZATION_CODES, ClientErrors
from ..clients.polling import poll
from ..clients.producer import MirrorProducer, SendInterrupted
from ..records import ConsumerRecord, TopicPartition
from .state import RunState

log = logging.getLogger("mirror_maker.worker")

#: How long one consume() may wait for a first record. librdkafka's Python consumer has no
#: wakeup(), so this is the longest a stop waits for an idle thread to notice it: at 0.2 s it was
#: most of a record-mode stop (0.25 s in make bench on Apache Kafka). An idle stream pays 20 empty
#: consume() calls a second for it; a busy one never waits here.
POLL_TIMEOUT_S = 0.05
LAG_UPDATE_S = 0.2
COMMITTED_TIMEOUT_S = 10.0
#: A revoke's flush may take this share of max.poll.interval.ms: the whole group waits for this
#: member's rebalance callback, and a member that takes longer than that is thrown out of it.
REVOKE_SHARE_OF_POLL_INTERVAL = 0.5
#: How long a stop serves the group's revoke before closing the consumer (_revoke_before_close),
#: in consume() calls of this length: librdkafka's consume goes on waiting out its timeout after
#: serving a callback, and the revoke has paused the partitions, so no record ends it sooner.
CLOSE_REVOKE_S = 5.0
CLOSE_REVOKE_STEP_S = 0.005
_NO_TIMESTAMP = confluent_kafka.TIMESTAMP_NOT_AVAILABLE
_UNASSIGNED = -1  # librdkafka's RD_KAFKA_PARTITION_UA: the partitioner chooses


class _ThreadLog(logging.LoggerAdapter):
    def process(self, msg, kwargs):
        return f"[{self.extra['name']}] {msg}", kwargs


class MirrorThread(threading.Thread):
    def __init__(self, index: int, config: MirrorMakerConfig, producer: MirrorProducer,
                 handler, listener, state: RunState, subscription, target_topics,
                 metrics: MirrorMetrics, errors: Optional[ClientErrors] = None) -> None:
        super().__init__(name=f"mirrormaker-thread-{index}", daemon=True)
        self.index = index
        self._config = config
        self._producer = producer
        self._handler = handler
        self._listener = listener
        self._state = state
        self._subscription = subscription
        self._target_topics = target_topics
        self._metrics = metrics
        self._errors = errors
        self._log = _ThreadLog(log, {"name": self.name})
        self._consumer: Optional[confluent_kafka.Consumer] = None
        self._checkpoint: Optional[Checkpoint] = None
        self._subscribed_version = -1
        self._subscribed_topics = None
        self._has_topics = False
        self.assigned: set = set()
        #: Assigned partitions whose position reached the high watermark of the last fetch.
        self.at_end: set = set()
        #: Where each assigned partition started (committed or reset offset), for the lag
        #: before its first record.
        self._start_offsets: dict = {}
        self._next_lag_update = 0.0
        #: True once this thread's consumer took part in a rebalance (even with no partitions).
        self.rebalanced = False
        #: ``time.monotonic()`` of the last loop iteration: /ready checks the loop is not stuck.
        self.last_progress = time.monotonic()
        self._incremental = config.incremental_rebalance
        fast = type(handler) in (DefaultMessageHandler, PartitionPreservingHandler)
        self._fast_keep_partition = handler.keep_partition if fast else None
        #: --emit.offset-syncs.enabled: this thread's OffsetSyncWriter (set by the runner).
        self.offset_syncs = None

    # -- lifecycle ---------------------------------------------------------------------

    def _consumer_conf(self) -> Dict[str, object]:
        return self._config.consumer_conf(self.index)

    def run(self) -> None:
        self._log.info("Starting mirror maker thread %s", self.name)
        try:
            conf = self._consumer_conf()
            conf["logger"] = librdkafka_logger(conf["client.id"])
            # Partition-EOF events cost two thirds of the consume rate (measured); "caught up"
            # comes from the fetch-carried high watermarks instead (update_lag).
            conf.setdefault("enable.partition.eof", False)
            if self._errors is not None:
                conf["error_cb"] = self._errors
            self._consumer = confluent_kafka.Consumer(conf)
            committer = self._committer()
            if self.offset_syncs is not None:
                committer = SyncingCommitter(committer, self.offset_syncs)
            self._checkpoint = Checkpoint(self._flushable(), committer,
                                          self._state, self._config.offset_commit_interval_ms,
                                          metrics=self._metrics, owned=self.assigned.__contains__)
            self._loop()
        except MirrorFailure as exc:
            self._state.fail(exc)
        except KafkaException as exc:
            self._state.fail(ClientFailed(f"{self.name}: {exc.args[0].str()}"))
        except Exception as exc:  # anything unexpected stops the mirror, as in Kafka
            self._log.debug("thread failure", exc_info=True)
            self._state.fail(ClientFailed(f"{self.name} failed: {type(exc).__name__}: {exc}"))
        finally:
            self._finish()

    def _flushable(self):
        """What a commit flushes first (the shared producer; the raw path adds its own)."""
        return self._producer

    def _committer(self):
        """Where offsets go: the source group (exactly-once mode commits them on the target)."""
        return OffsetCommitter(self._consumer)

    def acknowledged(self) -> int:
        """Records this thread's own producer had acknowledged (the shared one counts its own)."""
        return 0

    def waiting(self) -> int:
        """Records this thread's own producer holds for the target (the shared one counts its own)."""
        return 0

    def _finish(self) -> None:
        try:
            if self._checkpoint is not None:
                if self._state.failed:
                    self._log.info("Exiting on send failure, skip committing offsets.")
                else:
                    self._log.info("Flushing producer and committing consumer offsets.")
                    self._checkpoint.commit(deadline=self._state.deadline)
        except MirrorFailure as exc:
            self._state.fail(exc)
        except Exception as exc:
            self._log.debug("final commit failed", exc_info=True)
            self._log.warning("final commit failed: %s", exc)
        finally:
            self._close_consumer()
            self._log.info("Mirror maker thread stopped")

    def _close_consumer(self) -> None:
        if self._consumer is None:
            return
        self._revoke_before_close()
        try:
            self._consumer.close()  # leaves the group: the partitions move at once
        except Exception as exc:
            self._log.debug("consumer close: %s", exc, exc_info=True)

    def _revoke_before_close(self) -> None:
        """Leave the group and serve the revoke in consume() calls, so that close() has nothing
        left to revoke.

        A rebalance callback that close() serves can hang the process for ever: after our
        on_revoke, confluent-kafka asks librdkafka for the rebalance protocol (or unassigns), a
        request to the group's thread made while holding the GIL, and librdkafka drops it
        without an answer when the group ends meanwhile (librdkafka issues 4041 and 4884; about
        one stop in 50 with four streams on Tansu here, found with gdb). Served from consume()
        the group is still alive and answers. The records consume() returns here are dropped:
        nothing is mirrored after a stop, and the revoke's pause makes librdkafka discard the
        prefetched ones itself. A consumer whose callback is still unserved at the deadline is
        closed as before (the stop watchdog bounds that).

        Not for a static member (``group.instance.id``): an unsubscribe sends a LeaveGroup,
        which close() leaves out for it, so that a restart within the session timeout does not
        move its partitions (KIP-345)."""
        if not self._has_topics or "group.instance.id" in self._config.consumer:
            return  # never subscribed (no rebalance callback to serve), or a static member
        consumer = self._consumer
        deadline = self._within_stop(CLOSE_REVOKE_S)
        try:
            consumer.unsubscribe()
            consumer.consume(self._config.batch_size, 0)  # serves what is queued: the revoke, or an assignment first
            while self.assigned and time.monotonic() < deadline:
                consumer.consume(1, min(CLOSE_REVOKE_STEP_S, max(0.0, deadline - time.monotonic())))
        except Exception as exc:  # the consumer failed or was fenced: close() still leaves
            self._log.debug("unsubscribe before close: %s", exc, exc_info=True)
        if self.assigned:
            self._log.debug("%s still assigned at close", _describe(list(self.assigned)))

    # -- the loop ----------------------------------------------------------------------

    def _loop(self) -> None:
        consumer, checkpoint = self._consumer, self._checkpoint
        batch_size = self._config.batch_size
        while not self._state.stopping:
            self.last_progress = time.monotonic()
            if not self._maybe_subscribe():
                self._state.wait(POLL_TIMEOUT_S)
                continue
            messages = poll(consumer, batch_size, POLL_TIMEOUT_S)
            if messages:
                self._mirror(messages)
            self._producer.serve()
            if checkpoint.due() and not self._state.stopping:
                checkpoint.commit()
            if self.last_progress >= self._next_lag_update:
                self._next_lag_update = self.last_progress + LAG_UPDATE_S
                self.update_lag()

    def _maybe_subscribe(self) -> bool:
        if self._subscription.version != self._subscribed_version:
            version, topics = self._subscription.current()
            self._subscribed_version = version
            if topics == self._subscribed_topics:
                return self._has_topics  # only a partition count changed: the group follows it itself
            self._subscribed_topics = topics
            self._has_topics = bool(topics)
            if topics:
                self._consumer.subscribe(topics, on_assign=self._on_assign,
                                         on_revoke=self._on_revoke, on_lost=self._on_lost)
                self._log.info("Subscribed to %d topics", len(topics))
            else:
                self._consumer.unsubscribe()
        return self._has_topics

    def _mirror(self, messages: List) -> None:
        """Hand one consumed batch to the producer: the hot path of the whole mirror.

        Records come in runs of one partition. Per record there is only what the copy needs
        (the message's accessors and one ``produce``); the bookkeeping (the pending offset,
        counts, bytes, ages) is done once per run. A run holds only records already handed to
        the producer: a stop that interrupts a send ends the batch there, and what was not
        queued is not committed.
        """
        runs = []  # (topic, partition, first message, last message, records, value bytes)
        try:
            if self._fast_keep_partition is not None and not self._config.sync_send:
                self._copy(messages, runs)
            else:
                self._handle_all(messages, runs)
        except SendInterrupted as interrupted:
            self._log.info("Stopping while the producer's queue is full: records from %s on are "
                           "not committed and are mirrored again on restart", interrupted)
        self._record(runs)

    def _copy(self, messages: List, runs: List) -> None:
        """The default handlers: each record as it is, to the same topic (as the replication
        policy names it) and, with PartitionPreservingHandler, partition, produced inline."""
        producer, state = self._producer, self._state
        produce = producer.produce
        keep_partition = self._fast_keep_partition
        remote = self._target_topics.remote
        run_topic = run_partition = first = last = target = None
        count = nbytes = 0
        try:
            for msg in messages:
                if msg.error() is not None:
                    if msg.error().code() != KafkaError._PARTITION_EOF:
                        self._consume_error(msg)
                    continue
                topic, partition = msg.topic(), msg.partition()
                if partition != run_partition or topic != run_topic:
                    if count:
                        runs.append((run_topic, run_partition, first, last, count, nbytes))
                    run_topic, run_partition, first, count, nbytes = topic, partition, msg, 0, 0
                    target = remote(topic)
                value = msg.value()
                timestamp = msg.timestamp()[1]  # -1 when the record has none: 0 lets the producer stamp it
                target_partition = partition if keep_partition else _UNASSIGNED
                try:
                    produce(target, value, msg.key(), target_partition, None, None,
                            timestamp if timestamp > 0 else 0, msg.headers())
                except (BufferError, KafkaException) as exc:
                    producer.refused(exc, target, value, msg.key(), target_partition,
                                     timestamp if timestamp > 0 else 0, msg.headers(), topic, partition,
                                     msg.offset())
                if state.failure is not None:
                    break  # nothing is committed past a failure; this record is not counted
                last = msg
                count += 1
                if value is not None:
                    nbytes += len(value)
        finally:  # also when a stop interrupted a send: the run so far was handed over
            if count:
                runs.append((run_topic, run_partition, first, last, count, nbytes))

    def _handle_all(self, messages: List, runs: List) -> None:
        """A user's handler (or sync sends): each record through the handler, its outputs sent."""
        state = self._state
        run_topic = run_partition = first = last = None
        count = nbytes = filtered = produced = 0
        try:
            for msg in messages:
                if msg.error() is not None:
                    if msg.error().code() != KafkaError._PARTITION_EOF:
                        self._consume_error(msg)
                    continue
                topic, partition = msg.topic(), msg.partition()
                if partition != run_partition or topic != run_topic:
                    if count:
                        runs.append((run_topic, run_partition, first, last, count, nbytes))
                    run_topic, run_partition, first, count, nbytes = topic, partition, msg, 0, 0
                sent = self._handle_record(msg, topic, partition, msg.offset(), msg.timestamp())
                produced += sent
                if state.failure is not None:
                    break  # nothing is committed past a failure; this record is not counted
                if not sent:
                    filtered += 1
                last = msg
                count += 1
                value = msg.value()
                if value is not None:
                    nbytes += len(value)
        finally:
            if count:
                runs.append((run_topic, run_partition, first, last, count, nbytes))
            if filtered:
                self._metrics.filtered(filtered)
            self._producer.count_produced(produced)

    def _record(self, runs: List) -> None:
        """Once per run: the pending offset (only for a partition this thread still owns: a
        record of a partition revoked meanwhile must not move its offset), the counts, bytes and
        ages (from the run's first and last record; timestamps grow along a partition)."""
        pending, assigned = self._checkpoint.pending, self.assigned
        now_ms = time.time() * 1000.0
        produced = 0
        syncs = self.offset_syncs
        for topic, partition, first, last, count, nbytes in runs:
            tp = TopicPartition(topic, partition)
            if tp in assigned:
                pending[tp] = last.offset() + 1
                if syncs is not None:
                    syncs.record(tp, first.offset(), last.offset(), count)
            ages = [now_ms - m.timestamp()[1] for m in (first, last) if m.timestamp()[1] > 0]
            if ages:
                self._metrics.consumed(tp, count, nbytes, min(ages), max(ages), sum(ages) / len(ages) * count, count)
            else:
                self._metrics.consumed(tp, count, nbytes, 0.0, 0.0, 0.0, 0)
            produced += count
        if self._fast_keep_partition is not None and not self._config.sync_send:
            self._producer.count_produced(produced)

    def _handle_record(self, msg, topic: str, partition: int, offset: int, timestamp) -> int:
        """The user's handler on one record; how many records it sent (0: filtered)."""
        ts_type, ts = timestamp
        record = ConsumerRecord(topic, partition, offset, None if ts_type == _NO_TIMESTAMP or ts < 0 else ts,
                                msg.key(), msg.value(), msg.headers() or [])
        try:
            outputs = self._handler.handle(record) or ()
            sent = 0
            remote = self._target_topics.remote
            for out in outputs:
                self._producer.send(remote(out.topic), out.value, out.key, out.partition, out.timestamp,
                                    out.headers, topic, partition, offset)
                sent += 1
            return sent
        except (MirrorFailure, SendInterrupted):
            raise
        except Exception as exc:
            self._log.debug("handler failure", exc_info=True)
            raise HandlerFailed(f"message handler raised on {topic}-{partition} offset {offset}: "
                                f"{type(exc).__name__}: {exc}") from None

    def _consume_error(self, msg) -> None:
        err = msg.error()
        if err.code() in AUTHORIZATION_CODES and self._errors is not None:
            raise self._errors.not_authorized(err, topic=msg.topic(), group=self._config.group_id)
        if err.fatal():
            raise ClientFailed(f"{self.name}: fatal consumer error: {err.str()}")
        self._log.warning("Consumer error (librdkafka retries it): %s", err.str())

    def update_lag(self) -> None:
        """Lag per assigned partition: the high watermark of the last fetch minus the position.

        The cached, fetch-carried watermark needs no request, and stays right where a broker
        answers ListOffsets(latest) wrongly (the test broker does after multi-record batches).
        A partition at lag 0 is "at its end" for ``--exit.when.caught.up``. Only this thread
        may call it: confluent-kafka holds the GIL in ``position()``, so calling it from another
        thread while this one is in a rebalance callback deadlocks.
        """
        if not self.assigned or self._consumer is None:
            return
        try:
            positions = self._consumer.position(
                [KafkaTopicPartition(tp.topic, tp.partition) for tp in list(self.assigned)])
        except (KafkaException, RuntimeError):  # RuntimeError: the consumer just closed
            return
        for position in positions:
            tp = TopicPartition(position.topic, position.partition)
            try:
                _low, high = self._consumer.get_watermark_offsets(position, cached=True)
            except KafkaException:
                continue
            offset = position.offset if position.offset >= 0 else self._start_offsets.get(tp, -1)
            if high < 0 or offset < 0:
                self.at_end.discard(tp)
                continue
            lag = max(0, high - offset)
            self._metrics.set_lag(tp, lag)
            if lag == 0:
                self.at_end.add(tp)
            else:
                self.at_end.discard(tp)

    # -- the internal rebalance listener -------------------------------------------------

    def _on_assign(self, consumer, partitions) -> None:
        tps = [TopicPartition(p.topic, p.partition) for p in partitions]
        self.assigned.update(tps)
        self.rebalanced = True
        self._metrics.rebalanced("assigned")
        self._log.info("Assigned %s", _describe(tps))
        if tps and self._state.stopping:
            # Served by the consumer's close after a stop: nothing more is mirrored, so no target
            # topic check or position lookup, each of which waits up to 10 s for a cluster away.
            self._assign_positions(consumer, partitions)
        elif tps:
            self._ensure_target_topics(tps)
            if self.offset_syncs is not None:  # where their next records will land, before any goes out
                self.offset_syncs.assigned(tps)
            self._assigned_from(self._assign_from_positions(consumer, partitions))
        self._call_listener("on_partitions_assigned", tps)

    def _assigned_from(self, positions) -> None:
        """The newly assigned partitions are assigned, each from its position (the raw path
        takes them over from here)."""

    def _on_revoke(self, consumer, partitions) -> None:
        tps = [TopicPartition(p.topic, p.partition) for p in partitions]
        self._log.info("Revoked %s", _describe(tps))
        if self._state.failed:
            self._log.info("Exiting on send failure, skip committing offsets.")
        elif not self._checkpoint.commit(tps, deadline=self._revoke_deadline()):
            self._log.warning("The revoked partitions' records were not all acknowledged in time; "
                              "their offsets are not committed, so their next owner mirrors them again")
        self._forget(tps)
        self._metrics.rebalanced("revoked")
        self._call_listener("on_partitions_revoked", tps)

    def _revoke_deadline(self) -> float:
        """The flush on revoke holds up the whole group's rebalance: bound it by a share of
        max.poll.interval.ms (and by the stop's deadline when stopping)."""
        return self._within_stop(self._config.max_poll_interval_s * REVOKE_SHARE_OF_POLL_INTERVAL)

    def _within_stop(self, seconds: float) -> float:
        """The deadline ``seconds`` from now, or the stop's deadline if that comes first."""
        bound = time.monotonic() + seconds
        stop = self._state.deadline
        return bound if stop is None else min(bound, stop)

    def _on_lost(self, consumer, partitions) -> None:
        tps = [TopicPartition(p.topic, p.partition) for p in partitions]
        self._log.warning("Lost %s; their uncommitted offsets are discarded", _describe(tps))
        self._forget(tps)
        self._metrics.rebalanced("lost")
        self._call_listener("on_partitions_lost", tps)

    def _forget(self, tps: List[TopicPartition]) -> None:
        if self.offset_syncs is not None:
            self.offset_syncs.forget(tps)
        self._checkpoint.discard(tps)
        self.assigned.difference_update(tps)
        self.at_end.difference_update(tps)
        for tp in tps:
            self._start_offsets.pop(tp, None)
        self._metrics.forget_lag(tps)

    def _ensure_target_topics(self, tps: List[TopicPartition]) -> None:
        self._target_topics.ensure({tp.topic: self._targets_of(tp.topic) for tp in tps})

    def _targets_of(self, source_topic: str) -> List[str]:
        """The target topics of a source topic: the handler's names, as the policy names them."""
        target_topics = getattr(self._handler, "target_topics", lambda topic: [topic])
        remote = self._target_topics.remote
        return [remote(topic) for topic in target_topics(source_topic)]

    def _assign_from_positions(self, consumer, partitions) -> list:
        """Assign, resolving ``auto.offset.reset`` here for partitions without a committed offset.

        Resolving it ourselves (rather than at librdkafka's first fetch) makes the "Resetting
        offset" line true when it is written: Kafka's system test starts producing once it sees
        it, and a record produced after it must not be skipped.
        """
        reset = self._config.consumer.get("auto.offset.reset", "latest")
        try:
            positions = consumer.committed(partitions, timeout=COMMITTED_TIMEOUT_S)
        except KafkaException as exc:
            self._log.warning("Cannot read committed offsets (%s); librdkafka will resolve them",
                              exc.args[0].str())
            positions = partitions
        grown = self._grown_partitions([TopicPartition(tp.topic, tp.partition) for tp in positions if tp.offset < 0],
                                       lambda earlier: self._committed_on(consumer, earlier))
        for tp in positions:
            if tp.offset >= 0:
                self._log.info("Setting offset for partition %s-%d to the committed offset %d",
                               tp.topic, tp.partition, tp.offset)
                continue
            added = TopicPartition(tp.topic, tp.partition) in grown
            if reset not in ("earliest", "latest", "smallest", "largest", "beginning", "end") and not added:
                continue
            try:
                low, high = consumer.get_watermark_offsets(tp, timeout=COMMITTED_TIMEOUT_S)
            except KafkaException as exc:
                self._log.warning("Cannot resolve auto.offset.reset for %s-%d (%s); librdkafka "
                                  "will", tp.topic, tp.partition, exc.args[0].str())
                continue
            tp.offset = low if added or reset in ("earliest", "smallest", "beginning") else high
            self._log.info("Resetting offset for partition %s-%d to position %d (%s)", tp.topic, tp.partition,
                           tp.offset, "a partition added while mirroring: from its start" if added
                           else f"no committed offset; auto.offset.reset={reset}")
        for tp in positions:
            if tp.offset >= 0:
                self._start_offsets[TopicPartition(tp.topic, tp.partition)] = tp.offset
        self._assign_positions(consumer, positions)
        return positions

    def _assign_positions(self, consumer, positions) -> None:
        if self._incremental:
            consumer.incremental_assign(positions)
        else:
            consumer.assign(positions)

    def _grown_partitions(self, missing: List[TopicPartition], committed_of) -> set:
        """With ``--refresh.topics.enabled``: of the partitions without a committed offset, those
        added to a topic this group mirrored before (a lower partition has an offset). They are
        mirrored from their start, as MirrorMaker 2 does, whatever auto.offset.reset says: the
        records written to them before they were assigned would be skipped otherwise."""
        if not self._config.replication.refresh_topics or not missing:
            return set()
        earlier = {TopicPartition(tp.topic, p) for tp in missing for p in range(tp.partition)} - set(missing)
        if not earlier:
            return set()
        mirrored = {tp.topic for tp in committed_of(sorted(earlier))}
        return {tp for tp in missing if tp.topic in mirrored}

    def _committed_on(self, consumer, tps: List[TopicPartition]) -> List[TopicPartition]:
        try:
            answer = consumer.committed([KafkaTopicPartition(tp.topic, tp.partition) for tp in tps],
                                              timeout=COMMITTED_TIMEOUT_S)
        except KafkaException as exc:
            self._log.warning("Cannot read committed offsets (%s)", exc.args[0].str())
            return []
        return [TopicPartition(tp.topic, tp.partition) for tp in answer if tp.offset >= 0]

    def _call_listener(self, method: str, tps: List[TopicPartition]) -> None:
        callback = getattr(self._listener, method, None)
        if callback is None:
            return
        try:
            callback(tps)
        except Exception as exc:
            self._log.debug("listener failure", exc_info=True)
            raise ListenerFailed(f"rebalance listener {method} raised: "
                                 f"{type(exc).__name__}: {exc}") from None


def _describe(tps: List[TopicPartition]) -> str:
    if not tps:
        return "no partitions"
    return ", ".join(f"{tp.topic}-{tp.partition}" for tp in sorted(tps))
