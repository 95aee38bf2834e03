"""The raw fetcher's rules: what each fetched batch becomes (forwarded, the record path, skipped),
where the position goes, and when it fetches, against a scripted source broker."""

from types import SimpleNamespace

from kafka.future import Future

from mirror_maker.engine.state import RunState
from mirror_maker.records import TopicPartition
from mirror_maker.shallow.fetcher import BUFFER_BYTES, PARTITION_MAX_BYTES, RawFetcher

from .scripted_broker import ScriptedBroker
from .test_raw_batches import batch, control, record

TP = TopicPartition("src", 0)


class ScriptedSource(ScriptedBroker):
    """Fetches wait until the test answers them."""

    def __init__(self) -> None:
        super().__init__()
        self.fetches = []  # [({partition: (offset, max bytes)}, future)]

    def send(self, node, request):
        asked = {(topic.topic, part.partition): (part.fetch_offset, part.partition_max_bytes)
                 for topic in request.topics for part in topic.partitions}
        future = Future()
        self.fetches.append((asked, future))
        return future

    def answer(self, index: int, records: bytes = b"", error: int = 0, high: int = 100, aborted=(),
               stable: int = None) -> None:
        asked, future = self.fetches[index]
        future.success(SimpleNamespace(responses=[SimpleNamespace(topic=topic, partitions=[SimpleNamespace(
            partition_index=partition, error_code=error, high_watermark=high, records=records,
            last_stable_offset=high if stable is None else stable,
            aborted_transactions=[SimpleNamespace(producer_id=p, first_offset=o) for p, o in aborted])])
            for topic, partition in asked]))


def fetcher(position: int = 0, read_committed: bool = True):
    source = ScriptedSource()
    raw = RawFetcher(source, RunState(), 1 if read_committed else 0)
    raw.assign(TP, position)
    return raw, source


def steps(raw):
    return [(w.first, w.last, "batch" if w.batch is not None else "records" if w.records else "skip")
            for w in raw.work[TP]]


def test_whole_batches_are_forwarded_and_the_position_moves_past_them():
    raw, source = fetcher()
    raw.fetch(0)
    assert source.fetches[0][0] == {("src", 0): (0, PARTITION_MAX_BYTES)}
    data = batch(0, 3, attributes=3) + batch(3, 2, attributes=3)
    source.answer(0, data, high=5)
    assert steps(raw) == [(0, 2, "batch"), (3, 4, "batch")]
    assert raw.positions[TP] == 5 and raw.ends[TP] == 5
    assert raw.buffered_bytes == len(data)
    for item in list(raw.work[TP]):
        raw.taken(item)
    assert raw.buffered_bytes == 0


def test_a_position_inside_a_batch_sends_the_rest_of_it_through_the_record_path():
    raw, source = fetcher(position=2)
    raw.fetch(0)
    source.answer(0, batch(0, 5) + batch(5, 2))
    assert steps(raw) == [(2, 4, "records"), (5, 6, "batch")]  # records 0 and 1 never again
    assert raw.work[TP][0].reason == "a position inside the batch"


def test_read_committed_skips_aborted_batches_and_markers_read_uncommitted_forwards_the_data_never_a_marker():
    """Kafka refuses a control batch from a producer (INVALID_RECORD): forwarded, it stopped the
    stream with 255 at every restart."""
    data = (batch(0, 2, attributes=0x10, producer_id=9) + control(2, 9, commit=False)
            + batch(3, 2) + batch(5, 1, attributes=0x10, producer_id=4) + control(6, 4, commit=True))
    raw, source = fetcher()
    raw.fetch(0)
    source.answer(0, data, aborted=[(9, 0)])
    assert steps(raw) == [(0, 1, "skip"), (2, 2, "skip"), (3, 4, "batch"), (5, 5, "batch"), (6, 6, "skip")]
    assert raw.positions[TP] == 7
    raw, source = fetcher(read_committed=False)
    raw.fetch(0)
    source.answer(0, data, aborted=[(9, 0)])
    assert [kind for *_range, kind in steps(raw)] == ["batch", "skip", "batch", "batch", "skip"]
    assert raw.positions[TP] == 7


def test_the_end_is_the_last_stable_offset_under_read_committed_and_the_high_watermark_otherwise():
    """An open source transaction holds a read_committed reader at the last stable offset: the
    lag must not count what it cannot read yet (--exit.when.caught.up waited it out)."""
    for read_committed, end in ((True, 3), (False, 9)):
        raw, source = fetcher(read_committed=read_committed)
        raw.fetch(0)
        source.answer(0, batch(0, 3), high=9, stable=3)
        assert raw.ends[TP] == end


