"""The raw path's producer: whole record batches to the target, idempotent, in order.

It asks the target for its own producer id (InitProducerId) and gives every batch the next
sequence of its partition when the batch is first sent. Each request carries at most one batch
per partition (Kafka refuses more), several partitions per request, and up to 5 requests are in
flight per connection (the idempotent producer's limit, within which the broker deduplicates).

It has ``CONNECTIONS_PER_BROKER`` connections to every target broker, each partition always on
the same one (partition number modulo their count), so a partition's batches stay in one
connection's order. A broker handles one request of a connection at a time, so with one
connection the target appends our batches one request after the other; a second lets it append
two at once.

Kafka appends a partition's batches only in sequence order, so after a failure the batches not
acknowledged are exactly those to send again, with the same sequences: a retriable error (a
moved leader, a timeout, a lost connection, "out of order" for the batches behind a failed one)
marks the partition, and once none of its batches is in flight they go again in order; "duplicate
sequence" means an earlier attempt was written, which is a success. A batch the target refuses
for good is a send failure with MirrorMaker's semantics: with abort it stops the mirror, nothing
committed past it; without, it is counted as dropped and the batches behind it are given the
sequences it would have used.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Deque, Dict, List, Optional, Sequence, Tuple

from ..clients import waiting
from ..errors import ClientFailed, SendFailed
from ..records import TopicPartition
from .batches import Batch, rewrite
from .connections import MAX_PRODUCE_VERSION, Cluster, guarded

log = logging.getLogger("mirror_maker.shallow")

MAX_IN_FLIGHT = 5
CONNECTIONS_PER_BROKER = 2
_SEQUENCE_WRAP = 2 ** 31
INIT_TIMEOUT_S = 60.0
ANSWER_MARGIN_MS = 5000
#: Produce errors after which the same batch may go again (Kafka's retriable ones).
RETRIABLE = frozenset({
    3,   # UNKNOWN_TOPIC_OR_PARTITION: metadata not everywhere yet
    5,   # LEADER_NOT_AVAILABLE
    6,   # NOT_LEADER_OR_FOLLOWER
    7,   # REQUEST_TIMED_OUT
    13,  # NETWORK_EXCEPTION
    14, 15, 16,  # coordinator loading, not available, not coordinator
    19, 20,  # NOT_ENOUGH_REPLICAS (after append)
    45,  # OUT_OF_ORDER_SEQUENCE_NUMBER: behind a batch that failed
    56,  # KAFKA_STORAGE_ERROR
    74, 75,  # FENCED_LEADER_EPOCH, UNKNOWN_LEADER_EPOCH
})
DUPLICATE_SEQUENCE = 46
OUT_OF_ORDER_SEQUENCE = 45
#: The broker has no state for our producer id (expired, or never): take a new one.
UNKNOWN_PRODUCER_ID = 59
#: The producer itself is unusable: fail the run.
PRODUCER_FATAL = frozenset({31, 47, 49, 90})  # cluster authorization, invalid epoch or mapping, fenced
ERROR_NAMES = {2: "CORRUPT_MESSAGE", 10: "MESSAGE_TOO_LARGE", 18: "RECORD_LIST_TOO_LARGE",
               29: "TOPIC_AUTHORIZATION_FAILED", 31: "CLUSTER_AUTHORIZATION_FAILED",
               32: "INVALID_TIMESTAMP", 47: "INVALID_PRODUCER_EPOCH", 59: "UNKNOWN_PRODUCER_ID",
               87: "INVALID_RECORD", 90: "PRODUCER_FENCED"}


@dataclass
class Entry:
    """One batch on its way to a target partition."""

    batch: Batch
    source: TopicPartition
    sequence: int = -1
    #: The sequence its last attempt carried (a refused batch ahead of it moves ``sequence``).
    sent_sequence: int = -1
    in_flight: bool = False
    acked: bool = False


@dataclass
class PartitionLog:
    """A target partition's batches not acknowledged yet, in sequence order."""

    entries: Deque[Entry] = field(default_factory=deque)
    next_sequence: int = 0
    #: A failure happened: send the unacknowledged batches again once none is in flight.
    rewind: bool = False
    #: One batch at a time until the target acknowledged one under our producer id: before
    #: that it has no sequence of ours to check a later batch against, and a later batch that
    #: went first would be taken as the first, and the order would break.
    careful: bool = True

    def in_flight(self) -> int:
        return sum(1 for entry in self.entries if entry.in_flight)


