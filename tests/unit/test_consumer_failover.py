"""Consumer failover without brokers: MirrorMaker 2's record formats, where offset syncs are
placed (MirrorMaker 2's rules, from runs of records and the target's end offset), the translation,
and the options' checks."""

import bisect
import struct

import pytest

from mirror_maker.cli.command import invoke
from mirror_maker.records import TopicPartition
from mirror_maker.replication.checkpoints import OffsetSyncStore
from mirror_maker.replication.formats import (Checkpoint, Heartbeat, OffsetSync, decode_checkpoint,
                                              decode_heartbeat, decode_offset_sync, encode_checkpoint,
                                              encode_heartbeat, encode_offset_sync)
from mirror_maker.replication.offset_syncs import PartitionSyncs
from mirror_maker.engine.state import RunState

T0 = TopicPartition("orders", 0)


def test_record_formats_are_mirror_maker_2s():
    key, value = encode_offset_sync(OffsetSync("orders", 3, 100, 42))
    assert key == b"\x00\x06orders" + struct.pack(">i", 3) and value == struct.pack(">qq", 100, 42)
    assert decode_offset_sync(key, value) == OffsetSync("orders", 3, 100, 42)
    key, value = encode_checkpoint(Checkpoint("g", "a.orders", 1, 600, 580, "meta"))
    assert key == b"\x00\x01g\x00\x08a.orders\x00\x00\x00\x01"
    assert value == struct.pack(">hqq", 0, 600, 580) + b"\x00\x04meta"  # version 0 first
    assert decode_checkpoint(key, value) == Checkpoint("g", "a.orders", 1, 600, 580, "meta")
    key, value = encode_heartbeat(Heartbeat("a", "b", 1234))
    assert key == b"\x00\x01a\x00\x01b" and value == struct.pack(">hq", 0, 1234)
    assert decode_heartbeat(key, value) == Heartbeat("a", "b", 1234)


def test_syncs_every_offset_lag_max_in_a_run_without_gaps_and_the_newest_at_each_flush():
    syncs = PartitionSyncs(base=1000)  # the target partition had 1000 records before
    syncs.add(0, 249, 250)
    assert syncs.plan(end=1250, lag_max=100) == [(0, 1000), (101, 1101), (202, 1202), (249, 1249)]
    syncs.add(250, 299, 50)
    assert syncs.plan(end=1300, lag_max=100) == [(299, 1299)]  # not due yet: only the newest


def test_a_gap_gets_a_sync_on_both_sides_and_a_run_with_gaps_inside_one_at_each_end():
    syncs = PartitionSyncs(base=0)
    syncs.add(0, 9, 10)
    syncs.add(20, 29, 10)  # 10..19 were transaction markers or compacted away
    syncs.add(30, 49, 10)  # gaps inside (raw mode's batch of a compacted topic): only its ends are known
    syncs.add(50, 54, 5)
    assert syncs.plan(end=35, lag_max=100) == [(0, 0), (9, 9), (20, 10), (29, 19), (30, 20), (49, 29),
                                               (50, 30), (54, 34)]


def test_no_sync_when_the_target_end_does_not_add_up():
    syncs = PartitionSyncs(base=0)
    syncs.add(0, 9, 10)
    assert syncs.plan(end=11, lag_max=100) is None  # another writer, or a skipped record
    syncs.add(10, 19, 10)
    assert syncs.plan(end=21, lag_max=100) == [(10, 11), (19, 20)]  # re-anchored at 11: a fresh first sync
    syncs.reanchor()
    syncs.add(20, 29, 10)
    assert syncs.plan(end=31, lag_max=100) == []  # the end could not be read before: starts again here


def test_a_transaction_s_commit_marker_follows_its_records_and_the_next_stretch_starts_after_it():
    syncs = PartitionSyncs(base=500)
    syncs.add(0, 149, 150)
    assert syncs.plan(end=651, lag_max=100, marker=True) == [(0, 500), (101, 601), (149, 649)]  # marker at 650
    assert syncs.plan(end=651, lag_max=100, marker=True) == []  # nothing written to it: no marker either
    syncs.add(150, 159, 10)
    assert syncs.plan(end=662, lag_max=100, marker=True) == [(150, 651), (159, 660)]  # after the marker too
    syncs.add(160, 169, 10)
    assert syncs.plan(end=672, lag_max=100, marker=True) is None  # an aborted transaction's offsets too


