"""A ProduceRequest's bytes as chunks that refer to the batches instead of holding copies of them.

kafka-python encodes a request into one buffer and hands out a copy of it: with the rewrite's
join of the new batch header and the records, three copies of every byte the raw path sends
before the socket's own (a profile of raw mode on 100 KB uncompressed records: a fifth of the
stream thread's time in them). Here each batch stays two pieces, its rewritten 61-byte header and
a view of its records in the fetch answer (:class:`Parts`), and the request is those pieces with
the protocol's bytes between them, handed to the socket in one ``sendmsg`` (frames.py).

Only version 9 is encoded here (the raw path's newest Produce version that names topics); a
broker that negotiates an older one gets kafka-python's own encoding of the joined batches
(:func:`join_parts`). The bytes are the same as kafka-python's (its encoder is the reference in
tests/unit/test_raw_frames.py).
"""

from __future__ import annotations

import struct

#: The Produce version encoded here: flexible (compact strings and arrays, tagged fields).
API_VERSION = 9
_PRODUCE_API_KEY = 0
_HEADER = struct.Struct(">ihhih")  # frame size, api key, version, correlation id, client id length
_ACKS_TIMEOUT = struct.Struct(">hi")
_INT32 = struct.Struct(">i")
_NO_TAGS = b"\x00"


class Parts(tuple):
    """One batch as it goes out: its pieces in order, sent without being joined."""

    __slots__ = ()

    def joined(self) -> bytes:
        return b"".join(self)


class Chunks(list):
    """What a request (or several) is on the wire, piece by piece (see the module docstring)."""

    __slots__ = ()


def carries_parts(request) -> bool:
    """A ProduceRequest whose batches are :class:`Parts` (the raw producer's)."""
    if getattr(request, "API_KEY", None) != _PRODUCE_API_KEY or not request.topic_data:
        return False
    first = request.topic_data[0].partition_data
    return bool(first) and isinstance(first[0].records, Parts)


def join_parts(request) -> None:
    """Each batch of ``request`` as one bytes object, for kafka-python's own encoder."""
    for topic in request.topic_data:
        for partition in topic.partition_data:
            if isinstance(partition.records, Parts):
                partition.records = partition.records.joined()


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _compact_string(value: str) -> bytes:
    data = value.encode("utf-8")
    return _uvarint(len(data) + 1) + data


def encode(request, correlation_id: int, client_id) -> Chunks:
    """The framed request (header v2, ProduceRequest v9) as chunks; batches as given."""
    client = b"" if client_id is None else client_id.encode("utf-8")
    head = bytearray(_HEADER.pack(0, _PRODUCE_API_KEY, API_VERSION, correlation_id,
                                  -1 if client_id is None else len(client)))
    head += client + _NO_TAGS
    if request.transactional_id is None:
        head += b"\x00"
    else:
        head += _compact_string(request.transactional_id)
    head += _ACKS_TIMEOUT.pack(request.acks, request.timeout_ms)
    head += _uvarint(len(request.topic_data) + 1)
    chunks, size = Chunks(), 0
    for topic in request.topic_data:
        head += _compact_string(topic.name) + _uvarint(len(topic.partition_data) + 1)
        for partition in topic.partition_data:
            records = partition.records
            pieces = records if isinstance(records, Parts) else (records,)
            length = sum(len(piece) for piece in pieces)
            head += _INT32.pack(partition.index) + _uvarint(length + 1)
            chunks.append(head)
            size += len(head)
            chunks.extend(pieces)
            size += length
            head = bytearray(_NO_TAGS)  # the partition's
        head += _NO_TAGS  # the topic's
    head += _NO_TAGS  # the request's
    chunks.append(head)
    size += len(head)
    struct.pack_into(">i", chunks[0], 0, size - 4)
    return chunks

