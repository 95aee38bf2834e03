"""Offset syncs (MirrorMaker 2's ``OffsetSyncWriter``): pairs (source offset -> target offset) of
mirrored records, per source partition, in MirrorMaker 2's offset-syncs topic, from which
checkpoints translate consumer groups' offsets.

Where the target offsets come from, at no cost to the hot path: the mirror keeps the source
partition (MirrorMaker 2's mapping, required for offset syncs) and is the only writer of its target
partition, so its records land there contiguously. The thread already notes each run of records
(first and last source offset, count) once per batch; after a flush, when every record before it
is acknowledged, one ListOffsets on the target gives the partition's end, and the target offset of
every run's first and last record follows by counting back. Inside a run without gaps (no
compaction, transaction markers or filtered records) every record's target offset is known.
Syncs are placed where MirrorMaker 2 places them (the first record, one whenever the target
offset moved ``offset.lag.max`` past the last sync, the newest record each time) and on both
sides of every discontinuity: the last record before a gap and the first after it, a run whose
records are not one target record each (a handler filtered some or sent some twice) at its first
and last record, both with its first target offset. So two consecutive syncs of one unbroken
stretch with equal source and target spans hold a contiguous stretch between them: the later one
says so in a header (``formats.CONTINUES_HEADER``), and ``checkpoints.OffsetSyncStore``
interpolates exactly there only; any other pair (a gap, such a run, a sync lost, a restart or
another owner in between, syncs of Kafka's MirrorMaker 2) stays conservative.
If the end does not match the count (another writer, or records dropped with
``--abort.on.send.failure false``), no sync is written for that stretch: a wrong sync would
translate a group past records it has not read.

Exactly-once: each committed transaction leaves one commit marker after its records in every
partition it wrote, so the end is read once the markers are written (the last stable offset
equals the high watermark) and counts one offset more per partition written; an aborted
transaction's records and marker are not counted, so the partition's next stretch starts from
the end read after it.
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import Future
from typing import Callable, Dict, Iterable, List, Optional, Tuple

import confluent_kafka
from confluent_kafka import IsolationLevel, KafkaException
from confluent_kafka import TopicPartition as KafkaTopicPartition
from confluent_kafka.admin import NewTopic, OffsetSpec

from ..callbacks import client_callback
from ..clients.admin import REQUEST_TIMEOUT_S
from ..ops.log import librdkafka_logger
from ..records import TopicPartition
from .formats import CONTINUES_HEADER, OffsetSync, decode_offset_sync, encode_continues, encode_offset_sync

log = logging.getLogger("mirror_maker.replication")

#: How long an assignment waits for the target's end offsets (a topic just created), asking
#: again after a step that doubles up to its most: a topic created a moment ago is known to the
#: partition leaders tens of milliseconds later (a fixed 0.2 s step held the first record that long).
ASSIGN_WAIT_S = 10.0
ASSIGN_RETRY_S = 0.02
ASSIGN_RETRY_MAX_S = 0.2
#: How long a transactional mirror waits for the markers of its last transaction to be written
#: (the coordinator writes them after the commit returns) before it skips a stretch's syncs.
MARKERS_WAIT_S = 5.0
#: With checkpoints on, a stream commits (flush, then syncs) at least this often, or as often as
#: checkpoints are written if that is rarer, whatever --offset.commit.interval.ms says: syncs
#: follow the records (MirrorMaker 2 writes one as its record is acknowledged), so that a
#: checkpoint is not held back by the commit interval (60 s in the dedicated mode). An
#: exactly-once mirror's records are acknowledged by its transaction's commit: the same holds.
MIN_SYNC_INTERVAL_MS = 1000

class PartitionSyncs:
    """One source partition's runs since the last flush, and where its syncs stand."""

    def __init__(self, base: Optional[int]) -> None:
        #: The target offset the partition's next mirrored record gets (None: not known).
        self.base = base
        #: (first source offset, last, target records, exact: one target record each)
        self.runs: List[Tuple[int, int, int, bool]] = []
        #: The last planned record's source offset and the sync that closes a gap after it.
        self.previous_upstream: Optional[int] = None
        self._closing: Optional[Tuple[int, int]] = None
        #: The next record starts a stretch of its own (after a run with gaps or not one target
        #: record per record, or after a transaction's commit marker).
        self._discontinuous = False
        self.last_synced: Optional[Tuple[int, int]] = None
        #: For each sync of the last plan, the sync before it when the stretch between them is
        #: contiguous (None: not known to be): written with the sync (``CONTINUES_HEADER``).
        self.chain: List[Optional[Tuple[int, int]]] = []

    def add(self, first: int, last: int, count: int, exact: bool = True) -> None:
        self.runs.append((first, last, count, exact))

    def reanchor(self) -> None:
        """The end could not be read: this stretch gets no syncs; the next flush starts afresh."""
        self.runs, self.base = [], None
        self._restart()

    def _restart(self) -> None:
        """A stretch without syncs: the next record gets a sync of its own, nothing before it
        closes a gap, and nothing after it continues a sync before it."""
        self.previous_upstream, self._closing, self.last_synced = None, None, None

    def _emit(self, syncs: List[Tuple[int, int]], upstream: int, downstream: int) -> None:
        """One sync, and whether it continues the one before: in a stretch this writer synced
        without a break, syncs stand on both sides of every discontinuity, so equal spans mean
        contiguous; across a break (a restart, another writer's records), spans can be equal by
        chance (say 5 offsets compacted away and 5 foreign records), so nothing continues there."""
        if self.last_synced == (upstream, downstream):
            return
        before = self.last_synced
        contiguous = before is not None and upstream - before[0] == downstream - before[1]
        syncs.append((upstream, downstream))
        self.chain.append(before if contiguous else None)
        self.last_synced = (upstream, downstream)

    def plan(self, end: int, lag_max: int, marker: bool = False) -> Optional[List[Tuple[int, int]]]:
        """The syncs (upstream, downstream) of the runs, given the target partition's end once
        they are all acknowledged (``marker``: and a transaction's commit marker after them);
        None (and nothing written) when the end does not add up."""
        count = sum(c for _f, _l, c, _e in self.runs)
        if self.base is None:
            self.runs, self.base = [], end
            return []
        if self.base + count + (1 if marker and count else 0) != end:
            runs, self.runs, self.base = self.runs, [], end
            self._restart()
            return None if runs else []  # records not ours, and no run of ours to sync: nothing to say
        syncs: List[Tuple[int, int]] = []
        self.chain = []

        def emit(upstream: int, downstream: int) -> None:
            self._emit(syncs, upstream, downstream)

        downstream = self.base
        for first, last, records, exact in self.runs:
            contiguous = exact and last - first + 1 == records
            breaks = self._discontinuous or not contiguous or (
                self.previous_upstream is not None and first - self.previous_upstream != 1)
            if breaks and self._closing is not None:
                emit(*self._closing)  # the last record before the break: the stretch up to it is contiguous
            if self.last_synced is None or breaks or downstream - (self.last_synced[1] + 1) >= lag_max:
                emit(first, downstream)
            if contiguous:  # every record's target offset is known
                while True:
                    due = self.last_synced[1] + 1 + lag_max
                    if due > downstream + records - 1:
                        break
                    emit(first + (due - downstream), due)
                self._closing = (last, downstream + records - 1)
            elif exact:  # gaps inside (compaction, markers): only its ends are known
                emit(last, downstream + records - 1)
                self._closing = None
            else:
                # Records sent several times, or some filtered: where each one's target records
                # start is not known, so its last record maps to the run's first target record,
                # which a translation never passes (it reads some again, it skips none).
                emit(last, downstream)
                self._closing = None
            self._discontinuous = not contiguous
            self.previous_upstream = last
            downstream += records
        if self._closing is not None and self.runs:
            emit(*self._closing)  # the newest record, as MirrorMaker 2 at each commit
        if marker and count:
            self._discontinuous = True  # the commit marker takes the next target offset
        self.runs, self.base = [], end
        return syncs