class _Ends:
    """The target's answers to ListOffsets: high watermarks, and last stable offsets that reach
    them only after ``open_for`` more reads (the markers of the last transaction)."""

    def __init__(self, high, open_for):
        self.high, self.open_for, self.reads = high, open_for, []

    def list_offsets(self, request, isolation_level, request_timeout):
        from concurrent.futures import Future
        from confluent_kafka import IsolationLevel

        self.reads.append(isolation_level)
        answers = {}
        for key in request:
            offset = self.high
            if isolation_level == IsolationLevel.READ_COMMITTED and self.open_for > 0:
                self.open_for -= 1
                offset = self.high - 11  # the open transaction's first record
            future = Future()
            future.set_result(type("Answer", (), {"offset": offset})())
            answers[key] = future
        return answers


class _Topic:
    def __init__(self):
        self.written, self.chained = [], []

    def write(self, syncs):
        for sync, continues in syncs:
            self.written.append(sync)
            self.chained.append(continues)


def test_a_transactional_writer_reads_the_end_once_the_markers_are_written():
    from mirror_maker.replication.offset_syncs import OffsetSyncWriter

    ends, topic = _Ends(high=11, open_for=2), _Topic()
    writer = OffsetSyncWriter(topic, ends, lambda name: f"a.{name}", 100, RunState(), transactional=True)
    writer.assigned([T0])  # the end when no transaction is open: 11, after two reads of 0
    writer.record(T0, 0, 9, 10)
    ends.high, ends.open_for = 22, 1
    writer.flushed([T0])
    assert [(s.upstream_offset, s.downstream_offset) for s in topic.written] == [(0, 11), (9, 20)]  # marker at 21
    writer.record(T0, 10, 19, 10)
    writer.rolled_back()  # the transaction aborted: its records hold no visible offsets
    writer.record(T0, 10, 19, 10)
    ends.high = 44
    writer.flushed([T0])
    assert len(topic.written) == 2  # the stretch after an abort starts afresh from the end
    writer.record(T0, 20, 24, 5)
    ends.high = 50
    writer.flushed([T0])
    # After the stretch without syncs, the first one continues nothing: nothing is interpolated across it.
    assert [(s.upstream_offset, s.downstream_offset) for s in topic.written[2:]] == [(20, 44), (24, 48)]
    assert topic.chained == [None, (0, 11), None, (20, 44)]


def _store(*syncs):
    """A store of ``syncs``, each saying it continues the one before (equal spans are then
    contiguous), as one writer's unbroken stretch does."""
    store = OffsetSyncStore.__new__(OffsetSyncStore)
    store._syncs, store.reset = {}, set()
    before = None
    for upstream, downstream in syncs:
        store.add(T0, upstream, downstream, before)
        before = (upstream, downstream)
    return store


def _planned(store, syncs: PartitionSyncs, planned) -> None:
    """What a writer planned, as the store reads it from the topic (each with its header)."""
    for (upstream, downstream), continues in zip(planned or [], syncs.chain):
        store.add(T0, upstream, downstream, continues)


def test_translation_is_exact_in_a_contiguous_stretch_and_mirror_maker_2s_elsewhere():
    store = _store((100, 10), (200, 110), (300, 150), (301, 151))
    assert store.translate(T0, 200) == 110  # exactly a sync's offset
    assert store.translate(T0, 150) == 60  # equal spans: a contiguous stretch, interpolated
    assert store.translate(T0, 250) == 111  # a gap or a run not one-to-one: the conservative rule
    assert store.translate(T0, 302) == 152  # past the newest sync: never ahead of what is mirrored
    assert store.translate(T0, 99) is None  # older than every sync
    assert store.translate(TopicPartition("other", 0), 5) is None
    store.add(T0, 150, 500)  # mirrored again from 150 (a restart): later syncs are dropped
    assert store.translate(T0, 250) == 501 and store.translate(T0, 120) == 11
    assert _store((0, 10), (5, 10)).translate(T0, 3) == 10  # never past the next sync's target offset