def test_a_legacy_compressed_message_set_is_a_range_from_the_position_not_from_its_wrapper_offset():
    """A compressed magic 0/1 wrapper carries its last inner record's offset: tracked from there,
    the records before it were skipped and the commit passed them."""
    import struct

    from kafka.record.legacy_records import LegacyRecordBatchBuilder

    builder = LegacyRecordBatchBuilder(magic=1, compression_type=LegacyRecordBatchBuilder.CODEC_GZIP, batch_size=1 << 20)
    for i in range(3):
        builder.append(i, timestamp=1000 + i, key=b"k", value=b"v%d" % i)  # relative offsets 0..2
    wrapper = bytes(builder.build())
    wrapper = struct.pack(">q", 12) + wrapper[8:]  # as the broker stores it: offsets 10..12
    single = LegacyRecordBatchBuilder(magic=1, compression_type=0, batch_size=1 << 20)
    single.append(0, timestamp=2000, key=b"k", value=b"v13")
    plain = struct.pack(">q", 13) + bytes(single.build())[8:]
    raw, source = fetcher(position=10)
    raw.fetch(0)
    source.answer(0, wrapper + plain)
    assert steps(raw) == [(10, 13, "records")]  # one range: the wrapper's three records and the next one
    (item,) = raw.work[TP]
    assert item.reason == "magic 1" and item.read_from == 10 and item.expected is None
    assert raw.positions[TP] == 14


def test_a_corrupt_batch_is_fetched_again_and_one_corrupt_on_the_source_fails_the_run():
    good, bad = batch(0, 2), bytearray(batch(2, 2))
    bad[-1] ^= 0xFF  # a record byte: the stored CRC no longer matches
    raw, source = fetcher()
    for attempt in range(3):
        raw.fetch(0)
        source.answer(attempt, (good if attempt == 0 else b"") + bytes(bad))
        if attempt == 0:
            assert steps(raw) == [(0, 1, "batch")] and raw.positions[TP] == 2  # the good one goes on
            raw.taken(raw.work[TP].popleft())
        assert raw.positions[TP] == 2
    assert raw._state.failed
    assert "the batch of src-0 offsets 2..3 is corrupt on the source" in str(raw._state.failure)


def test_range_counts_say_how_many_records_the_record_path_must_see():
    raw, source = fetcher(position=2)
    raw.fetch(0)
    # A start inside a batch, then two compacted batches (holes) in a row: two ranges.
    source.answer(0, batch(0, 5) + batch(5, 2, last_delta=3) + batch(9, 1, last_delta=4))
    first, second = raw.work[TP]
    assert (first.first, first.last, first.read_from, first.expected) == (2, 4, 0, 5)
    assert (second.first, second.last, second.read_from, second.expected) == (5, 13, 5, 3)


def test_fetching_pauses_while_too_many_batches_wait_for_the_target():
    from mirror_maker.shallow.fetcher import BUFFER_BATCHES

    raw, source = fetcher()
    raw.fetch(0, pending_batches=BUFFER_BATCHES)
    assert source.fetches == []
    raw.fetch(0, pending_batches=BUFFER_BATCHES - 1)
    assert len(source.fetches) == 1


def test_batches_raw_mode_cannot_forward_take_the_record_path_in_order():
    raw, source = fetcher()
    raw.max_batch_bytes["src"] = 200
    raw.fetch(0)
    big = batch(5, 20)
    assert len(big) > 200
    source.answer(0, batch(0, 2) + batch(2, 2, last_delta=2) + big)  # 2..4 holds 2 records: compacted
    assert steps(raw) == [(0, 1, "batch"), (2, 4, "records"), (5, 24, "records")]
    assert [w.reason for w in raw.work[TP]][1:] == ["offset holes (compaction)",
                                                   "larger than the target's max.message.bytes"]


