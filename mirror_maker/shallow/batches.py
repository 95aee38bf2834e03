"""Kafka v2 record batches as bytes: find them in a fetch response, decide which may be forwarded
as they are, and rewrite the few header fields that must change on the target.

A v2 batch header (offsets in bytes): baseOffset 0 (int64) | batchLength 8 (int32, counted from
byte 12) | partitionLeaderEpoch 12 | magic 16 | crc 17 (CRC-32C of bytes 21..end) | attributes 21
(bits 0-2 codec, 3 LogAppendTime, 4 transactional, 5 control) | lastOffsetDelta 23 | baseTimestamp
27 | maxTimestamp 35 | producerId 43 | producerEpoch 51 | baseSequence 53 | recordCount 57 |
records 61. Nothing here decompresses a record: work is per batch, never per record.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import Iterable, List, Optional, Tuple

import google_crc32c

from ..records import RawBatch
from .crc import with_new_prefix
from .produce_request import Parts

HEADER = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE = HEADER.size  # 61
_OFFSET_AND_LENGTH = struct.Struct(">qi")
_CRC = struct.Struct(">I")
_CRC_AT = 17
_CRC_COVERS_FROM = 21  # the CRC covers the header from attributes on, and the records
_LOG_OVERHEAD = 12  # baseOffset and batchLength precede what batchLength counts
MAGIC_AT = 16

CODECS = {0: "none", 1: "gzip", 2: "snappy", 3: "lz4", 4: "zstd"}
_TIMESTAMP_LOG_APPEND = 0x08
_TRANSACTIONAL = 0x10
_CONTROL = 0x20


class CorruptBatch(Exception):
    """A batch whose bytes do not match its CRC-32C."""


@dataclass  # not frozen: a frozen dataclass is built 5 times slower, and this is one per batch
class Batch:
    """One complete batch (or, magic 0/1, one legacy message set entry) inside ``data``.

    ``crc_checked``: its records match the CRC the source stored (``checked``), which the
    rewrite's new CRC is derived from. ``answer_share``: bytes of the fetch answer ``data`` this
    batch keeps in memory besides its own (the answer's last forwarded batch carries what was not
    forwarded, see ``share_answer``), counted as waiting for the target with it (``held``)."""

    data: bytes
    start: int
    end: int
    base_offset: int
    last_offset: int
    magic: int
    attributes: int = 0
    record_count: int = 0
    producer_id: int = -1
    base_timestamp: int = -1
    max_timestamp: int = -1
    crc_checked: bool = False
    answer_share: int = 0

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def size(self) -> int:
        return self.end - self.start

    @property
    def held(self) -> int:
        return self.size + self.answer_share

    @property
    def codec(self) -> str:
        return CODECS.get(self.attributes & 0x07, "unknown")

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & _CONTROL)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & _TRANSACTIONAL)

    def describe(self, topic: str, partition: int) -> RawBatch:
        """What a raw handler sees of this batch (a legacy entry: no record count or times)."""
        return RawBatch(topic, partition, self.base_offset, self.last_offset, self.record_count, self.codec,
                        self.size, self.base_timestamp, self.max_timestamp)

    def checked(self) -> "Batch":
        """This batch, once its records match the CRC the source stored (over bytes 21 to the
        end): the rewrite gives the batch a new CRC, which would make a corrupt batch valid on
        the target. The CRC runs over a copy dropped at once (google_crc32c takes bytes, not a
        view): a copy kept until the batch is sent, one per batch waiting for the target, took
        fresh memory pages for every fetch and cost more than the CRC itself."""
        stored = _CRC.unpack_from(self.data, self.start + _CRC_AT)[0]
        computed = google_crc32c.value(bytes(self.data[self.start + _CRC_COVERS_FROM:self.end]))
        if computed != stored:
            raise CorruptBatch(f"CRC-32C stored {stored:#010x}, computed {computed:#010x}")
        self.crc_checked = True
        return self

    def why_not_raw(self, max_bytes: Optional[int] = None) -> Optional[str]:
        """Why this batch cannot be forwarded as it is (the record path takes it), or None."""
        if self.magic != 2:
            return f"magic {self.magic}"
        if self.last_offset - self.base_offset + 1 != self.record_count:
            return "offset holes (compaction)"  # Kafka requires lastOffsetDelta + 1 == recordCount
        if self.attributes & _TIMESTAMP_LOG_APPEND:
            return "LogAppendTime"  # the target refuses it; its records' times would change
        if max_bytes is not None and self.size > max_bytes:
            return "larger than the target's max.message.bytes"
        return None


def split(data: bytes) -> List[Batch]:
    """The complete batches of a fetch response's records (a partial last one is left out: the
    next fetch starts at its offset again)."""
    batches, pos, size = [], 0, len(data)
    while pos + _LOG_OVERHEAD + 5 <= size:
        base_offset, length = _OFFSET_AND_LENGTH.unpack_from(data, pos)
        end = pos + _LOG_OVERHEAD + length
        if end > size or length <= 0:
            break
        magic = data[pos + MAGIC_AT]
        if magic == 2 and length + _LOG_OVERHEAD >= HEADER_SIZE:
            (_b, _l, _epoch, _m, _crc, attributes, last_delta, base_ts, max_ts, producer_id, _pe, _seq,
             count) = HEADER.unpack_from(data, pos)
            batches.append(Batch(data, pos, end, base_offset, base_offset + last_delta, 2, attributes,
                                 count, producer_id, base_ts, max_ts))
        else:  # a legacy entry: its offset is the last offset it holds (a compressed wrapper's too)
            batches.append(Batch(data, pos, end, base_offset, base_offset, magic))
        pos = end
    return batches


def share_answer(batches: List[Batch], answer_size: int) -> None:
    """What the batches forwarded from one fetch answer keep in memory: the answer itself, until
    the last of them is acknowledged. An answer mostly skipped (aborted transactions, batches the
    record path takes, a large partial last batch) gives its few forwarded batches copies of their
    own instead, so that it is freed at once; otherwise its last forwarded batch carries the rest
    of it, so that the buffer's bound counts every byte held."""
    forwarded = sum(batch.size for batch in batches)
    if not batches or forwarded == answer_size:
        return
    if 2 * forwarded < answer_size:
        for batch in batches:
            batch.data, batch.start, batch.end = bytes(batch.data[batch.start:batch.end]), 0, batch.size
    else:
        batches[-1].answer_share = answer_size - forwarded