class _Mirror:
    """A source partition (gaps: compaction, markers) mirrored in random runs and flushes, into a
    target partition modelled offset by offset: ("data", source offset), or a commit marker, an
    aborted record, another writer's record (none of them a record the group reads)."""

    def __init__(self, rng, transactional, faults):
        from itertools import accumulate

        self.rng, self.transactional, self.faults = rng, transactional, faults
        self.offsets = list(accumulate(rng.choice((1, 1, 1, 1, 2, 5)) for _ in range(400)))
        self.target = [("other", None)] * 1000
        self.syncs, self.store = PartitionSyncs(base=1000), _store()
        self.copies = {}

    def runs(self, records):
        """The copier's runs of ``records``: cut at gaps and where a handler starts or stops
        filtering a record or sending it twice (each record's fate fixed: a handler decides by
        the record)."""
        run = []
        for source in records:
            if self.faults and source not in self.copies:
                self.copies[source] = self.rng.choice((0, 1, 2)) if self.rng.random() < 0.1 else 1
            copies = self.copies.get(source, 1)
            if run and (source != run[-1] + 1 or min(copies, 2) != min(self.copies.get(run[-1], 1), 2)):
                yield run, [self.copies.get(o, 1) for o in run]
                run = []
            if copies:
                run.append(source)
        if run:
            yield run, [self.copies.get(o, 1) for o in run]

    def run(self):
        at = 0
        while at < len(self.offsets):
            start, window = at, len(self.target)
            for _ in range(self.rng.randint(1, 4)):  # runs between two flushes
                size = self.rng.randint(1, 30)
                for piece, copies in self.runs(self.offsets[at:at + size]):
                    for source, n in zip(piece, copies):
                        self.target += [("data", source)] * n
                    self.syncs.add(piece[0], piece[-1], sum(copies), exact=all(n == 1 for n in copies))
                at += size
            fault = self.rng.random() if self.faults else 1.0
            if fault < 0.08 and self.transactional:  # the transaction aborted: sent again after
                self.target[window:] = [("aborted", None)] * (len(self.target) - window) + [("marker", None)]
                self.syncs.reanchor()
                at = start
                continue
            elif fault < 0.16:  # another writer's records in between: the end does not add up
                self.target += [("other", None)] * self.rng.randint(1, 6)
            elif fault < 0.22 and at > 60:  # a restart: mirrored again from an earlier commit
                at = self.rng.randint(max(0, start - 50), start)
                self.syncs = PartitionSyncs(base=len(self.target) + (1 if self.transactional else 0))
            if self.transactional:
                self.target.append(("marker", None))
            planned = self.syncs.plan(end=len(self.target), lag_max=50, marker=self.transactional)
            if self.faults and self.rng.random() < 0.05:
                continue  # these syncs were lost on their way to the topic
            _planned(self.store, self.syncs, planned)
        return self

    def checks(self):
        """For every group offset: (translated, the last target offset a read from there may
        start at without skipping a record, the first record's target offset)."""
        last_copy, first_copy = {}, {}
        for position, (kind, source) in enumerate(self.target):
            if kind == "data":
                last_copy[source] = position
                first_copy.setdefault(source, position)
        held = sorted(last_copy)
        bound, lowest = [len(self.target)] * (len(held) + 1), len(self.target)
        for i in range(len(held) - 1, -1, -1):  # min over every later record of its last copy
            lowest = min(lowest, last_copy[held[i]])
            bound[i] = lowest
        syncs = self.store._syncs[T0]
        for group_offset in range(syncs[0][0], self.offsets[-1] + 2):
            later = bisect.bisect_left(held, group_offset)
            first = first_copy[held[later]] if later < len(held) else len(self.target)
            yield group_offset, self.store.translate(T0, group_offset), bound[later], first