def test_a_backlog_of_small_batches_takes_the_record_path_in_ranges_and_a_few_or_big_ones_go_as_they_are():
    """Kafka appends one batch per partition per request, one request of a connection at a time:
    forwarded one by one, a backlog of batches of a few records caught up slower than a producer
    wrote them. A range is cut to BACKLOG_RANGE_RECORDS (each a bounded round of the record path),
    and counts as buffered until it is done."""
    from mirror_maker.shallow.fetcher import BACKLOG_BATCHES, BACKLOG_RANGE_RECORDS, SMALL_BATCH_BYTES, SMALL_BATCHES

    raw, source = fetcher()
    raw.fetch(0)
    backlog = BACKLOG_RANGE_RECORDS + BACKLOG_BATCHES
    source.answer(0, b"".join(batch(offset, 1) for offset in range(backlog))
                  + control(backlog, 9, commit=True) + batch(backlog + 1, 2))
    assert steps(raw) == [(0, BACKLOG_RANGE_RECORDS - 1, "records"), (BACKLOG_RANGE_RECORDS, backlog - 1, "records"),
                          (backlog, backlog, "skip"), (backlog + 1, backlog + 2, "batch")]
    first = raw.work[TP][0]
    assert (first.reason, first.batches, first.expected, first.read_from) == (SMALL_BATCHES, BACKLOG_RANGE_RECORDS,
                                                                              BACKLOG_RANGE_RECORDS, 0)
    assert raw.buffered_batches == backlog + 1  # each range's batches, until it is done
    for item in list(raw.work[TP]):
        raw.taken(item)
    assert (raw.buffered_batches, raw.buffered_bytes) == (0, 0)

    raw, source = fetcher()  # fewer in a row: the batches go as they are
    raw.fetch(0)
    source.answer(0, b"".join(batch(offset, 1) for offset in range(BACKLOG_BATCHES - 1)))
    assert {kind for _first, _last, kind in steps(raw)} == {"batch"}

    raw, source = fetcher()  # small transactions: each batch followed by its marker
    raw.fetch(0)
    source.answer(0, b"".join(batch(2 * n, 1, attributes=0x10, producer_id=9) + control(2 * n + 1, 9, commit=True)
                              for n in range(BACKLOG_BATCHES)))
    assert {kind for _first, _last, kind in steps(raw)} == {"batch", "skip"}

    raw, source = fetcher()  # big batches
    raw.fetch(0)
    value = b"v" * SMALL_BATCH_BYTES
    source.answer(0, b"".join(batch(offset, 1, records=record(0, b"k", value)) for offset in range(BACKLOG_BATCHES)))
    assert {kind for _first, _last, kind in steps(raw)} == {"batch"}
    assert raw.buffered_batches == BACKLOG_BATCHES

    raw = RawFetcher(ScriptedSource(), RunState(), 1, batch_backlogs=False)  # producer.type=sync
    raw.assign(TP, 0)
    raw.fetch(0)
    raw._cluster.answer(0, b"".join(batch(offset, 1) for offset in range(BACKLOG_BATCHES)))
    assert {kind for _first, _last, kind in steps(raw)} == {"batch"}


def test_batches_with_holes_that_follow_each_other_are_one_record_path_range():
    """A compacted log is mostly such batches: one range, one round of the record path, for all
    of them (counted as the batches they were); a batch raw mode forwards, a skipped one or
    another reason ends the range."""
    raw, source = fetcher()
    raw.max_batch_bytes["src"] = 200
    raw.fetch(0)
    big = batch(30, 20)
    assert len(big) > 200
    source.answer(0, batch(0, 2, last_delta=4) + batch(7, 1, last_delta=2) + batch(12, 3, last_delta=5)  # 0..17
                  + batch(18, 2) + batch(20, 2, last_delta=3) + batch(24, 1, last_delta=1)  # 18..19 as it is
                  + big + batch(50, 2, last_delta=2)
                  + batch(53, 2, attributes=0x10, producer_id=9) + control(55, 9, commit=False)
                  + batch(56, 1, last_delta=1), aborted=[(9, 53)])
    assert steps(raw) == [(0, 17, "records"), (18, 19, "batch"), (20, 25, "records"), (30, 49, "records"),
                          (50, 52, "records"), (53, 54, "skip"), (55, 55, "skip"), (56, 57, "records")]
    assert [(w.reason, w.batches) for w in raw.work[TP] if w.records] == [
        ("offset holes (compaction)", 3), ("offset holes (compaction)", 2),
        ("larger than the target's max.message.bytes", 1), ("offset holes (compaction)", 1),
        ("offset holes (compaction)", 1)]
    assert raw.positions[TP] == 58


