"""The CRC-32C of a batch whose header changed, without reading its records a second time.

Raw mode reads every source batch once to check its CRC, and must send it with a new one: the
rewrite changes header fields that the CRC covers (attributes, producer id, epoch, sequence). A
second pass over the records cost as much as the check. CRC-32C is linear, so for two messages of
the same length that differ only in their first bytes, the two CRCs differ by the difference of
the CRC registers after those bytes, carried through as many zero bytes as follow. Carrying a
32-bit register through n zero bytes is a linear map; it is built here from the maps for powers of
two (four table look-ups each), so the new CRC costs a few look-ups whatever the batch's size.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Callable, List

import google_crc32c

_POLY = 0x82F63B78  # CRC-32C (Castagnoli), bit-reflected as Kafka computes it
_LEVELS = 31  # a batch's length is an int32
#: Below this many bytes a copy of the records and a pass over it cost less than the look-ups
#: (which grow with the length's 1 bits).
PASS_BELOW = 64 * 1024

_Tables = List[List[int]]


def _through_one_zero_byte(register: int) -> int:
    for _ in range(8):
        register = (register >> 1) ^ (_POLY if register & 1 else 0)
    return register


def _tables(linear_map: Callable[[int], int]) -> _Tables:
    """``linear_map`` as four tables, one per byte of the register, built from its value on each
    bit (the map is linear, so a byte's entry is the XOR of its bits' entries)."""
    tables = []
    for byte in range(4):
        table = [0] * 256
        for bit in range(8):
            table[1 << bit] = linear_map(1 << (8 * byte + bit))
        for value in range(3, 256):
            lowest = value & -value
            if value != lowest:
                table[value] = table[lowest] ^ table[value ^ lowest]
        tables.append(table)
    return tables


def _apply(tables: _Tables, register: int) -> int:
    low, second, third, high = tables
    return low[register & 0xFF] ^ second[(register >> 8) & 0xFF] ^ third[(register >> 16) & 0xFF] ^ high[register >> 24]


@lru_cache(maxsize=None)  # built on first use: a process that never forwards a large batch skips it
def _levels() -> List[_Tables]:
    levels = [_tables(_through_one_zero_byte)]  # level k: through 2**k zero bytes
    while len(levels) < _LEVELS:
        previous = levels[-1]
        levels.append(_tables(lambda register, previous=previous: _apply(previous, _apply(previous, register))))
    return levels


def through_zeros(register: int, length: int) -> int:
    """``register`` carried through ``length`` zero bytes."""
    levels, level = _levels(), 0
    while length:
        if length & 1:
            register = _apply(levels[level], register)
        length >>= 1
        level += 1
    return register


def with_new_prefix(crc: int, old_prefix: bytes, new_prefix: bytes, rest) -> int:
    """The CRC-32C of ``new_prefix`` + ``rest`` (bytes or a view), given ``crc``, that of
    ``old_prefix`` + ``rest`` (the two prefixes are as long). Below PASS_BELOW bytes of ``rest`` a
    pass over a copy of it (google_crc32c takes bytes) is cheaper than the look-ups, and is made
    instead."""
    if len(old_prefix) != len(new_prefix):
        raise ValueError(f"prefixes of {len(old_prefix)} and {len(new_prefix)} bytes")
    if len(rest) < PASS_BELOW:
        return google_crc32c.extend(google_crc32c.value(new_prefix), bytes(rest))
    difference = google_crc32c.value(old_prefix) ^ google_crc32c.value(new_prefix)
    return crc ^ through_zeros(difference, len(rest))
