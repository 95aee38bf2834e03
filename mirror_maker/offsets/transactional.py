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
import threading
import time
import warnings
import zlib
from typing import Callable, Dict, Iterable, List, NamedTuple, Optional

import confluent_kafka
from confluent_kafka import KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition

from ..clients.committed import read_committed_offsets
from ..errors import ClientFailed
from ..ops.log import librdkafka_logger
from ..records import TopicPartition

log = logging.getLogger("mirror_maker.checkpoint")

#: How long a transactional call may take. Normally milliseconds, and seconds while a coordinator
#: moves; one that does not return by then leaves its producer to a new one.
TRANSACTION_TIMEOUT_S = 15.0
#: send_offsets_to_transaction's own bound: librdkafka answers in milliseconds, or in seconds while
#: the group coordinator loads, but ignores the call's timeout
#: (https://github.com/confluentinc/librdkafka/issues/5456) and waits for ever once the coordinator
#: it cached left the cluster's metadata, as each node of a rolling restart does (/5511): a short
#: bound keeps that stall short. Each call that timed out doubles the next one's bound, up to
#: TRANSACTION_TIMEOUT_S, so that a target merely slow to answer does not abort every transaction.
OFFSETS_TIMEOUT_S = 5.0
#: A fence (init_transactions with another's id) waits this long for a coordinator that loads.
FENCE_TIMEOUT_S = 60.0
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


class ProducerUnusable(TransactionAborted):
    """The transaction is gone and its producer cannot go on: the target's coordinator aborted
    it and bumped the epoch (it stayed open past transaction.timeout.ms, e.g. through an outage),
    or a transactional call did not return in time. A new producer under the same
    transactional.id takes its place, from the last commit, once ``settle()`` (if any) returned."""

    def __init__(self, message: str, settle: Optional[Callable[[], None]] = None) -> None:
        super().__init__(message)
        #: What must end before a new producer starts (an abort still going on), or None.
        self.settle = settle


class TransactionStuck(Exception):
    """A transactional call did not return within its deadline."""