def test_a_batch_larger_than_the_partition_limit_is_asked_for_with_twice_the_room():
    raw, source = fetcher()
    raw.fetch(0)
    source.answer(0, batch(0, 3)[:30])  # only part of the one batch fits
    assert steps(raw) == [] and raw.positions[TP] == 0
    raw.fetch(0)
    assert source.fetches[1][0] == {("src", 0): (0, 2 * PARTITION_MAX_BYTES)}
    source.answer(1, batch(0, 3))
    raw.work[TP].clear()
    raw.fetch(0)
    assert source.fetches[2][0] == {("src", 0): (3, PARTITION_MAX_BYTES)}  # back to the limit


def test_when_it_fetches_one_request_per_broker_nothing_while_work_waits_or_the_buffer_is_full():
    raw, source = fetcher()
    raw.fetch(0)
    raw.fetch(0)
    assert len(source.fetches) == 1  # one in flight per broker
    source.answer(0, batch(0, 3))
    raw.fetch(0)
    assert len(source.fetches) == 1  # its answer is not handed out yet
    raw.taken(raw.work[TP].popleft())
    raw.fetch(BUFFER_BYTES)  # the target has that much to acknowledge
    assert len(source.fetches) == 1
    raw.fetch(0)
    assert source.fetches[1][0] == {("src", 0): (3, PARTITION_MAX_BYTES)}


def test_errors_a_moved_leader_refreshes_metadata_an_offset_out_of_range_is_reset_by_the_stream():
    raw, source = fetcher(position=50)
    raw.fetch(0)
    source.answer(0, error=6)  # NOT_LEADER_OR_FOLLOWER
    assert source.refreshes == 1 and raw.positions[TP] == 50 and not raw.out_of_range
    raw.fetch(0)
    source.answer(1, error=1)  # OFFSET_OUT_OF_RANGE
    assert raw.out_of_range == {TP: 50} and raw.positions[TP] == 50


def test_an_answer_for_a_position_that_moved_meanwhile_is_dropped():
    raw, source = fetcher()
    raw.fetch(0)
    raw.seek(TP, 10)  # the record path took a range meanwhile
    source.answer(0, batch(0, 3))
    assert steps(raw) == [] and raw.positions[TP] == 10
    raw.forget(TP)
    raw.fetch(0)
    assert len(source.fetches) == 1  # a revoked partition is not fetched


def test_a_refetch_drops_the_queue_and_its_buffered_bytes_and_asks_again_from_the_position():
    raw, source = fetcher()
    raw.fetch(0)
    answer = batch(0, 2, last_delta=3) + batch(4, 3)  # a range, then a batch
    source.answer(0, answer)
    assert raw.buffered_bytes == len(answer)  # the batch keeps its answer, the range's bytes too
    raw.refetch(TP, 0)  # the record path could not finish the range
    assert raw.buffered_bytes == 0 and not raw.work[TP] and raw.positions[TP] == 0
    raw.fetch(0)
    assert source.fetches[1][0] == {("src", 0): (0, PARTITION_MAX_BYTES)}
    raw.forget(TP)
    raw.refetch(TP, 5)  # revoked meanwhile: nothing to drop, nothing to fetch
    assert TP not in raw.positions and TP not in raw.work


def test_what_waits_for_the_target_counts_every_byte_of_the_answers_its_batches_keep():
    """A forwarded batch is sent from its fetch answer: the answer's other bytes count with its
    last forwarded batch until that one is acknowledged; an answer mostly skipped (an aborted
    transaction) gives its batches copies instead, freed with them."""
    raw, source = fetcher()
    raw.fetch(0)
    dense = batch(0, 3) + batch(3, 3) + batch(6, 1, attributes=0x30, producer_id=9)[:40]  # a partial last one
    source.answer(0, dense)
    kept = [item.batch for item in raw.work[TP]]
    assert [b.data is kept[0].data for b in kept] == [True, True]
    assert raw.buffered_bytes == sum(b.held for b in kept) == len(dense)
    while raw.work[TP]:
        raw.taken(raw.work[TP].popleft())
    assert raw.buffered_bytes == 0

    raw.fetch(0)
    aborted = b"".join(batch(7 + i, 1, attributes=0x10, producer_id=5) for i in range(20)) + batch(27, 1)
    source.answer(1, aborted, aborted=[(5, 7)])
    (kept,) = [item.batch for item in raw.work[TP] if item.batch is not None]
    assert kept.data == batch(27, 1) and kept.held == len(batch(27, 1)) == raw.buffered_bytes
