"""The test brokers' coordinator rule gives Java's values, so the broker-failure tests SIGKILL the
node that really coordinates a group or a transactional id."""

import pytest

from ..brokers.apache_kafka import coordinator_partition, java_string_hash


@pytest.mark.parametrize("text,expected", [
    ("", 0),
    ("hello", 99162322),
    ("Aa", 2112),
    ("BB", 2112),
    ("polygenelubricants", -2**31),  # Integer.MIN_VALUE
    ("\u00e9", 233),
    ("\U0001F600", 0xD83D * 31 + 0xDE00),  # two UTF-16 code units
])
def test_java_string_hash(text, expected):
    assert java_string_hash(text) == expected


def test_coordinator_partition_is_kafkas_utils_abs_modulo():
    assert coordinator_partition("hello", 10) == 99162322 % 10
    assert coordinator_partition("polygenelubricants", 50) == 0  # Utils.abs(MIN_VALUE) is 0
    negative = "hello world, and more"
    assert java_string_hash(negative) < 0
    assert coordinator_partition(negative, 50) == -java_string_hash(negative) % 50