class TargetOffsets:
    """The target's record of where mirroring resumes: its offsets group, read and described.

    A group's offsets must name a topic its cluster has (Kafka 4's group coordinator refuses the
    others: UNKNOWN_TOPIC_OR_PARTITION), so a source partition's offset is kept under its target
    topic (``target_of``: the replication policy's name), with the source partition's number."""

    def __init__(self, producer_conf: Dict[str, str], group: str, client_id: str,
                 target_of: Callable[[str], str] = lambda topic: topic) -> None:
        conf = {k: v for k, v in producer_conf.items() if k not in _CONSUMER_ONLY}
        conf.update({"group.id": group, "client.id": client_id, "enable.auto.commit": False,
                     "logger": librdkafka_logger(client_id)})
        self.group = group
        self._conf = conf
        self._target_of = target_of
        self._sources: Dict[str, str] = {}  # target topic -> the source topic kept under it
        self._consumer = confluent_kafka.Consumer(conf)  # never subscribes: the group stays memberless
        self._peeking = None  # the same, read_uncommitted: see ``committed``

    def key(self, tp: TopicPartition) -> TopicPartition:
        """Where ``tp``'s offset is kept in the group: its target topic, the same partition."""
        target = self._target_of(tp.topic)
        known = self._sources.setdefault(target, tp.topic)
        if known != tp.topic:
            raise ClientFailed(f"--exactly.once keeps each source topic's offsets under its target topic, and "
                               f"{known} and {tp.topic} both go to {target}: give them target topics of their own")
        return TopicPartition(target, tp.partition)

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
        writers to fence: a writer killed between its offsets and its commit would hold a
        stable read until its transaction times out."""
        keys = {self.key(tp): tp for tp in tps}
        if not keys:
            return {}
        consumer = self._consumer if stable else self._peek()
        answer = read_committed_offsets(consumer, [KafkaTopicPartition(key.topic, key.partition) for key in keys],
                                        timeout_s)
        return {keys[TopicPartition(tp.topic, tp.partition)]: Committed(tp.offset, tp.metadata or None)
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
    :class:`TransactionAborted` after aborting it (a record the target refused in it aborts it
    too). Every call has a deadline of its own. A fence is fatal when another producer took the
    transactional.id over; when the coordinator itself aborted the transaction and bumped the
    epoch, :class:`ProducerUnusable` says the producer is to be replaced (``use``).
    ``sink`` hears how each transaction ended, and holds the refusals and fatal errors.
    """

    makes_visible = True

    def __init__(self, producer, target: TargetOffsets, source_consumer, transactional_id: str, sink,
                 states=None, wait: Callable[[float], bool] = lambda s: bool(time.sleep(s))) -> None:
        """``wait(seconds)``: sleep, True if a stop came (the run's ``RunState.wait``)."""
        self._producer = producer  # the confluent transactional producer
        self._target = target
        self._source = source_consumer
        self._transactional_id = transactional_id
        self._sink = sink
        #: Who holds the transactional.id now, after a fence (``transaction_states``).
        self._states = states
        self._wait = wait
        self._offsets_timeout = OFFSETS_TIMEOUT_S

    def use(self, producer) -> None:
        """A new producer takes the place of one that became unusable."""
        self._producer = producer

    def commit(self, offsets: Dict[TopicPartition, int], deadline: Optional[float] = None) -> Dict[TopicPartition, int]:
        if self._sink.fatal is not None:
            raise self._unusable(self._sink.fatal)
        if self._sink.refusals:
            self.abort()
            raise TransactionAborted(self._sink.refusals[0])
        # The metadata names the writer, so that a later owner of a partition can fence it.
        request = [KafkaTopicPartition(key.topic, key.partition, off, metadata=self._transactional_id)
                   for key, off in ((self._target.key(tp), off) for tp, off in offsets.items())]
        started = time.monotonic()
        timeout = TRANSACTION_TIMEOUT_S if deadline is None else max(0.5, deadline - started)
        try:
            if request:
                self._send_offsets(request, min(timeout, self._offsets_timeout))
        except KafkaException as exc:
            self._failed(exc, "commit")
        self._commit_transaction(started + timeout)
        self._sink.transaction_ended(committed=True)
        self.begin()
        if request:
            try:  # for lag monitoring on the source: best effort
                self._source.commit(offsets=[KafkaTopicPartition(tp.topic, tp.partition, off)
                                             for tp, off in offsets.items()], asynchronous=True)
            except KafkaException as exc:
                log.debug("best-effort commit to the source group failed: %s", exc)
        return dict(offsets)

    def _send_offsets(self, request: List[KafkaTopicPartition], timeout_s: float) -> None:
        """The offsets into the open transaction, within ``timeout_s`` (see OFFSETS_TIMEOUT_S: a
        timeout lengthens the next call's bound, an answer in time resets it)."""
        try:
            self._call("send_offsets_to_transaction", self._producer.send_offsets_to_transaction, timeout_s,
                       request, self._target.group_metadata(), timeout_s)
        except (KafkaException, ProducerUnusable) as exc:
            if isinstance(exc, ProducerUnusable) or exc.args[0].code() == confluent_kafka.KafkaError._TIMED_OUT:
                self._offsets_timeout = min(2 * self._offsets_timeout, TRANSACTION_TIMEOUT_S)
            raise
        self._offsets_timeout = OFFSETS_TIMEOUT_S

    def _commit_transaction(self, until: float) -> None:
        """commit_transaction, resumed after a retriable error until ``until``: librdkafka goes on
        committing in the background after a timeout, refuses an abort meanwhile (_CONFLICT), and
        the commit may still go through. One not confirmed in time leaves the producer unusable,
        with the outcome for the target to say (the stream reads back the offsets it holds)."""
        while True:
            left = max(0.5, until - time.monotonic())
            try:
                self._call("commit_transaction", self._producer.commit_transaction, left, left)
                return
            except KafkaException as exc:
                error = exc.args[0]
                if error.fatal() or error.txn_requires_abort() or not error.retriable():
                    self._failed(exc, "commit")
                if time.monotonic() >= until:
                    raise ProducerUnusable(f"the transaction's commit was not confirmed in time ({error.str()}): "
                                           f"whether it committed is read back from the target") from None
                time.sleep(COMMIT_RESUME_S)

    def begin(self) -> None:
        """Open the next transaction (a local step: a producer that cannot is replaced). A fatal
        error the producer holds is served first: begin_transaction keeps the GIL while it waits
        for librdkafka's main thread, and may wait for ever once the producer is fenced
        (https://github.com/confluentinc/librdkafka/issues/4420), which stops every thread. This
        narrows the window (a fatal error arriving after the serve still can), and the stop
        watchdog bounds what is left."""
        self._sink.serve()
        if self._sink.fatal is not None:
            raise self._unusable(self._sink.fatal)
        try:
            self._producer.begin_transaction()
        except KafkaException as exc:
            if exc.args[0].fatal():
                raise self._unusable(exc.args[0]) from None
            raise ProducerUnusable(f"no new transaction could begin: {exc.args[0].str()}") from None

    def abort(self, timeout_s: float = TRANSACTION_TIMEOUT_S) -> None:
        """Abort the open transaction and open the next. An abort that does not complete (the
        target away) leaves the producer unusable, and goes on in librdkafka's background: it
        is finished first (``finish_abort``), then a new producer takes its place."""
        producer = self._producer
        try:
            self._call("abort_transaction", producer.abort_transaction, timeout_s, timeout_s)
        except KafkaException as exc:
            if exc.args[0].fatal():
                raise self._unusable(exc.args[0]) from None
            raise ProducerUnusable(f"the transaction could not be aborted: {exc.args[0].str()}",
                                   settle=lambda: self.finish_abort(producer)) from None
        self._sink.transaction_ended(committed=False)
        self.begin()

    def finish_abort(self, producer) -> None:
        """Resume an abort that timed out until it ends (or a stop), then close its producer. Left
        going on beside a new producer, it fenced that one: an abort whose records were purged
        in flight bumps the epoch (InitProducerId with the old epoch), and the coordinator takes
        such a request for the id's owner while a transaction is open, aborting the new one's."""
        log.info("%s: finishing the abort that timed out before a new producer starts", self._transactional_id)
        while True:
            try:
                self._call("abort_transaction", producer.abort_transaction, TRANSACTION_TIMEOUT_S,
                           TRANSACTION_TIMEOUT_S)
                break
            except ProducerUnusable:  # hung: nothing more this process can do about it
                return
            except KafkaException as exc:
                if exc.args[0].fatal() or not exc.args[0].retriable():
                    break  # fenced or refused: it sends nothing more
                if self._wait(ABORT_RESUME_S):
                    return
        close_unused(producer, self._transactional_id)

    def close(self, deadline: Optional[float]) -> None:
        """Abort what is still open (a stream that failed, or stopped before its final commit), so
        that read_committed readers of the target do not wait for transaction.timeout.ms; then
        forget the target's offsets group."""
        try:
            timeout = 5.0 if deadline is None else max(0.1, min(5.0, deadline - time.monotonic()))
            self._call("abort_transaction", self._producer.abort_transaction, timeout, timeout)
        except (KafkaException, TransactionStuck, ProducerUnusable) as exc:
            log.debug("abort_transaction at close: %s", exc)  # nothing open, fenced, or the target away
        finally:
            self._target.close()

    def _call(self, name: str, call, timeout_s: float, *args):
        """A transactional call that cannot outlast its timeout: librdkafka's can wait on a broker
        handle it replaced (https://github.com/confluentinc/librdkafka/issues/5456)."""
        try:
            return bounded(call, args, timeout_s + CALL_GRACE_S, name)
        except TransactionStuck as stuck:
            raise ProducerUnusable(str(stuck)) from None

    def _failed(self, exc: KafkaException, what: str) -> None:
        error = exc.args[0]
        if error.fatal():
            raise self._unusable(error) from None
        if error.txn_requires_abort() or error.retriable():
            self.abort()
            raise TransactionAborted(f"the transaction's {what} failed: {error.str()}") from None
        raise ClientFailed(f"transaction {what} failed: {error.str()}")

    def _unusable(self, error) -> Exception:
        """What a fatal error of the producer means: a fence by another live writer (the run stops
        with one line), or the coordinator's own abort of a transaction that outlived its timeout
        (the producer is replaced). Only the coordinator can say: it shows an abort as the last
        thing that happened to the transactional.id, where a new owner would show its own state."""
        if error.code() == confluent_kafka.KafkaError.INVALID_TXN_STATE:
            # Seen when the coordinator aborted the transaction itself in a target outage and
            # our end of it arrived in the middle: a new producer settles it (no other writer
            # shows this way, a fence is one of _FENCED_CODES).
            return ProducerUnusable(f"the target's transaction coordinator had the transaction of "
                                    f"{self._transactional_id} in another state ({error.str()})")
        if error.code() not in _FENCED_CODES:
            return fenced_or_fatal(error, self._transactional_id)
        if self._aborted_by_the_coordinator():
            return ProducerUnusable(f"the target's transaction coordinator aborted the open transaction of "
                                    f"{self._transactional_id} and bumped its epoch ({error.str()}): it stayed "
                                    f"open longer than transaction.timeout.ms")
        return fenced_or_fatal(error, self._transactional_id)

    def _aborted_by_the_coordinator(self) -> bool:
        """Whether the transactional.id stays aborted with nobody after us. A new owner's start
        passes through the same abort (its InitProducerId aborts our open transaction first) and
        leaves it Empty or Ongoing a moment later: taken for the coordinator's own abort, our new
        producer would fence it back, and the two would take the id from each other for ever.
        A coordinator that cannot answer yet (it loads its log after an outage) is asked again
        until ABORT_WAIT_S: only one that never answers, or shows an owner, makes it a fence.
        Without a way to ask (no kafka-python) nothing says it was an abort."""
        if self._states is None:
            return False
        deadline = time.monotonic() + ABORT_WAIT_S
        previous = None
        while True:
            state = self._state_of(self._transactional_id)
            if state in _OWNED_STATES:
                return False  # a new owner: a fence
            if state == previous == "CompleteAbort":
                return True
            if state is not None:
                previous = state
            if time.monotonic() >= deadline or self._wait(ABORT_SETTLE_S):
                # Still aborting, or unknown since an abort was seen (a target that is away), or
                # a stop: a new producer's start waits for the abort, and a fence at its first
                # transaction stops the run. Never answered at all: nothing says it was an abort.
                return previous is not None

    def _state_of(self, transactional_id: str) -> Optional[str]:
        """The coordinator's state of ``transactional_id``, asked again a few times while it
        cannot answer; None when it did not, or a stop came."""
        if self._states is None:
            return None
        for attempt in range(DESCRIBE_ATTEMPTS):
            if attempt and self._wait(DESCRIBE_RETRY_S):
                return None
            state = self._states(transactional_id)
            if state is not None:
                return state
        return None

    def fenced_or_fatal(self, exc: KafkaException) -> ClientFailed:
        return fenced_or_fatal(exc.args[0], self._transactional_id)


