"""v2 record batches: finding them, deciding what may be forwarded, rewriting headers, and the
read_committed rules, on batches built here byte by byte."""

import struct

import google_crc32c
import pytest

from mirror_maker.shallow.batches import HEADER, HEADER_SIZE, committed, rewrite, split


def varint(n: int) -> bytes:
    n = (n << 1) ^ (n >> 63)  # zigzag
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def record(offset_delta: int, key: bytes, value: bytes) -> bytes:
    body = (b"\x00" + varint(0) + varint(offset_delta) + varint(len(key)) + key + varint(len(value)) + value
            + varint(0))
    return varint(len(body)) + body


def batch(base_offset: int, count: int, attributes: int = 0, producer_id: int = -1, last_delta=None,
          records=None, timestamp: int = 1000) -> bytes:
    records = records if records is not None else b"".join(record(i, b"k", b"v%d" % i) for i in range(count))
    last_delta = count - 1 if last_delta is None else last_delta
    fields = [base_offset, 0, 7, 2, 0, attributes, last_delta, timestamp, timestamp + last_delta,
              producer_id, 3 if producer_id >= 0 else -1, 0 if producer_id >= 0 else -1, count]
    fields[1] = HEADER_SIZE - 12 + len(records)
    fields[4] = google_crc32c.extend(google_crc32c.value(HEADER.pack(*fields)[21:]), records)
    return HEADER.pack(*fields) + records


def control(base_offset: int, producer_id: int, commit: bool) -> bytes:
    key = struct.pack(">hh", 0, 1 if commit else 0)
    return batch(base_offset, 1, attributes=0x30, producer_id=producer_id,
                 records=record(0, key, struct.pack(">hhi", 0, 0, 0)))


def test_split_finds_complete_batches_and_leaves_a_partial_last_one_out():
    data = batch(0, 3) + batch(3, 2, attributes=3) + batch(5, 4)[:40]
    batches = split(data)
    assert [(b.base_offset, b.last_offset, b.record_count, b.codec) for b in batches] == [
        (0, 2, 3, "none"), (3, 4, 2, "lz4")]
    assert batches[1].next_offset == 5 and batches[1].size == len(batch(3, 2, attributes=3))


def test_rewrite_sets_our_producer_fields_keeps_the_records_and_a_valid_crc():
    from kafka.record.default_records import DefaultRecordBatch

    original = batch(40, 3, attributes=0x10 | 2, producer_id=77)
    (parsed,) = split(original)
    with pytest.raises(ValueError, match="only a checked batch"):
        rewrite(parsed, producer_id=9, producer_epoch=1, base_sequence=100)
    parts = rewrite(parsed.checked(), producer_id=9, producer_epoch=1, base_sequence=100)
    assert [len(part) for part in parts] == [HEADER_SIZE, len(original) - HEADER_SIZE]  # not joined
    rewritten = parts.joined()
    fields = HEADER.unpack_from(rewritten)
    assert fields[0] == 0 and fields[2] == -1  # base offset, leader epoch
    assert fields[5] == 2  # snappy kept, transactional bit cleared
    assert (fields[9], fields[10], fields[11], fields[12]) == (9, 1, 100, 3)
    assert rewritten[HEADER_SIZE:] == original[HEADER_SIZE:]
    assert DefaultRecordBatch(bytearray(rewritten)).validate_crc()


@pytest.mark.parametrize("records", [3, 700])  # 700 x 100 B: past PASS_BELOW, the CRC is derived
def test_rewrite_of_a_batch_built_by_kafka_python_gives_a_crc_kafka_python_accepts(records):
    import random

    from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

    from mirror_maker.shallow.crc import PASS_BELOW

    builder = DefaultRecordBatchBuilder(2, 0, True, 4242, 5, 17, 10 * 1024 * 1024)
    draw = random.Random(records)
    for offset in range(records):
        builder.append(offset, 1700000000000 + offset, b"k%d" % offset, draw.randbytes(100), [])
    (parsed,) = split(bytes(builder.build()))
    assert (parsed.size - HEADER_SIZE >= PASS_BELOW) == (records == 700)
    for producer_id, epoch, sequence in ((9, 1, 100), (9, 2, 0), (123456789, 0, 2**31 - 701)):
        rewritten = rewrite(parsed.checked(), producer_id, epoch, sequence).joined()
        fields = HEADER.unpack_from(rewritten)
        assert (fields[5] & 0x10, fields[9], fields[10], fields[11]) == (0, producer_id, epoch, sequence)
        assert DefaultRecordBatch(bytearray(rewritten)).validate_crc()