def rewrite(batch: Batch, producer_id: int, producer_epoch: int, base_sequence: int) -> Parts:
    """The checked batch as the target must receive it: base offset 0, no leader epoch, not
    transactional, our producer id, epoch and sequence, and its CRC changed to match. The
    records are kept as they are (same compression, same record count, same timestamps): the new
    header and a view of the records, not joined (the request sends both pieces)."""
    if not batch.crc_checked:
        raise ValueError("only a checked batch is rewritten: its CRC is the base of the new one")
    data, start = batch.data, batch.start
    fields = list(HEADER.unpack_from(data, start))
    old_covered = bytes(data[start + _CRC_COVERS_FROM:start + HEADER_SIZE])
    # Not copied: the fetch answer's bytes go to the socket as they are (share_answer).
    records = memoryview(data)[start + HEADER_SIZE:batch.end]
    fields[0] = 0
    fields[2] = -1
    fields[5] &= ~_TRANSACTIONAL
    fields[9], fields[10], fields[11] = producer_id, producer_epoch, base_sequence
    fields[4] = with_new_prefix(fields[4], old_covered, HEADER.pack(*fields)[_CRC_COVERS_FROM:], records)
    return Parts((HEADER.pack(*fields), records))


def committed(batches: Iterable[Batch], aborted: Iterable[Tuple[int, int]]) -> List[Tuple[Batch, bool]]:
    """read_committed rules over one partition's batches: (batch, forward it?) in order.

    ``aborted`` is the fetch response's (producer id, first offset) list. A transactional batch
    of a producer with an aborted transaction that started at or before the batch's last offset
    is dropped; a control batch (a commit or abort marker) is dropped, and an abort marker ends
    that producer's aborted range. Every batch still moves the position past it.
    """
    pending = sorted(aborted, key=lambda entry: entry[1])
    open_aborts = set()
    out = []
    for batch in batches:
        while pending and pending[0][1] <= batch.last_offset:
            open_aborts.add(pending.pop(0)[0])
        if batch.is_control:
            if batch.producer_id in open_aborts and _is_abort_marker(batch):
                open_aborts.discard(batch.producer_id)
            out.append((batch, False))
        elif batch.is_transactional and batch.producer_id in open_aborts:
            out.append((batch, False))
        else:
            out.append((batch, True))
    return out


def _is_abort_marker(batch: Batch) -> bool:
    """A control record's key is (version int16, type int16): type 0 aborts, 1 commits. The one
    record of a control batch starts right after the header, as an uncompressed v2 record:
    length (varint), attributes (int8), timestamp and offset deltas (varints), key length
    (varint), key."""
    data, pos = batch.data, batch.start + HEADER_SIZE
    pos = _skip_varint(data, pos)  # length
    pos += 1  # attributes
    pos = _skip_varint(data, pos)  # timestamp delta
    pos = _skip_varint(data, pos)  # offset delta
    pos = _skip_varint(data, pos)  # key length
    _version, kind = struct.unpack_from(">hh", data, pos)
    return kind == 0


def _skip_varint(data: bytes, pos: int) -> int:
    while data[pos] & 0x80:
        pos += 1
    return pos + 1