@pytest.mark.parametrize("transactional", [False, True], ids=["records", "exactly-once"])
@pytest.mark.parametrize("seed", range(12))
def test_every_group_offset_translates_to_the_first_record_not_read(seed, transactional):
    """Without faults and with one target record per record (the modes that keep partitions):
    exactly the first record not read (a read_committed consumer passes the markers before it)."""
    import random

    mirror = _Mirror(random.Random(seed), transactional, faults=False).run()
    for group_offset, translated, _bound, first in mirror.checks():
        between = [kind for kind, _ in mirror.target[translated:first]]
        assert translated <= first and set(between) <= {"marker"}, (group_offset, translated, first)


@pytest.mark.parametrize("syncs_kept", [1000, 12], ids=["all-syncs", "thinned"])
@pytest.mark.parametrize("transactional", [False, True], ids=["records", "exactly-once"])
@pytest.mark.parametrize("seed", range(15))
def test_no_group_offset_translates_past_a_record_not_read(monkeypatch, seed, transactional, syncs_kept):
    """With handlers that filter and duplicate, another writer, aborted transactions, restarts
    that mirror again from earlier, and old syncs thinned out: never past a record not read."""
    import random

    import mirror_maker.replication.checkpoints as checkpoints

    monkeypatch.setattr(checkpoints, "SYNCS_KEPT", syncs_kept)
    mirror = _Mirror(random.Random(seed), transactional, faults=True).run()
    for group_offset, translated, bound, _first in mirror.checks():
        assert translated is not None and translated <= bound, (group_offset, translated, bound)


def test_a_stretch_without_syncs_breaks_the_chain_so_equal_spans_around_it_are_not_taken_as_contiguous():
    """100..104 compacted away, 105..199 mirrored to 100..194 and another writer's 5 records at
    195..199: that stretch has no syncs, and (99 -> 99), (200 -> 200) have equal spans."""
    syncs, store = PartitionSyncs(base=0), _store()
    syncs.add(0, 99, 100)
    _planned(store, syncs, syncs.plan(end=100, lag_max=1000))
    syncs.add(105, 199, 95)
    assert syncs.plan(end=200, lag_max=1000) is None  # another writer: no syncs for it
    syncs.add(200, 209, 10)
    planned = syncs.plan(end=210, lag_max=1000)
    assert planned[0] == (200, 200) and syncs.chain[0] is None  # continues nothing
    _planned(store, syncs, planned)
    assert store.translate(T0, 150) <= 145  # record 150 is at 145


def test_a_new_owner_s_first_sync_and_a_sync_after_a_lost_one_continue_nothing_known():
    """The previous owner's last sync (9 -> 99); 10..11 compacted away, then the new owner's
    stretch: (16 -> 106) has the same spans. And a writer whose middle syncs were lost: the
    next one continues a sync the reader never saw."""
    store = _store((0, 90), (9, 99))
    fresh = PartitionSyncs(base=104)
    fresh.add(12, 20, 9)
    planned = fresh.plan(end=113, lag_max=4)
    assert fresh.chain[0] is None
    for (upstream, downstream), continues in list(zip(planned, fresh.chain))[1:]:  # its first sync lost
        store.add(T0, upstream, downstream, continues)
    assert store.translate(T0, 12) == 100  # the records 12.. are at 104..: 100..103 read again, nothing skipped
    lost = _store((10, 100), (13, 103))
    lost.add(T0, 18, 108, (17, 106))  # (16 -> 105), (17 -> 106) were lost
    assert lost.translate(T0, 16) == 104 and lost.translate(T0, 17) == 104


def test_a_stretch_across_a_rewind_is_never_taken_for_contiguous(monkeypatch):
    """0..9 -> 0..9, 10..59 compacted away, 60..99 -> 10..49, then records at every other
    offset: thinned, (0, 0) is followed by syncs far later; mirrored again from 100 by a new
    owner, (0, 0) and (100, 100) have equal spans."""
    import mirror_maker.replication.checkpoints as checkpoints

    monkeypatch.setattr(checkpoints, "SYNCS_KEPT", 6)
    store = _store((0, 0), (9, 9), (60, 10), (99, 49))
    for i in range(50):
        store.add(T0, 101 + 2 * i, 50 + i)
    store.add(T0, 100, 100)
    assert store.translate(T0, 70) <= 20  # record 70 is at 20