class OffsetSyncsTopic:
    """The offset-syncs topic and the producer that writes it (one per process): created when
    missing as MirrorMaker 2 creates it, one partition, compacted."""

    def __init__(self, name: str, cluster_conf: Dict[str, str], admin, replication_factor: Optional[int],
                 metrics=None) -> None:
        """``cluster_conf``: the connection settings of the topic's cluster; ``metrics``: the run's
        ``MirrorMetrics`` (offset syncs written), if any."""
        self.name = name
        self._metrics = metrics
        self._admin = admin
        self._replication_factor = replication_factor
        conf = dict(cluster_conf)
        # Idempotent: a sync retried must not land after the ones behind it (the reader takes
        # them in order).
        conf.update({"client.id": "mirror-offset-syncs", "logger": librdkafka_logger("mirror-offset-syncs"),
                     "linger.ms": 100, "enable.idempotence": True})
        self._producer = confluent_kafka.Producer(conf)
        self._created = False
        #: Asked for at start, answered by the first write: asked only then, the first commit
        #: (often the stop's) would wait for the topic's creation.
        self._creation = request_topic(admin, name, replication_factor)
        self._lock = threading.Lock()

    def write(self, syncs: Iterable[Tuple[OffsetSync, Optional[Tuple[int, int]]]]) -> None:
        """Each sync, with the sync it continues (``PartitionSyncs.chain``) in a header of ours:
        MirrorMaker 2 reads only the key and value."""
        with self._lock:
            if not self._created:
                creation = self._creation or request_topic(self._admin, self.name, self._replication_factor)
                self._creation = None  # a refusal: asked again at the next write
                topic_ready(creation, self.name)
                self._created = True
            count = 0
            for sync, continues in syncs:
                key, value = encode_offset_sync(sync)
                headers = None if continues is None else [(CONTINUES_HEADER, encode_continues(continues))]
                self._produce(key, value, headers)
                count += 1
            self._producer.poll(0)
            if self._metrics is not None:
                self._metrics.offset_syncs_written(count)

    @client_callback
    def _delivered(self, err, msg) -> None:
        if err is not None:  # the next sync does not continue from it: nothing is interpolated across
            sync = decode_offset_sync(msg.key(), msg.value())
            log.warning("An offset sync of %s-%d was not written (%s): checkpoints stay conservative until the "
                        "next ones", sync.topic, sync.partition, err.str())

    def _produce(self, key: bytes, value: bytes, headers) -> None:
        while True:
            try:
                self._producer.produce(self.name, value, key, 0, on_delivery=self._delivered, headers=headers)
                return
            except BufferError:
                self._producer.poll(0.1)

    def close(self, deadline: float) -> None:
        """Flush what was written, until the stop's ``deadline`` (``time.monotonic()``)."""
        left = self._producer.flush(max(0.0, deadline - time.monotonic()))
        if left:
            log.warning("%d offset syncs were not written before the stop", left)