def connections(net, conf: Dict[str, str], client_id: str, state=None) -> List[Cluster]:
    """The producer's connections to the target (one client each, the same client id). A produce
    request carries ``request.timeout.ms`` for the broker; the client waits ``ANSWER_MARGIN_MS``
    longer, so that a broker waiting on its replicas answers REQUEST_TIMED_OUT (retried on the
    same connection) before the client gives up and closes the connection with every request
    of the other partitions in flight on it."""
    timeout_ms = produce_timeout_ms(conf) + ANSWER_MARGIN_MS
    conf = {**conf, "request.timeout.ms": str(timeout_ms)}
    return [Cluster(net, conf, client_id, "target", state) for _ in range(CONNECTIONS_PER_BROKER)]


def produce_timeout_ms(conf: Dict[str, str]) -> int:
    """How long the broker may wait for its replicas before it answers a produce request."""
    return int(conf.get("request.timeout.ms", 30000))


class RawProducer:
    def __init__(self, clusters: Sequence[Cluster], net, state, abort_on_send_failure: bool, metrics,
                 errors=None, request_timeout_ms: int = 30000) -> None:
        self._lanes = list(clusters)  # see the module docstring
        self._cluster = self._lanes[0]  # for what is asked once: the producer id
        self._net = net
        self._state = state
        self._abort = abort_on_send_failure
        self._metrics = metrics
        self._errors = errors
        self._timeout_ms = request_timeout_ms
        self._logs: Dict[Tuple[str, int], PartitionLog] = {}
        #: Batches go out as their two pieces where our frame parser sends requests (frames.py,
        #: imported here: kafka-python's import is start-up time the group join overlaps).
        from .frames import installed

        self._unjoined = installed()
        self._node_in_flight: Dict[Tuple[int, int], int] = {}  # per (lane, broker)
        self.producer_id = -1
        self.producer_epoch = -1
        #: Our sequences may no longer match the broker's (a partition dropped with batches in
        #: doubt, an unknown producer id): a new producer id, once nothing is in flight.
        self._renew = False
        #: The renewal's InitProducerId request, while it waits for its answer.
        self._renewal = None
        self.acked_records = 0
        self.queued_bytes = 0
        #: Batches not acknowledged yet (``pending``, kept as a count: read at every hand-over).
        self.queued_batches = 0
        #: When a wait for acknowledgements is worth a line: kept from flush to flush until the
        #: target acknowledges again, so that flushes each shorter than its first line (a revoke's,
        #: the record path's) still say that the target has been away for long.
        self._wait_log: Optional[waiting.WaitLog] = None

    # -- set-up ------------------------------------------------------------------------

    def init_producer_id(self, deadline: Optional[float] = None) -> bool:
        """Our own producer id from the target; retried while its coordinator is loading.
        False when a stop came first (a stop is no failure, even before the id)."""
        deadline = deadline or time.monotonic() + INIT_TIMEOUT_S
        while True:
            node = self._cluster.client.least_loaded_node(bootstrap_fallback=True)
            error = None
            try:
                response = self._cluster.ask(node, _init_producer_id_request(), self._timeout_ms)
                if response is None:
                    return False
                if self._took_producer_id(response):
                    return True
                error = f"error {response.error_code}"
            except ClientFailed:
                raise
            except Exception as exc:  # not connected yet, a timeout
                error = str(exc)
            if self._state.wait(0.2):  # a stop ends the retries at once
                return False
            if time.monotonic() >= deadline:
                raise ClientFailed(f"the target cluster ({self._cluster.bootstrap}) gave the raw producer "
                                   f"no producer id: {error}")

    def _took_producer_id(self, response) -> bool:
        """Whether an InitProducerId answer gave us an id (taken); raises if it never will."""
        if response.error_code == 0:
            self.producer_id, self.producer_epoch = response.producer_id, response.producer_epoch
            log.info("Raw producer id %d, epoch %d on the target", self.producer_id, self.producer_epoch)
            return True
        if response.error_code == 31:
            raise self._fatal(31, "an idempotent producer id")
        return False

    # -- sending -----------------------------------------------------------------------

    def send(self, topic: str, partition: int, batch: Batch, source: TopicPartition) -> None:
        """Queue one batch for a target partition (sent by ``pump``)."""
        log_ = self._logs.get((topic, partition))
        if log_ is None:
            for lane in self._lanes:
                lane.track([topic])
            log_ = self._logs[(topic, partition)] = PartitionLog()
        log_.entries.append(Entry(batch, source))
        self.queued_bytes += batch.held
        self.queued_batches += 1

    def busy(self, topic: str, partition: int) -> bool:
        log_ = self._logs.get((topic, partition))
        return bool(log_ and log_.entries)

    def pump(self) -> None:
        """Send what can go now: per connection, up to 5 requests in flight, one batch per
        partition per request, each partition's batches in order."""
        if self._renew and not self._renewed():
            return
        while not self._state.failed:
            sent = False
            for (lane, node), items in self._sendable().items():
                if self._node_in_flight.get((lane, node), 0) >= MAX_IN_FLIGHT:
                    continue
                if self._lanes[lane].ready(node):
                    self._send_request((lane, node), items)
                    sent = True
                else:
                    self._lanes[lane].revive()
            if not sent:
                return

    def _sendable(self) -> Dict[Tuple[int, int], List[Tuple[Tuple[str, int], Entry]]]:
        """Per connection to a leader (lane, broker), each partition's next batch that may go now."""
        ready: Dict[Tuple[int, int], List[Tuple[Tuple[str, int], Entry]]] = {}
        for key, log_ in self._logs.items():
            if not log_.entries:
                continue
            if log_.rewind:
                if log_.in_flight():
                    continue  # wait until every batch of the partition came back
                log_.rewind, log_.careful = False, True
            if log_.careful and log_.in_flight():
                continue
            entry = next((e for e in log_.entries if not e.in_flight and not e.acked), None)
            if entry is None:
                continue
            lane = key[1] % len(self._lanes)
            node = self._lanes[lane].route(*key)
            if node is None:
                continue
            ready.setdefault((lane, node), []).append((key, entry))
        return ready

    def _send_request(self, connection: Tuple[int, int], items) -> None:
        from kafka.protocol.producer import ProduceRequest

        by_topic: Dict[str, list] = {}
        for (topic, partition), entry in items:
            log_ = self._logs[(topic, partition)]
            if entry.sequence < 0:
                entry.sequence = log_.next_sequence
                log_.next_sequence = (log_.next_sequence + entry.batch.record_count) % _SEQUENCE_WRAP
            data = rewrite(entry.batch, self.producer_id, self.producer_epoch, entry.sequence)
            entry.sent_sequence = entry.sequence
            by_topic.setdefault(topic, []).append(ProduceRequest.TopicProduceData.PartitionProduceData(
                index=partition, records=data if self._unjoined else data.joined()))
            entry.in_flight = True
        request = ProduceRequest(transactional_id=None, acks=-1, timeout_ms=self._timeout_ms,
                                 topic_data=[ProduceRequest.TopicProduceData(name=t, partition_data=p)
                                             for t, p in by_topic.items()],
                                 max_version=MAX_PRODUCE_VERSION)
        self._node_in_flight[connection] = self._node_in_flight.get(connection, 0) + 1
        lane, node = connection
        future = self._lanes[lane].send(node, request)
        sent = [(key, entry) for key, entry in items]
        future.add_callback(guarded(self._on_response, self._state), connection, sent)
        future.add_errback(guarded(self._on_request_failed, self._state), connection, sent)

    def _renewed(self) -> bool:
        """A new producer id, and every batch not acknowledged gets a new sequence from 0 (what
        the old id had appended of them may be written again: duplicates, never a loss). The
        request is not waited for: each pump (every round of the loop, every step of a flush)
        looks at its answer, so the group is served and a flush keeps its deadline however long
        the target takes; a failed request is sent again."""
        if any(self._node_in_flight.values()):
            return False
        if self._renewal is None:
            node = self._cluster.client.least_loaded_node(bootstrap_fallback=True)
            if node is None or not self._cluster.ready(node):  # ready() starts the connection
                return False
            self._renewal = self._cluster.send(node, _init_producer_id_request())
        if not self._renewal.is_done:
            return False
        renewal, self._renewal = self._renewal, None
        if renewal.failed():
            log.debug("no new producer id from the target yet: %s", renewal.exception)
            return False
        try:
            if not self._took_producer_id(renewal.value):
                log.debug("no new producer id from the target yet: error %d", renewal.value.error_code)
                return False
        except ClientFailed as fatal:
            self._state.fail(fatal)
            return False
        for log_ in self._logs.values():
            log_.next_sequence, log_.rewind, log_.careful = 0, False, True
            for entry in log_.entries:
                entry.sequence = -1
        self._renew = False
        return True

    # -- answers -----------------------------------------------------------------------

    def _on_response(self, connection: Tuple[int, int], sent, response) -> None:
        self._node_in_flight[connection] -= 1
        codes = {(topic.name, p.index): (p.error_code, p.error_message)
                 for topic in response.responses for p in topic.partition_responses}
        now_ms = time.time() * 1000.0
        for key, entry in sent:
            code, message = codes.get(key, (13, "no answer for the partition"))
            entry.in_flight = False
            if key not in self._logs or entry not in self._logs[key].entries:
                continue  # dropped meanwhile (the partition moved away)
            if code in (0, DUPLICATE_SEQUENCE):
                entry.acked = True
                self._acknowledged(key, now_ms)
            elif code == UNKNOWN_PRODUCER_ID or (code == OUT_OF_ORDER_SEQUENCE and self._first_unacked(key, entry)):
                log.warning("The target does not follow the raw producer's sequence for %s-%d (error %d): "
                            "taking a new producer id", key[0], key[1], code)
                self._renew = True
            elif code in RETRIABLE:
                self._retry(key, code)
            elif code in PRODUCER_FATAL:
                self._state.fail(self._fatal(code, f"{key[0]}-{key[1]}"))
            else:
                self._refused(key, entry, code, message)

    def _first_unacked(self, key, entry: Entry) -> bool:
        """The broker refused the partition's first batch it has not acknowledged as out of order:
        not behind a failed batch, so the broker's sequence and ours differ. Not so when a batch
        ahead of it was refused meanwhile: it went out with a sequence it no longer has, and goes
        again with the refused batch's."""
        log_ = self._logs.get(key)
        first = bool(log_) and next((e for e in log_.entries if not e.acked), None) is entry
        return first and entry.sent_sequence == entry.sequence

    def _on_request_failed(self, connection: Tuple[int, int], sent, exc) -> None:
        self._node_in_flight[connection] -= 1
        log.debug("produce request to node %s (connection %d) failed: %s", connection[1], connection[0], exc)
        self._refresh()
        for key, entry in sent:
            entry.in_flight = False
            if key in self._logs:
                self._logs[key].rewind = True

    def _retry(self, key, code: int) -> None:
        self._logs[key].rewind = True
        if code in (3, 5, 6, 74, 75):
            self._refresh()

    def _refresh(self) -> None:
        """New metadata for every connection's client: each routes by its own."""
        for lane in self._lanes:
            lane.refresh()

    def _acknowledged(self, key, now_ms: float) -> None:
        log_ = self._logs[key]
        log_.careful = False
        self._wait_log = None
        while log_.entries and log_.entries[0].acked:
            entry = log_.entries.popleft()
            self.acked_records += entry.batch.record_count
            self.queued_bytes -= entry.batch.held
            self.queued_batches -= 1
            if entry.batch.max_timestamp > 0:  # exact, per batch: the target acknowledged it now
                self._metrics.batch_acknowledged(entry.source, now_ms - entry.batch.max_timestamp)

    def _refused(self, key, entry: Entry, code: int, message) -> None:
        name = ERROR_NAMES.get(code, f"error {code}")
        where = (f"{entry.source.topic}-{entry.source.partition} offsets {entry.batch.base_offset}.."
                 f"{entry.batch.last_offset}")
        reason = f"{name}{': ' + message if message else ''}"
        if code in (29, 31) and self._errors is not None:
            from confluent_kafka import KafkaError

            reason = str(self._errors.not_authorized(KafkaError(code), topic=key[0]))
        text = (f"Error when sending a batch of {entry.batch.record_count} records from {where} to "
                f"topic {key[0]} partition {key[1]}: {reason}")
        self._metrics.dropped_many(entry.batch.record_count)
        if self._abort or self._state.failed:
            if self._state.fail(SendFailed(text)):
                log.info("Closing producer due to send failure.")
            return
        log.error("%s (dropped; --abort.on.send.failure is false)", text)
        log_ = self._logs[key]
        log_.entries.remove(entry)
        self.queued_bytes -= entry.batch.held
        self.queued_batches -= 1
        # The target did not append it: the batches behind it take its sequences.
        sequence = entry.sequence
        for later in log_.entries:
            if later.sequence >= 0:
                later.sequence = sequence
                sequence = (sequence + later.batch.record_count) % _SEQUENCE_WRAP
        log_.next_sequence = sequence
        log_.rewind = True

    def _fatal(self, code: int, what: str) -> ClientFailed:
        if code == 31 and self._errors is not None:
            from confluent_kafka import KafkaError

            return self._errors.not_authorized(KafkaError(code))
        return ClientFailed(f"the target cluster ({self._cluster.bootstrap}) refused the raw producer "
                            f"for {what}: {ERROR_NAMES.get(code, f'error {code}')}")

    # -- waiting -----------------------------------------------------------------------

    def pending(self) -> int:
        """Batches not acknowledged yet."""
        return self.queued_batches

    def unacknowledged_records(self) -> int:
        """Records of the batches not acknowledged yet (read by the metrics' thread: a copy of
        each partition's queue, which the stream's thread changes)."""
        return sum(entry.batch.record_count for log_ in list(self._logs.values()) for entry in list(log_.entries)
                   if not entry.acked)

    def drop_source(self, source: TopicPartition) -> None:
        """Forget the batches of a source partition (revoked or lost) not acknowledged yet, in
        every target partition a handler sent them to; the others' stay queued. The target's
        sequence for those partitions is unknown now: a new producer id renumbers what is left."""
        for log_ in self._logs.values():
            gone = [entry for entry in log_.entries if entry.source == source]
            if gone:
                self.queued_bytes -= sum(entry.batch.held for entry in gone)
                self.queued_batches -= len(gone)
                log_.entries = deque(entry for entry in log_.entries if entry.source != source)
                self._renew = True

    def flush(self, deadline: Optional[float], partitions=None) -> bool:
        """Drive the network until every queued batch (of ``partitions``, target (topic,
        partition) pairs, if given) is acknowledged. False when the deadline came first or a
        fatal failure was recorded: then nothing may be committed."""
        def unacknowledged() -> bool:
            keys = self._logs if partitions is None else partitions
            return any(self._logs.get(key) and self._logs[key].entries for key in keys)

        while unacknowledged():
            if self._state.failed:
                return False
            if deadline is None:
                deadline = self._state.deadline  # set once a stop was asked for
            if deadline is not None and time.monotonic() >= deadline:
                log.warning("%d batches not acknowledged by the target before the deadline; their offsets "
                            "are not committed", self.pending())
                return False
            if self._wait_log is None:
                self._wait_log = waiting.WaitLog()
            if self._wait_log.due():
                log.warning("waiting for the target to acknowledge %d batches (%d bytes); offsets are committed "
                            "only after it does", self.pending(), self.queued_bytes)
            self.pump()
            step = 100 if deadline is None else max(0, min(100, int((deadline - time.monotonic()) * 1000)))
            self._net.poll(timeout_ms=step)
            waiting.serve()
        return not self._state.failed


def _init_producer_id_request():
    from kafka.protocol.producer import InitProducerIdRequest

    return InitProducerIdRequest(transactional_id=None, transaction_timeout_ms=60000, producer_id=-1,
                                 producer_epoch=-1, max_version=4)