def test_thinning_never_makes_a_translation_later(monkeypatch):
    """(0, 0) -> (10, 5): 5 offsets compacted away; (10, 5) -> (20, 20): 5 target offsets that
    are not records. Thinned out, (10, 5) leaves (0, 0) and (20, 20), with equal spans."""
    import mirror_maker.replication.checkpoints as checkpoints

    full = _store((0, 0), (10, 5), (20, 20), (30, 30), (40, 40))
    monkeypatch.setattr(checkpoints, "SYNCS_KEPT", 4)
    thinned = _store((0, 0), (10, 5), (20, 20), (30, 30), (40, 40))
    assert len(thinned._syncs[T0]) < 5
    for offset in range(0, 42):
        assert thinned.translate(T0, offset) <= full.translate(T0, offset), offset


def test_a_target_partition_that_went_back_drops_every_sync_before():
    store = _store((0, 0), (5000, 4000))
    store.add(T0, 3000, 0)  # the target topic recreated, mirrored again from the source's log start
    assert store.reset == {T0} and store._syncs[T0] == [(3000, 0, False)]


def test_a_checkpoint_goes_back_only_when_its_group_did():
    from mirror_maker.replication.checkpoints import more_recent

    last = Checkpoint("g", "a.t", 0, 500, 480, "")
    assert more_recent(last, None)
    assert more_recent(Checkpoint("g", "a.t", 0, 600, 580, ""), last)
    assert not more_recent(Checkpoint("g", "a.t", 0, 500, 480, ""), last)  # the same
    assert not more_recent(Checkpoint("g", "a.t", 0, 600, 470, ""), last)  # translated less well (after a restart)
    assert more_recent(Checkpoint("g", "a.t", 0, 400, 380, ""), last)  # the group went back on the source


@pytest.mark.parametrize("extra, message", [
    (["--emit.checkpoints.enabled", "true"], "--emit.offset-syncs.enabled (on with --emit.checkpoints.enabled) "
                                             "needs the source partition kept"),
    (["--emit.offset-syncs.enabled", "true"], "PartitionPreservingHandler"),
    (["--emit.offset-syncs.enabled", "true", "--use.raw.bytes", "--message.handler",
      "tests.unit.sample_plugins.RenamingRawHandler"], "needs raw mode's own handler"),
    (["--emit.offset-syncs.enabled", "true", "--offset-syncs.topic.location", "moon"], "'moon' is not one of source, target"),
    (["--emit.offset-syncs.enabled", "true", "--emit.checkpoints.enabled", "true", "--groups", "("],
     "--groups"),
])
def test_failover_options_checked_in_one_line(tmp_path, capsys, extra, message):
    consumer, producer = tmp_path / "c.properties", tmp_path / "p.properties"
    consumer.write_text("bootstrap.servers=localhost:1\ngroup.id=g\n")
    producer.write_text("bootstrap.servers=localhost:2\n")
    assert invoke(["--consumer.config", str(consumer), "--producer.config", str(producer), "--include", "x",
                   *extra]) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err, err


@pytest.mark.parametrize("closing", ["checkpoints", "offset syncs"])
def test_the_failover_producers_flush_until_the_stop_s_deadline_and_no_longer(caplog, closing):
    """Checkpoints, heartbeats and offset syncs each have their own producer: at a stop, what
    the target has not acknowledged is given up at the run's deadline (it waited 5 s more)."""
    import threading
    import time

    from mirror_maker.config.replication import ReplicationOptions
    from mirror_maker.replication.checkpoints import ConsumerFailover
    from mirror_maker.replication.offset_syncs import OffsetSyncsTopic
    from mirror_maker.replication.policies import topic_rules

    away = {"bootstrap.servers": "127.0.0.1:1", "log_level": 0}  # nothing listens: nothing is ever acknowledged
    if closing == "checkpoints":
        options = ReplicationOptions(policy="default", source_alias="a", emit_heartbeats=True)
        writer = ConsumerFailover(options, topic_rules(options), None, None, None, away)
        writer._created.add(writer.heartbeats_topic)  # as if created before the target went away
        writer.emit_heartbeat()
    else:
        from confluent_kafka.admin import AdminClient

        writer = OffsetSyncsTopic("mm2-offset-syncs.b.internal", away, AdminClient(away), None)
        writer._created = True  # as if created before the cluster went away
        writer.write([(OffsetSync("orders", 0, 100, 42), None)])
    closing = threading.Thread(target=writer.close, args=(time.monotonic() + 0.3,))
    closing.start()
    closing.join(1.0)  # the deadline, not 5 s more (nothing is ever acknowledged)
    assert not closing.is_alive(), "the close went past the stop's deadline"
    assert "not written before the stop" in caplog.text