def ensure_topic(admin, name: str, replication_factor: Optional[int], compacted: bool = True) -> None:
    """One partition, compacted: MirrorMaker 2's internal topics (offset syncs, checkpoints,
    heartbeats). An existing topic is used as it is."""
    topic_ready(request_topic(admin, name, replication_factor, compacted), name)


def request_topic(admin, name: str, replication_factor: Optional[int], compacted: bool = True) -> Future:
    """Ask for one of MirrorMaker 2's internal topics (see ensure_topic); ``topic_ready`` waits."""
    config = {"cleanup.policy": "compact"} if compacted else {}
    return admin.create_topics([NewTopic(name, 1, replication_factor or -1, config=config)],
                               request_timeout=REQUEST_TIMEOUT_S)[name]


def topic_ready(creation: Future, name: str) -> None:
    """The answer to ``request_topic``: created, or there already; else its KafkaException."""
    try:
        creation.result()
        log.info("Created %s (1 partition, compacted)", name)
    except KafkaException as exc:
        if exc.args[0].code() != confluent_kafka.KafkaError.TOPIC_ALREADY_EXISTS:
            raise


class OffsetSyncWriter:
    """One mirror thread's offset syncs: its partitions' runs, planned after each flush."""

    def __init__(self, topic: OffsetSyncsTopic, target_admin, remote, lag_max: int, state,
                 transactional: bool = False, checkpoints_interval_s: Optional[float] = None,
                 fresh: Callable[[str, int], bool] = lambda topic, partition: False) -> None:
        """``state``: the run's ``RunState`` (a stop ends the wait for a partition's end);
        ``transactional``: the records go in transactions (``--exactly.once``);
        ``checkpoints_interval_s``: how often checkpoints are written (None: not at all);
        ``fresh(target topic, partition)``: a partition of a topic this process just created,
        which starts at 0 (``TargetTopics.fresh``)."""
        self._fresh = fresh
        #: How often the stream commits at least, so that syncs follow the records (MIN_SYNC_INTERVAL_MS).
        self.interval_ms = (float("inf") if checkpoints_interval_s is None
                            else max(MIN_SYNC_INTERVAL_MS, checkpoints_interval_s * 1000))
        self._state = state
        self._transactional = transactional
        self._topic = topic
        self._admin = target_admin
        self._remote = remote
        self._lag_max = lag_max
        self._partitions: Dict[TopicPartition, PartitionSyncs] = {}
        self._warned = set()

    def assigned(self, tps: Iterable[TopicPartition]) -> None:
        """Before the first record of a partition goes out: where its next record will land (a
        target topic just created may take a moment to be known; without its end, the partition's
        first stretch gets no syncs)."""
        tps = list(tps)
        # Nothing to ask where the topic was created a moment ago: on a loaded cluster its leaders
        # can stay unknown to the metadata longer than the wait, and the first stretch had no syncs.
        new = {tp: 0 for tp in tps if self._fresh(self._remote(tp.topic), tp.partition)}
        for tp, end in new.items():
            self._partitions[tp] = PartitionSyncs(end)
        tps = [tp for tp in tps if tp not in new]
        ends: Dict[TopicPartition, Optional[int]] = {}
        deadline, step = time.monotonic() + ASSIGN_WAIT_S, ASSIGN_RETRY_S
        while tps:
            try:
                ends = self._ends(tps)
                break
            except KafkaException as exc:
                if time.monotonic() > deadline:
                    log.warning("Cannot read the target's end offsets (%s): offset syncs start at the next "
                                "commit", exc.args[0].str())
                    ends = {tp: None for tp in tps}
                    break
                if self._state.wait(step):  # stopping: nothing more is mirrored
                    ends = {tp: None for tp in tps}
                    break
                step = min(step * 2, ASSIGN_RETRY_MAX_S)
        for tp, end in ends.items():
            self._partitions[tp] = PartitionSyncs(end)

    def forget(self, tps: Iterable[TopicPartition]) -> None:
        for tp in tps:
            self._partitions.pop(tp, None)

    def rolled_back(self) -> None:
        """The open transaction was aborted: its runs took target offsets that hold no visible
        record, so every partition's next stretch starts from the end read after it."""
        for partition in self._partitions.values():
            partition.reanchor()

    def record(self, tp: TopicPartition, first: int, last: int, count: int, exact: bool = True) -> None:
        """Once per run of a partition's records handed to the producer (the hot path's cost):
        ``count`` target records, ``exact`` when each source record is one of them."""
        partition = self._partitions.get(tp)
        if partition is not None:
            partition.add(first, last, count, exact)

    def flushed(self, tps: Iterable[TopicPartition]) -> None:
        """Every record of ``tps`` so far is acknowledged: write their syncs."""
        busy = [tp for tp in tps if tp in self._partitions and self._partitions[tp].runs]
        if not busy:
            return
        try:
            ends = self._ends(busy)
        except KafkaException as exc:
            log.warning("Offset syncs skipped this time: cannot read the target's end offsets (%s)",
                        exc.args[0].str())
            for tp in busy:
                self._partitions[tp].reanchor()
            return
        syncs = []
        for tp in busy:
            if ends[tp] is None:  # a transaction's markers not written in time: no syncs this stretch
                self._partitions[tp].reanchor()
                continue
            planned = self._partitions[tp].plan(ends[tp], self._lag_max, marker=self._transactional)
            if planned is None:
                if tp not in self._warned:
                    self._warned.add(tp)
                    log.warning("No offset syncs for %s-%d this time: its target partition has records "
                                "this mirror did not write (another writer, or skipped records)",
                                tp.topic, tp.partition)
                continue
            chain = self._partitions[tp].chain
            syncs += [(OffsetSync(tp.topic, tp.partition, u, d), continues)
                      for (u, d), continues in zip(planned, chain)]
        if syncs:
            self._topic.write(syncs)

    def _ends(self, tps: List[TopicPartition]) -> Dict[TopicPartition, Optional[int]]:
        """The target partitions' ends; for a transactional mirror, once no transaction is open
        in them (None for one whose markers did not come within MARKERS_WAIT_S)."""
        if not self._transactional:
            return self._read_ends(tps)
        # Not cut short by a stop: the stop's last commit's syncs are worth its milliseconds.
        deadline, step = min(time.monotonic() + MARKERS_WAIT_S, self._state.deadline or float("inf")), ASSIGN_RETRY_S
        ends: Dict[TopicPartition, Optional[int]] = {}
        waiting = list(tps)
        while waiting:
            high = self._read_ends(waiting, IsolationLevel.READ_UNCOMMITTED)
            stable = self._read_ends(waiting, IsolationLevel.READ_COMMITTED)
            for tp in waiting:
                if stable[tp] == high[tp]:
                    ends[tp] = high[tp]
            waiting = [tp for tp in waiting if tp not in ends]
            if waiting and time.monotonic() + step > deadline:
                ends.update({tp: None for tp in waiting})
                break
            if waiting:
                time.sleep(step)
            step = min(step * 2, ASSIGN_RETRY_MAX_S)
        return ends

    def _read_ends(self, tps: List[TopicPartition], isolation=None) -> Dict[TopicPartition, int]:
        if not tps:
            return {}
        request = {KafkaTopicPartition(self._remote(tp.topic), tp.partition): OffsetSpec.latest() for tp in tps}
        by_isolation = {} if isolation is None else {"isolation_level": isolation}
        futures = self._admin.list_offsets(request, request_timeout=REQUEST_TIMEOUT_S, **by_isolation)
        by_target = {(k.topic, k.partition): f.result().offset for k, f in futures.items()}
        return {tp: by_target[(self._remote(tp.topic), tp.partition)] for tp in tps}


class SyncingCommitter:
    """A thread's committer, then its offset syncs: the checkpoint calls ``commit`` only after a
    flush, when every record so far is acknowledged, which is when syncs can be planned. A sync
    that cannot be written never holds up a commit."""

    def __init__(self, committer, writer: OffsetSyncWriter) -> None:
        self._committer = committer
        self._writer = writer

    @property
    def makes_visible(self) -> bool:
        return self._committer.makes_visible

    def commit(self, offsets, deadline=None):
        committed = self._committer.commit(offsets, deadline)
        try:
            self._writer.flushed(list(offsets))
        except KafkaException as exc:
            log.warning("Offset syncs not written this time: %s", exc.args[0].str())
        return committed
