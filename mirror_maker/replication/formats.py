"""MirrorMaker 2's record formats (``OffsetSync``, ``Checkpoint``, ``Heartbeat`` in
connect-mirror), in Kafka's protocol encoding: big-endian integers, STRING = int16 length + UTF-8.
MirrorMaker 2's own clients (``RemoteClusterUtils``) read what is written here."""

from __future__ import annotations

import struct
from typing import NamedTuple, Optional, Tuple

VERSION = 0


class OffsetSync(NamedTuple):
    topic: str  # the source topic
    partition: int
    upstream_offset: int
    downstream_offset: int


class Checkpoint(NamedTuple):
    group: str
    topic: str  # the remote (target) topic
    partition: int
    upstream_offset: int
    downstream_offset: int
    metadata: str = ""


class Heartbeat(NamedTuple):
    source_alias: str
    target_alias: str
    timestamp_ms: int


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack(">h", len(data)) + data


def _read_string(data: bytes, at: int) -> Tuple[str, int]:
    (length,) = struct.unpack_from(">h", data, at)
    at += 2
    return data[at:at + length].decode(), at + length


def encode_offset_sync(sync: OffsetSync) -> Tuple[bytes, bytes]:
    """(key, value): key topic, partition; value upstreamOffset, offset (no version header)."""
    return (_string(sync.topic) + struct.pack(">i", sync.partition),
            struct.pack(">qq", sync.upstream_offset, sync.downstream_offset))


#: Our header on an offset sync: the (upstream, downstream) of the sync before it, when every
#: record between the two went to the target one for one (``checkpoints.OffsetSyncStore``
#: interpolates only then). MirrorMaker 2 reads only the key and the value.
CONTINUES_HEADER = "kafka-mirror-maker.continues"


def encode_continues(previous: Tuple[int, int]) -> bytes:
    return struct.pack(">qq", *previous)


def decode_continues(headers) -> Optional[Tuple[int, int]]:
    """The sync a sync's headers say it continues, if any."""
    for name, value in headers or ():
        if name == CONTINUES_HEADER and value is not None and len(value) == 16:
            return struct.unpack(">qq", value)
    return None


def decode_offset_sync(key: bytes, value: bytes) -> OffsetSync:
    topic, at = _read_string(key, 0)
    (partition,) = struct.unpack_from(">i", key, at)
    upstream, downstream = struct.unpack(">qq", value)
    return OffsetSync(topic, partition, upstream, downstream)


def encode_checkpoint(cp: Checkpoint) -> Tuple[bytes, bytes]:
    """(key, value): key group, topic, partition; value version, upstreamOffset, offset, metadata."""
    return (_string(cp.group) + _string(cp.topic) + struct.pack(">i", cp.partition),
            struct.pack(">hqq", VERSION, cp.upstream_offset, cp.downstream_offset) + _string(cp.metadata))


def decode_checkpoint(key: bytes, value: bytes) -> Checkpoint:
    group, at = _read_string(key, 0)
    topic, at = _read_string(key, at)
    (partition,) = struct.unpack_from(">i", key, at)
    _version, upstream, downstream = struct.unpack_from(">hqq", value, 0)
    metadata, _ = _read_string(value, 18)
    return Checkpoint(group, topic, partition, upstream, downstream, metadata)


def encode_heartbeat(hb: Heartbeat) -> Tuple[bytes, bytes]:
    """(key, value): key sourceClusterAlias, targetClusterAlias; value version, timestamp."""
    return _string(hb.source_alias) + _string(hb.target_alias), struct.pack(">hq", VERSION, hb.timestamp_ms)


def decode_heartbeat(key: bytes, value: bytes) -> Heartbeat:
    source, at = _read_string(key, 0)
    target, _ = _read_string(key, at)
    _version, timestamp = struct.unpack(">hq", value)
    return Heartbeat(source, target, timestamp)