class CreatingAdmin:
    """Answers each CreateTopics with the next of ``answers`` (None: created; else its error)."""

    def __init__(self, *answers):
        self.answers, self.asked = list(answers), []

    def create_topics(self, new_topics, request_timeout=None):
        from concurrent.futures import Future

        from confluent_kafka import KafkaError, KafkaException

        self.asked.append([(t.topic, t.num_partitions, t.config) for t in new_topics])
        future, answer = Future(), self.answers.pop(0)
        if answer is None:
            future.set_result(None)
        else:
            future.set_exception(KafkaException(KafkaError(answer)))
        return {new_topics[0].topic: future}


def test_the_offset_syncs_topic_is_asked_for_at_start_and_again_after_a_refusal():
    """Waiting for the creation at the first write held the first commit (often the stop's)
    about 0.1 s; it is asked for when the mirror starts, and a refusal is asked again."""
    from confluent_kafka import KafkaError, KafkaException

    from mirror_maker.replication.offset_syncs import OffsetSyncsTopic

    name = "mm2-offset-syncs.b.internal"
    admin = CreatingAdmin(KafkaError.CLUSTER_AUTHORIZATION_FAILED, KafkaError.TOPIC_ALREADY_EXISTS)
    topic = OffsetSyncsTopic(name, {"bootstrap.servers": "127.0.0.1:1", "log_level": 0}, admin, None)
    assert admin.asked == [[(name, 1, {"cleanup.policy": "compact"})]]  # before any write
    with pytest.raises(KafkaException):
        topic.write([(OffsetSync("orders", 0, 100, 42), None)])
    topic.write([(OffsetSync("orders", 0, 100, 42), None)])  # asked again: there already is fine
    topic.write([(OffsetSync("orders", 0, 200, 142), (100, 42))])
    assert len(admin.asked) == 2
    topic.close(0.0)  # no producer left retrying 127.0.0.1:1 for the rest of the session


def test_an_assignment_asks_for_the_target_s_ends_again_soon_then_less_often():
    """A target topic created a moment ago is known to its leaders tens of milliseconds later."""
    from concurrent.futures import Future
    from types import SimpleNamespace

    from confluent_kafka import KafkaError, KafkaException

    from mirror_maker.replication.offset_syncs import OffsetSyncWriter

    class NewTopicAdmin:
        asked = 0

        def list_offsets(self, request, request_timeout):
            NewTopicAdmin.asked += 1
            if NewTopicAdmin.asked <= 6:
                raise KafkaException(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))
            answers = {}
            for key in request:
                answers[key] = Future()
                answers[key].set_result(SimpleNamespace(offset=0))
            return answers

    class Run:
        waits = []

        def wait(self, timeout_s):
            self.waits.append(timeout_s)
            return False

    run = Run()
    writer = OffsetSyncWriter(None, NewTopicAdmin(), str, 100, run)
    writer.assigned([T0])
    assert run.waits == [0.02, 0.04, 0.08, 0.16, 0.2, 0.2] and writer._partitions[T0].base == 0


