"""The producer all mirror threads share, with MirrorMaker's send-failure semantics.

A full local queue is back-pressure: serve delivery callbacks and try again, never drop; a stop
interrupts the wait (:class:`SendInterrupted`), and the record that was not queued is not
committed. A record the target refuses (reported in the delivery callback) or the producer
rejects locally (e.g. larger than ``message.max.bytes``) is a send failure: with
``abort.on.send.failure=true`` it stops the whole mirror before anything more is committed;
with ``false`` it is counted in ``dropped`` and logged, and mirroring goes on.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from typing import Dict, List, Optional, Tuple

import confluent_kafka
from confluent_kafka import KafkaError, KafkaException

from ..callbacks import client_callback
from ..errors import SendFailed
from . import waiting
from .client_errors import AUTHORIZATION_CODES, ClientErrors, raised_fatal
from ..ops.log import librdkafka_logger
from ..ops.metrics import MirrorMetrics
from ..engine.state import RunState

log = logging.getLogger("mirror_maker.producer")

#: One step of a flush. Under 0.2 s, confluent-kafka makes it one librdkafka flush: longer ones it
#: cuts into chunks, and a chunk after the one a fatal error stopped serves the next delivery
#: reports with that error still pending in the thread (``callbacks``).
FLUSH_STEP_S = 0.1
#: How long a record for a partition the target's metadata does not know yet waits for it.
UNKNOWN_PARTITION_WAIT_S = 10.0
ROOM_WAIT_S = 0.002
#: How often librdkafka reports its produce-to-acknowledgement latencies (for replication latency).
STATS_INTERVAL_MS = 5000
#: Records librdkafka dropped unsent: after our own purge (abort), or after a fatal error.
_PURGED = frozenset({KafkaError._PURGE_QUEUE, KafkaError._PURGE_INFLIGHT})
_UNASSIGNED = -1  # librdkafka's RD_KAFKA_PARTITION_UA: let the partitioner choose
#: confluent-kafka sets RD_KAFKA_PURGE_F_NON_BLOCKING when ``blocking`` is true (Producer_purge
#: in src/confluent_kafka/src/Producer.c, read from its first release, 1.5.2, to 2.15.0; 2.16 is
#: pinned): true is the purge that does not wait. tests/unit/test_producer.py holds the pin.
PURGE_WITHOUT_WAITING = True
#: A v2 record's framing (length, attributes, deltas, counts) and its batch's 61-byte header.
RECORD_OVERHEAD_BYTES = 80


class SendInterrupted(Exception):
    """A stop arrived while a send waited for room in the full local queue: the record was not
    queued, so neither it nor anything after it in the batch may be committed."""


def _where(topic: str, partition: int, offset: int) -> str:
    """How an error line names the source record."""
    return f"{topic}-{partition} offset {offset}"


class MirrorProducer:
    """A thin wrapper around one confluent ``Producer``; thread-safe as librdkafka's is."""

    def __init__(
        self,
        conf: dict,
        state: RunState,
        abort_on_send_failure: bool = True,
        sync: bool = False,
        max_block_ms: Optional[int] = None,
        metrics: Optional[MirrorMetrics] = None,
        topic_limits: Optional[Dict[str, int]] = None,
        errors: Optional[ClientErrors] = None,
    ) -> None:
        """``topic_limits``: target topic -> max.message.bytes, as far as known (kept up to date
        by ``TargetTopics``), to tell a refused batch from a record too large by itself.
        ``errors``: how the target's client errors are worded (and its ``error_cb``)."""
        self._state = state
        self._errors = errors or ClientErrors("target", conf.get("bootstrap.servers", "?"), state)
        conf = dict(conf)
        conf.setdefault("client.id", "producer-1")
        conf["logger"] = librdkafka_logger(conf["client.id"])
        conf["on_delivery"] = self._on_delivery
        conf["error_cb"] = self._errors
        conf["stats_cb"] = self._on_stats
        conf.setdefault("statistics.interval.ms", STATS_INTERVAL_MS)
        self._producer = confluent_kafka.Producer(conf)
        #: The C ``produce`` itself, for the mirror threads' fast path.
        self.produce = self._producer.produce
        self._count_lock = threading.Lock()
        self._produced = 0
        #: The highest acknowledged count read so far (see ``acknowledged``).
        self._acknowledged = 0
        #: Records that ended without an acknowledgement: refused, rejected locally, purged.
        self._failed = 0
        #: The handed-over count when a flush last saw the queue empty (see ``unacknowledged``).
        self._emptied_at = -1
        #: How often a flush saw the queue empty (``_drained``): a flush that began before one of
        #: those moments is done, whichever thread saw it.
        self._drains = 0
        #: The drain count each commit's flush waiting now began at (``commit_flush_waiting``).
        self._commit_flushes: List[int] = []
        #: Set when librdkafka purged records itself (after a fatal error): nothing may be
        #: committed from then on, even once the queue is empty.
        self._purged = False
        self._abort = abort_on_send_failure or sync
        self._sync = sync
        self._max_block_s = None if max_block_ms is None else max_block_ms / 1000.0
        self._metrics = metrics or MirrorMetrics()
        self._topic_limits = {} if topic_limits is None else topic_limits
        self._warned_deadline: Optional[float] = None
        self._metrics.cluster_errors["target"] = self._errors  # the status line's reachability

    def __len__(self) -> int:
        """Records waiting for the target. librdkafka's queue length also counts events waiting
        for a poll (statistics, logs, connection errors), so with the target away and nothing
        sent it read as a growing number of records; what was handed over and is neither
        acknowledged nor failed bounds it too (both are exact right after ``serve``)."""
        with self._count_lock:  # one reading: a count taken in between made a record look acknowledged
            return self._left()

    def _left(self) -> int:
        """``len(self)``; the caller holds the lock."""
        queued = len(self._producer)
        return max(0, min(queued, self._produced - self._failed - self._read_acknowledged(queued)))

    def unacknowledged(self) -> int:
        """Records still waiting for the target, once closed: none when a flush saw the queue
        empty and nothing was handed over since. Otherwise librdkafka's queue length after serving
        its pending events, which it also counts (statistics, log lines, connection errors): an
        event arriving after the final flush made a bounded run that had everything acknowledged
        report a record missing and exit as incomplete."""
        if self._emptied_at == self._produced:
            return 0
        self._serve(0)
        return len(self._producer)

    @property
    def errors(self) -> ClientErrors:
        """How the target's client errors are worded (the raw path's producer words its own so)."""
        return self._errors

    # -- sending -----------------------------------------------------------------------

    def send(
        self,
        topic: str,
        value: Optional[bytes],
        key: Optional[bytes],
        partition: Optional[int],
        timestamp: Optional[int],
        headers: Optional[List[Tuple[str, Optional[bytes]]]],
        src_topic: str,
        src_partition: int,
        src_offset: int,
    ) -> None:
        """Queue one record; waits while the local queue is full, never drops it.

        The mirror thread's fast path calls ``produce`` itself (one positional C call: topic,
        value, key, partition, callback, on_delivery, timestamp, headers) and ``refused`` when
        it raised; this is the same for records a user's handler returned. The caller counts
        what it handed over (``count_produced``), once per batch.
        """
        partition = _UNASSIGNED if partition is None else partition
        timestamp = 0 if timestamp is None else timestamp
        try:
            self.produce(topic, value, key, partition, None, None, timestamp, headers)
        except (BufferError, KafkaException) as exc:
            self.refused(exc, topic, value, key, partition, timestamp, headers,
                         src_topic, src_partition, src_offset)
        if self._sync:
            self.flush()

    def refused(self, exc, topic, value, key, partition, timestamp, headers,
                src_topic, src_partition, src_offset, on_delivery=None) -> None:
        """``produce`` raised: a full queue (wait for room, then produce: back-pressure, may raise
        :class:`SendInterrupted`) or a local rejection (a send failure naming the source record).
        ``on_delivery``: the record's own delivery callback, if it has one."""
        learnt = False
        while True:
            if isinstance(exc, BufferError):
                self._wait_for_room(topic, value, key, partition, timestamp, headers,
                                    src_topic, src_partition, src_offset, on_delivery)
                return
            if exc.args[0].code() == KafkaError._FATAL:
                # "Local: Fatal error" names no cause; confluent-kafka's poll() raises the fatal
                # error with it (a refused producer id, say): that is the run's one line.
                self._serve(0)
                if self._state.failed:  # nothing past the last commit is committed: read again, not dropped
                    self._not_queued()
                    if on_delivery is not None:
                        on_delivery(exc.args[0], None)
                    return
            if (not learnt and exc.args[0].code() == KafkaError._UNKNOWN_PARTITION and partition >= 0
                    and self._learn_partition(topic, partition)):
                learnt = True  # asked once: a refusal of the retry is taken as any other
                try:
                    self.produce(topic, value, key, partition, on_delivery, None, timestamp, headers)
                    return
                except (BufferError, KafkaException) as again:
                    exc = again
                    continue
            self._not_taken(_where(src_topic, src_partition, src_offset), topic, key, value, exc.args[0],
                            on_delivery)
            return

    def _not_taken(self, where: str, topic, key, value, error: KafkaError, on_delivery=None) -> None:
        """A record the producer would not queue: a send failure, or, for a record with its own
        delivery callback, reported there as the target's refusal would be."""
        self._not_queued()
        if on_delivery is not None:
            on_delivery(error, None)
        else:
            self._send_failed(where, topic, key, value, error.str())

    def _learn_partition(self, topic: str, partition: int) -> bool:
        """Whether ``topic`` has ``partition`` on the target after all: librdkafka refuses a
        partition beyond the count in its metadata cache at once, and a topic that just grew
        (``--refresh.topics.enabled``, or by hand) is there before the cache knows. Asks the
        target again, for a bounded time."""
        deadline = time.monotonic() + UNKNOWN_PARTITION_WAIT_S
        while not self._state.stopping and time.monotonic() < deadline:
            try:
                meta = self._producer.list_topics(topic, timeout=max(0.5, deadline - time.monotonic()))
                known = meta.topics.get(topic)
                if known is not None and partition in known.partitions:
                    return True
            except KafkaException:
                pass
            self._state.wait(0.2)
        return False

    def _not_queued(self) -> None:
        """A record counted as handed over never entered the queue: it ends unacknowledged."""
        with self._count_lock:
            self._failed += 1

    def count_produced(self, records: int) -> None:
        """Records handed to ``produce`` (the acknowledged count is derived from it)."""
        with self._count_lock:
            self._produced += records

    def acknowledged(self) -> int:
        """Records the target acknowledged: with delivery reports for failures only, what was
        handed over and is neither waiting (in librdkafka's queue) nor failed.

        librdkafka's queue length also counts events waiting for the next poll (statistics every
        5 s, logs, failure reports), so a reading taken while one waits is low by that much. The
        count is the highest reading so far: a counter must never go down (Prometheus would
        take it for a restart), and ``serve`` takes a reading right after a poll, when the queue
        holds records only, so the count reaches the true number within a mirror loop round."""
        with self._count_lock:
            return self._read_acknowledged(len(self._producer))

    def _read_acknowledged(self, queued: int) -> int:
        """``acknowledged`` with librdkafka's queue length ``queued``; the caller holds the lock."""
        reading = self._produced - queued - self._failed
        if reading > self._acknowledged:
            self._acknowledged = reading
        return self._acknowledged

    def delivered(self) -> int:
        """Records the target acknowledged, committed or not (exactly-once counts only committed
        ones as acknowledged; the stall watch needs to see deliveries between two commits)."""
        return MirrorProducer.acknowledged(self)

    def _wait_for_room(self, topic, value, key, partition, timestamp, headers,
                       src_topic, src_partition, src_offset, on_delivery=None):
        """A full queue is back-pressure: wait for deliveries to free room, then produce."""
        started = time.monotonic()
        where = _where(src_topic, src_partition, src_offset)
        while True:
            if self._state.failed:
                self._not_queued()
                return
            if self._state.stopping:
                raise SendInterrupted(where)
            if self._max_block_s is not None and time.monotonic() - started > self._max_block_s:
                self._not_taken(where, topic, key, value,
                                KafkaError(KafkaError._QUEUE_FULL, "the local queue stayed full for max.block.ms"),
                                on_delivery)
                return
            # Acknowledgements make room but send no event (failure-only reports): a short wait.
            self._serve(ROOM_WAIT_S)
            waiting.serve()
            try:
                self.produce(topic, value, key, partition, on_delivery, None, timestamp, headers)
                return
            except BufferError:
                continue
            except KafkaException as exc:
                self._not_taken(where, topic, key, value, exc.args[0], on_delivery)
                return

    def serve(self) -> None:
        """Serve what librdkafka has queued (failed deliveries, statistics, errors), without
        waiting. The mirror threads call it after every batch: librdkafka queues an event per
        record even when only failures reach Python, and serving them in the thread that produced
        them costs less than a thread of its own trading the GIL with it."""
        self._serve(0)
        self.acknowledged()

    def _serve(self, timeout_s: float, flush: bool = False) -> None:
        try:
            if flush:
                self._producer.flush(timeout_s)
            else:
                self._producer.poll(timeout_s)
        except (KafkaException, SystemError) as exc:  # a fatal error: confluent-kafka raises it from poll()
            fatal = raised_fatal(exc)
            if fatal is None:
                raise
            self._fatal(fatal)

    def _fatal(self, exc: KafkaException) -> None:
        """A fatal producer error (e.g. no idempotent producer id): the run fails with one line."""
        self._state.fail(self._errors.fatal(exc.args[0]))

    # -- delivery reports --------------------------------------------------------------

    @client_callback
    def _on_delivery(self, err, msg) -> None:
        """The producer's one delivery-report callback: with ``delivery.report.only.error`` (the
        default) only failed records come here, so the hot path pays no Python call per record."""
        if err is None:
            return  # the user turned success reports on: acknowledgements are counted anyway
        with self._count_lock:
            self._failed += 1
        if self._state.failed:
            # Nothing past the last commit is committed once the run failed: this record is read
            # again on restart, so it is not a drop (purged ones, and any the target refused late).
            log.debug("after the failure: %s for a record to %s", err.str(), msg.topic())
            return
        if err.code() in _PURGED:
            # librdkafka purged it after a fatal error, which poll() raises on its own: that error
            # is the cause to report. Until it is, no flush may count as complete.
            self._purged = True
            return
        if err.code() == KafkaError.MSG_SIZE_TOO_LARGE and self._batch_refused(msg):
            return
        reason = err.str()
        if err.code() in AUTHORIZATION_CODES:
            reason = str(self._errors.not_authorized(err, topic=msg.topic()))
        # The source offset of an asynchronous failure is not kept per record (that would cost an
        # allocation per record); nothing past the last commit is committed, so it is re-read.
        self._send_failed("a source partition after its last committed offset", msg.topic(),
                          msg.key(), msg.value(), f"{reason} (target partition {msg.partition()})")

    def _batch_refused(self, msg) -> bool:
        """A record that fits the topic's max.message.bytes by itself was refused with its batch.

        Java's producer would split the batch and send the records again; librdkafka does not.
        Skipping them would lose records the target never refused one by one, so this stops the
        mirror whatever --abort.on.send.failure says, naming the setting that prevents it.
        """
        limit = self._topic_limits.get(msg.topic())
        size = len(msg.key() or b"") + len(msg.value() or b"") + sum(
            len(name) + len(value or b"") for name, value in msg.headers() or ())
        if limit is None or size + RECORD_OVERHEAD_BYTES > limit:
            return False  # too large by itself (or the limit is unknown): an ordinary refusal
        self._metrics.dropped_one()
        if self._state.fail(SendFailed(
                f"the target refused a batch of records for topic {msg.topic()} (partition "
                f"{msg.partition()}) as larger than its max.message.bytes of {limit} bytes, though "
                f"they fit one by one: librdkafka does not split a refused batch as Java's producer "
                f"does; set batch.size to at most {limit} in --producer.config")):
            log.info("Closing producer due to send failure.")
            self.purge()
        return True

    @client_callback
    def _on_stats(self, text: str) -> None:
        """librdkafka's statistics: how long a record takes from ``produce`` to the target's
        acknowledgement (queue, request buffer and round trip), for the replication latency, and
        whether a broker of the target is up (the end of an outage)."""
        try:
            stats = json.loads(text)
        except ValueError:
            return
        self._errors.brokers_seen(stats)
        self._metrics.client_statistics(stats)
        brokers = stats.get("brokers", {}).values()
        windows = [[b.get(name, {}) for name in ("int_latency", "outbuf_latency", "rtt")]
                   for b in brokers if b.get("rtt", {}).get("cnt")]
        if not windows:
            return
        weights = [w[2]["cnt"] for w in windows]
        low = min(sum(part.get("min", 0) for part in w) for w in windows)
        high = max(sum(part.get("max", 0) for part in w) for w in windows)
        mean = sum(weight * sum(part.get("avg", 0) for part in w) for w, weight in zip(windows, weights)) / sum(weights)
        self._metrics.ack_delay_ms = (low / 1000.0, high / 1000.0, mean / 1000.0)

    def _send_failed(self, where: str, topic, key, value, reason: str) -> None:
        self._metrics.dropped_one()
        message = (
            f"Error when sending message from {where} to topic {topic} with key: "
            f"{len(key) if key else 0} bytes, value: {len(value) if value else 0} bytes: {reason}"
        )
        if self._abort:
            if self._state.fail(SendFailed(message)):
                log.info("Closing producer due to send failure.")
                self.purge()
        else:
            log.error("%s (dropped; --abort.on.send.failure is false)", message)

    # -- flushing ----------------------------------------------------------------------

    def flush(self, deadline: Optional[float] = None, for_commit: bool = False) -> bool:
        """Wait until every record queued before this call is acknowledged or failed.

        librdkafka's flush waits for its whole queue to empty, which it never does while other
        streams keep producing into this shared producer: one stream's commit waited for the
        others' own commits (seconds at a 2 s commit interval, up to an interval at any). So a
        flush ends at the first moment after its start that any thread saw the queue empty, and
        while a commit's flush (``for_commit``) waits, the other streams commit what they have
        pending too (``commit_flush_waiting``), so that such a moment comes within a loop round
        of each.

        Returns False when the deadline (a ``time.monotonic()`` value) passed first or a fatal
        failure was recorded: the caller must then not commit.
        """
        with self._count_lock:
            began = self._drains
            if for_commit:
                self._commit_flushes.append(began)
        try:
            return self._flush(began, deadline)
        finally:
            if for_commit:
                with self._count_lock:
                    self._commit_flushes.remove(began)

    def commit_flush_waiting(self) -> bool:
        """A stream's commit waits for a moment the queue is empty that has not come yet: the
        caller (another stream) should flush and commit too, producing nothing meanwhile."""
        with self._count_lock:
            return any(began == self._drains for began in self._commit_flushes)

    def _drained(self, began: int) -> bool:
        """Whether the queue was seen empty after a flush that read ``began`` started: every
        record handed over before that was acknowledged or failed by then. Read under the lock
        the flush's start was read under, so that an empty queue seen before a flush began is
        never taken for one seen after."""
        with self._count_lock:
            if len(self._producer) == 0:
                self._drains += 1
                self._emptied_at = self._produced
            return self._drains > began

    def _flush(self, began: int, deadline: Optional[float]) -> bool:
        wait_log = waiting.WaitLog()
        while not self._drained(began):
            if deadline is None:
                deadline = self._state.deadline  # set once a stop was requested
            if self._state.failed:
                return False
            if self._stop_waiting():
                break
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                # librdkafka's queue length counts events waiting for a poll too, and one can
                # arrive right after this poll: only records handed over and not acknowledged
                # are left (``__len__``; never fewer than this caller's own).
                self._serve(0)
                with self._count_lock:
                    left, produced = self._left(), self._produced
                if left == 0:
                    self._emptied_at = produced
                    break
                if self._warned_deadline != deadline:
                    self._warned_deadline = deadline
                    log.warning("%d records not acknowledged by the target before the deadline; "
                                "their offsets are not committed", left)
                return False
            step = FLUSH_STEP_S if deadline is None else max(0.0, min(FLUSH_STEP_S, deadline - now))
            self._serve(step, flush=True)
            waiting.serve()
            if len(self._producer) > 0 and wait_log.due():
                log.warning("waiting for the target to acknowledge %d records; "
                            "offsets are committed only after it does", len(self._producer))
        return not self._state.failed and not self._purged

    def _stop_waiting(self) -> bool:
        """A reason to stop waiting for the queue to empty (a failed transaction holds it back)."""
        return False

    def purge(self) -> None:
        """Drop everything not yet delivered (abort path: nothing of it will be committed), without
        waiting for the broker threads: confluent-kafka holds the GIL through ``purge``, so a
        blocking one that a broker thread is slow to answer stops every thread of the process."""
        try:
            self._producer.purge(in_queue=True, in_flight=True, blocking=PURGE_WITHOUT_WAITING)
        except KafkaException as exc:  # pragma: no cover - purge only fails on misuse
            log.debug("purge failed: %s", exc)

    def close(self, deadline: Optional[float]) -> None:
        if self._state.failed:
            self.purge()
            self._producer.flush(0)
        else:
            self.flush(deadline)