#: A transactional call gets this long past its own timeout before it counts as stuck.
CALL_GRACE_S = 2.0
#: A commit_transaction that returned a retriable error is resumed after this; an abort, after ABORT_RESUME_S.
COMMIT_RESUME_S = 0.1
ABORT_RESUME_S = 1.0
#: How often the coordinator is asked whose fence it was, and how far apart, before a fence by
#: another writer is concluded from no answer.
DESCRIBE_ATTEMPTS = 3
DESCRIBE_RETRY_S = 2.0
#: An abort is the coordinator's own only if the transactional.id is CompleteAbort twice this far
#: apart (a new owner's start moves it on within milliseconds of its abort), or still aborting
#: after ABORT_WAIT_S.
ABORT_SETTLE_S = 1.0
ABORT_WAIT_S = 30.0
#: What a transactional.id shows once a producer owns it after the abort (or it expired).
_OWNED_STATES = frozenset({"Empty", "Ongoing", "PrepareCommit", "CompleteCommit", "Dead"})


def bounded(call, args, timeout_s: float, name: str, slow_after_s: Optional[float] = None,
            slow: Optional[Callable[[float], None]] = None):
    """``call(*args)`` in a thread of its own, waited for ``timeout_s`` at most: a call that does
    not return by then is left behind (its producer is not used again) and TransactionStuck raised.
    ``slow(slow_after_s)`` is called once if it has not returned after ``slow_after_s``: a long
    wait is announced while it lasts, not only when it ends."""
    outcome = {}
    client = getattr(call, "__self__", None)
    _calling(client, +1)

    def run() -> None:
        try:
            outcome["value"] = call(*args)
        except BaseException as exc:  # handed to the caller's thread
            outcome["error"] = exc
        finally:
            _calling(client, -1)

    thread = threading.Thread(target=run, name=f"mirror-maker-{name}", daemon=True)
    thread.start()
    if slow is not None and slow_after_s is not None and slow_after_s < timeout_s:
        thread.join(slow_after_s)
        if thread.is_alive():
            slow(slow_after_s)
        thread.join(timeout_s - slow_after_s)
    else:
        thread.join(timeout_s)
    if thread.is_alive():
        raise TransactionStuck(f"{name} did not return within {timeout_s:.0f} s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome.get("value")


#: Calls of ``bounded`` still inside each client (by id): a client with one left behind is closed
#: only once it returns (close() would wait for it, and its caller with it).
_IN_CALL: Dict[int, int] = {}
_IN_CALL_LOCK = threading.Lock()
#: How long the close of a producer that is not used again may take before it is left behind.
CLOSE_TIMEOUT_S = 10.0
# confluent-kafka's close() warns when it finds no transaction to abort (an init that timed out);
# setup.cfg ignores it as well, where pytest turns warnings into errors.
warnings.filterwarnings("ignore", message="Producer abort_transaction failed during close", category=RuntimeWarning)


#: Clients not used again that a call was still inside: closed as that call returns.
_CLOSE_ON_RETURN: Dict[int, str] = {}


def _calling(client, step: int) -> None:
    if client is None:
        return
    with _IN_CALL_LOCK:
        left = _IN_CALL.get(id(client), 0) + step
        if left > 0:
            _IN_CALL[id(client)] = left
            return
        _IN_CALL.pop(id(client), None)
        name = _CLOSE_ON_RETURN.pop(id(client), None)
    if name is not None:
        close_unused(client, name)


def close_unused(producer, name: str) -> None:
    """Close a transactional producer whose start failed (or a fence's). An init_transactions
    that timed out goes on in librdkafka's background (the call is resumable) for as long as its
    handle lives, which the garbage collector decides: one that got through after the producer
    started in its place had bumped the epoch under it, and that one stopped as if another mirror
    had taken its transactional.id over. A handle a hung call is still inside is closed when that
    call returns."""
    with _IN_CALL_LOCK:
        busy = _IN_CALL.get(id(producer), 0) > 0
        if busy:
            _CLOSE_ON_RETURN[id(producer)] = name
    if busy:
        log.info("%s: a call into its old producer has not returned; that producer is closed when it does", name)
        return
    try:
        bounded(producer.close, (), CLOSE_TIMEOUT_S, "close")
    except TransactionStuck:
        log.info("%s: closing its old producer did not return within %.0f s", name, CLOSE_TIMEOUT_S)
    except Exception as exc:  # closed already, or a close that failed: nothing more to stop
        log.debug("closing %s's old producer: %s", name, exc)


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


def fence(producer_conf: Dict[str, str], transactional_id: str, timeout_s: float = FENCE_TIMEOUT_S) -> None:
    """Fence a transactional.id this process does not run: init_transactions with it aborts its
    open transaction and bumps its epoch, so its holder (if alive) cannot commit again."""
    conf = {k: v for k, v in producer_conf.items() if k != "client.id"}
    conf.update({"transactional.id": transactional_id, "client.id": f"fence-{transactional_id}",
                 "logger": librdkafka_logger(f"fence-{transactional_id}")})
    # librdkafka: a record's delivery timeout must fit in its transaction's (none is sent here).
    conf["message.timeout.ms"] = str(min(int(conf.get("message.timeout.ms", 300000)),
                                         int(conf.get("transaction.timeout.ms", 60000))))
    producer = confluent_kafka.Producer(conf)
    try:
        producer.init_transactions(timeout_s)
    except KafkaException as exc:
        raise ClientFailed(f"cannot fence {transactional_id}, the last writer of partitions this "
                           f"stream now owns: {exc.args[0].str()}") from None
    finally:
        close_unused(producer, f"fence-{transactional_id}")


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
