"""A record's fingerprint: 8 bytes of BLAKE2b over its key, value, headers and (where both sides
keep the producer's timestamps) its timestamp, the same in every process and on every Python, so
that a report's digests can be compared between runs. 64 bits make a chance match of two
different records at one position about 1 in 10^19."""

from __future__ import annotations

import bisect
import hashlib
import pickle
from array import array
from typing import List, Optional, Sequence, Tuple

SIZE = 8


def fingerprint(key: Optional[bytes], value: Optional[bytes], headers: Optional[Sequence[Tuple[str, Optional[bytes]]]],
                timestamp: Optional[int]) -> bytes:
    """Pickle (protocol 4) is deterministic for bytes, str, int, None and tuples, and encodes in C:
    the fingerprint costs about what reading the record did."""
    encoded = pickle.dumps((key, value, tuple(headers) if headers else (), timestamp), 4)
    return hashlib.blake2b(encoded, digest_size=SIZE).digest()


class Fingerprints:
    """One partition's records in offset order, as fingerprints (8 bytes each) and their offsets
    (kept as runs of consecutive offsets: gaps, from compaction or transaction markers, are few)."""

    def __init__(self) -> None:
        self.digests = bytearray()
        #: (index of the run's first record, its offset), one per run of consecutive offsets.
        self._runs_at: List[int] = []
        self._runs_offset = array("q")
        self._next_offset = -1

    def __len__(self) -> int:
        return len(self.digests) // SIZE

    def add(self, offset: int, digest: bytes) -> None:
        if offset != self._next_offset:
            self._runs_at.append(len(self))
            self._runs_offset.append(offset)
        self._next_offset = offset + 1
        self.digests += digest

    def at(self, index: int) -> bytes:
        return bytes(self.digests[index * SIZE:(index + 1) * SIZE])

    def offset(self, index: int) -> int:
        run = bisect.bisect_right(self._runs_at, index) - 1
        return self._runs_offset[run] + index - self._runs_at[run]

    def prefix(self, count: int) -> "Fingerprints":
        """The first ``count`` records (a side read only that far)."""
        if count >= len(self):
            return self
        cut = Fingerprints()
        for index in range(count):
            cut.add(self.offset(index), self.at(index))
        return cut

    def count_before(self, offset: int) -> int:
        """How many records have an offset below ``offset``: where a reader at ``offset`` is."""
        run = bisect.bisect_left(self._runs_offset, offset) - 1
        if run < 0:
            return 0
        ends = self._runs_at[run + 1] if run + 1 < len(self._runs_at) else len(self)
        return self._runs_at[run] + min(offset - self._runs_offset[run], ends - self._runs_at[run])

    def index_of(self, digest: bytes, start: int = 0, stop: Optional[int] = None) -> int:
        """The first record in ``[start, stop)`` with this fingerprint, or -1."""
        end = len(self.digests) if stop is None else min(len(self.digests), stop * SIZE)
        at = self.digests.find(digest, start * SIZE, end)
        while at != -1 and at % SIZE:  # a match across two fingerprints
            at = self.digests.find(digest, at + 1, end)
        return -1 if at == -1 else at // SIZE

    def digest(self) -> str:
        """The whole partition's digest, for the report."""
        return hashlib.blake2b(bytes(self.digests), digest_size=16).hexdigest()