@pytest.mark.parametrize("data, reason", [
    (batch(0, 3), None),
    (batch(0, 2, last_delta=4), "offset holes (compaction)"),
    (batch(0, 2, attributes=0x08), "LogAppendTime"),
])
def test_what_raw_mode_can_forward(data, reason):
    (parsed,) = split(data)
    assert parsed.why_not_raw() == reason


def test_a_batch_larger_than_the_target_takes_goes_the_record_path():
    (parsed,) = split(batch(0, 50))
    assert parsed.why_not_raw(max_bytes=100) == "larger than the target's max.message.bytes"
    assert parsed.why_not_raw(max_bytes=10_000) is None


def test_legacy_message_sets_are_found_and_never_forwarded():
    legacy = struct.pack(">qi", 9, 20) + b"\x00" * 4 + b"\x01" + b"\x00" * 15  # magic 1 at byte 16
    (parsed,) = split(legacy + batch(10, 2))[:1]
    assert parsed.magic == 1 and parsed.last_offset == 9 and parsed.why_not_raw() == "magic 1"


def test_read_committed_drops_aborted_batches_and_markers_and_keeps_the_rest():
    data = (batch(0, 2, attributes=0x10, producer_id=5)    # committed transaction of 5
            + control(2, 5, commit=True)
            + batch(3, 2, attributes=0x10, producer_id=6)  # aborted transaction of 6
            + batch(5, 1)                                  # not transactional
            + control(6, 6, commit=False)
            + batch(7, 2, attributes=0x10, producer_id=6))  # a later transaction of 6, not aborted
    decisions = [(b.base_offset, keep) for b, keep in committed(split(data), aborted=[(6, 3)])]
    assert decisions == [(0, True), (2, False), (3, False), (5, True), (6, False), (7, True)]


def test_a_raw_callback_failing_fails_the_run_but_not_the_selector_closed_by_a_stop():
    from mirror_maker.engine.state import RunState
    from mirror_maker.shallow.connections import guarded

    def closed(*args):
        raise RuntimeError("NetworkSelector closed!")

    running = RunState()
    guarded(closed, running)(None)
    assert running.failed  # while mirroring it is a failure
    stopping = RunState()
    stopping.request_stop()
    guarded(closed, stopping)(None)
    assert not stopping.failed  # the stop already flushed and committed
    guarded(lambda *a: 1 / 0, stopping)(None)
    assert stopping.failed  # anything else still fails the run
    assert str(stopping.failure) == "raw path: ZeroDivisionError: division by zero"


def test_a_raw_callback_failure_names_a_kafka_error_once():
    """kafka-python's errors start with their type already: the line does not say it twice."""
    from kafka.errors import KafkaConnectionError

    from mirror_maker.engine.state import RunState
    from mirror_maker.shallow.connections import guarded

    def lost(*args):
        raise KafkaConnectionError("socket disconnected")

    state = RunState()
    guarded(lost, state)(None)
    assert str(state.failure) == "raw path: KafkaConnectionError: socket disconnected"


def test_a_checked_batch_is_rewritten_from_its_own_bytes_only():
    first, second = batch(base_offset=40, count=3), batch(base_offset=43, count=2, producer_id=9)
    parsed = split(first + second)[1]
    assert parsed.checked() is parsed and parsed.crc_checked
    header, records = rewrite(parsed, producer_id=5, producer_epoch=0, base_sequence=0)
    assert bytes(records) == second[HEADER_SIZE:] and len(header) == HEADER_SIZE