def test_a_partition_of_a_target_topic_this_mirror_just_created_starts_at_0_without_asking():
    """On a loaded cluster a new topic's leaders stayed unknown longer than the assignment's wait
    (No leaders found): its first stretch got no syncs, and a group committed at offset 0 had no
    checkpoint at all. A topic this process created starts at 0; once per partition."""
    from confluent_kafka import KafkaError, KafkaException

    from mirror_maker.clients.target_topics import TargetTopics
    from mirror_maker.replication.offset_syncs import OffsetSyncWriter

    class NoLeaders:
        asked = 0

        def list_offsets(self, request, request_timeout):
            NoLeaders.asked += 1
            raise KafkaException(KafkaError(KafkaError._LEADER_NOT_AVAILABLE, "No leaders found"))

    class Run:
        def wait(self, timeout_s):
            return False

    topics = TargetTopics(None, None, remote=lambda topic: f"a.{topic}")
    topics._fresh.update({("a.orders", 0), ("a.orders", 1)})  # as _create leaves it
    writer = OffsetSyncWriter(None, NoLeaders(), lambda topic: f"a.{topic}", 100, Run(), fresh=topics.fresh)
    writer.assigned([T0])
    assert NoLeaders.asked == 0 and writer._partitions[T0].base == 0
    assert not topics.fresh("a.orders", 0) and topics.fresh("a.orders", 1)  # the first ask only


def test_a_record_a_handler_filters_never_takes_part_in_an_offset_sync():
    """Counted as written, a filtered record made a run look gapless: source offset 6 got the
    target offset of 7, and a group that had read up to 5 was translated past 6."""
    from mirror_maker.handlers import MessageHandler
    from mirror_maker.replication.offset_syncs import OffsetSyncWriter

    from .stream_parts import Msg, mirror, stream

    class DropsTwo(MessageHandler):
        keep_partition = True

        def handle(self, record):
            return [] if record.offset == 2 else [self.to(record)]

        def to(self, record):
            from mirror_maker.records import ProducerRecord
            return ProducerRecord(record.topic, record.value, record.key, record.partition)

    worker, producer, _ = stream(handler=DropsTwo(), assigned=(T0,))
    recorded = []
    worker.offset_syncs = OffsetSyncWriter.__new__(OffsetSyncWriter)
    worker.offset_syncs.record = lambda tp, first, last, count, exact: recorded.append((first, last, count))
    mirror(worker, [Msg("orders", 0, offset) for offset in range(10)])
    assert recorded == [(0, 1, 2), (3, 9, 7)]  # offset 2 is in no run the syncs see
    assert worker.checkpoint.pending[T0] == 10 and len(producer.sent) == 9
    syncs = PartitionSyncs(base=100)
    for first, last, count in recorded:
        syncs.add(first, last, count)
    planned = syncs.plan(end=109, lag_max=5)
    target_of = {source: 100 + index for index, source in enumerate([0, 1, *range(3, 10)])}
    assert planned and all(target_of[upstream] == downstream for upstream, downstream in planned), planned


def test_a_record_a_handler_sends_twice_is_synced_at_its_first_target_record_only():
    """Synced at its last, a group that had not read it yet was translated past its first copy."""
    from mirror_maker.handlers import MessageHandler
    from mirror_maker.records import ProducerRecord
    from mirror_maker.replication.offset_syncs import OffsetSyncWriter

    from .stream_parts import Msg, mirror, stream

    class TwiceFromFour(MessageHandler):
        keep_partition = True

        def handle(self, record):
            out = ProducerRecord(record.topic, record.value, record.key, record.partition)
            return [out, out] if record.offset >= 4 else [out]

    worker, producer, _ = stream(handler=TwiceFromFour(), assigned=(T0,))
    recorded = []
    worker.offset_syncs = OffsetSyncWriter.__new__(OffsetSyncWriter)
    worker.offset_syncs.record = lambda tp, first, last, count, exact: recorded.append((first, last, count, exact))
    mirror(worker, [Msg("orders", 0, offset) for offset in (0, 1, 2, 3, 4, 6)])  # 5 compacted away
    assert recorded == [(0, 3, 4, True), (4, 4, 2, False), (6, 6, 2, False)]  # cut at the gap too
    syncs = PartitionSyncs(base=100)
    for run in recorded:
        syncs.add(*run)
    planned = syncs.plan(end=108, lag_max=100)
    first_copy = {0: 100, 1: 101, 2: 102, 3: 103, 4: 104, 6: 106}
    assert planned == [(0, 100), (3, 103), (4, 104), (6, 106)]  # none at a second copy
    assert all(first_copy[upstream] == downstream for upstream, downstream in planned)


