"""The new CRC-32C of a rewritten batch, derived from the checked one, against a full computation."""

import random

import google_crc32c
import pytest

from mirror_maker.shallow.crc import PASS_BELOW, through_zeros, with_new_prefix


@pytest.mark.parametrize("length", [0, 1, 7, 4096, PASS_BELOW - 1, PASS_BELOW, 65_537, 1_000_003])
def test_a_new_prefix_gives_the_crc_a_full_pass_gives(length):
    draw = random.Random(length)
    old, new = draw.randbytes(40), draw.randbytes(40)
    rest = draw.randbytes(length)
    derived = with_new_prefix(google_crc32c.value(old + rest), old, new, rest)
    assert derived == google_crc32c.value(new + rest)


@pytest.mark.parametrize("length", [0, 1, 255, 65_536, 1_000_003])
def test_through_zeros_is_a_pass_over_zeros(length):
    register = 0x1234ABCD  # a CRC register is the complement of the CRC so far
    expected = ~google_crc32c.extend(~register & 0xFFFFFFFF, bytes(length)) & 0xFFFFFFFF
    assert through_zeros(register, length) == expected
    assert through_zeros(0, length) == 0


def test_prefixes_of_different_lengths_are_refused():
    with pytest.raises(ValueError, match="prefixes of 3 and 4 bytes"):
        with_new_prefix(0, b"abc", b"abcd", b"rest")