def test_syncs_follow_the_records_at_the_checkpoints_pace_not_the_commit_interval():
    from mirror_maker.replication.offset_syncs import OffsetSyncWriter

    def interval(checkpoints_s):
        return OffsetSyncWriter(_Topic(), None, str, 100, RunState(), checkpoints_interval_s=checkpoints_s).interval_ms

    assert interval(1) == 1000 and interval(0.2) == 1000  # at most a commit a second
    assert interval(60) == 60000 and interval(None) == float("inf")  # no checkpoints: the commit interval


class _Ends2:
    """The target's high watermarks for ListOffsets (a topic not there: UNKNOWN_TOPIC_OR_PART)."""

    def __init__(self, ends):
        self.ends = ends

    def list_offsets(self, request, request_timeout):
        from concurrent.futures import Future

        from confluent_kafka import KafkaError, KafkaException

        answers = {}
        for key in request:
            future = Future()
            if (key.topic, key.partition) in self.ends:
                future.set_result(type("Answer", (), {"offset": self.ends[(key.topic, key.partition)]})())
            else:
                future.set_exception(KafkaException(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)))
            answers[key] = future
        return answers


def _failover(target_admin):
    from mirror_maker.replication.checkpoints import ConsumerFailover

    failover = ConsumerFailover.__new__(ConsumerFailover)
    failover._target, failover._target_conf, failover.checkpoints_topic = target_admin, {}, "a.checkpoints.internal"
    failover._loaded, failover._floor, failover.latest = False, {}, {}
    return failover


def test_checkpoints_written_before_a_start_are_a_floor_if_their_target_partition_holds_them(monkeypatch):
    import mirror_maker.replication.checkpoints as checkpoints

    kept = Checkpoint("g", "a.t", 0, 900, 400, "")
    beyond = Checkpoint("g", "a.t", 1, 9000, 8000, "")  # the target topic recreated since: it holds less
    gone = Checkpoint("g", "a.old", 0, 10, 10, "")  # a topic no longer there
    monkeypatch.setattr(checkpoints, "read_checkpoints", lambda *args: {
        ("g", c.topic, c.partition): c for c in (kept, beyond, gone)})
    failover = _failover(_Ends2({("a.t", 0): 500, ("a.t", 1): 700}))
    assert failover._load_checkpoints()
    assert failover._floor == {("g", "a.t", 0): kept} and failover.latest == {}  # a floor, never synced to a group


def test_checkpoints_not_written_until_those_of_before_the_start_are_read(monkeypatch, caplog):
    import mirror_maker.replication.checkpoints as checkpoints
    from confluent_kafka import KafkaError, KafkaException

    def unreadable(*args):
        raise KafkaException(KafkaError(KafkaError._TRANSPORT))

    monkeypatch.setattr(checkpoints, "read_checkpoints", unreadable)
    failover = _failover(_Ends2({}))
    failover._ensure = lambda topic: None
    assert failover.emit_checkpoints() == 0 and not failover._loaded
    assert "none is written until they are read" in caplog.text


def test_reading_the_syncs_to_their_end_is_done_at_once_when_there_is_nothing_to_read():
    from confluent_kafka import KafkaError, KafkaException

    class Consumer:
        def __init__(self, ends):
            self.ends = ends

        def get_watermark_offsets(self, tp, timeout, cached):
            if self.ends is None:
                raise KafkaException(KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART))
            return self.ends

    store = _store()
    store._topic = "mm2-offset-syncs.b.internal"
    store._consumer = Consumer((5, 5))
    assert store.update_to_end(60.0) is True  # emptied by compaction or retention: nothing to wait for
    store._consumer = Consumer(None)
    assert store.update_to_end(60.0) is False  # no syncs topic: one answer, no wait
