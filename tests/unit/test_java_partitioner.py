"""The test helper's murmur2 gives Kafka's own UtilsTest values, so partition checks mean something."""

import pytest

from ..java_partitioner import murmur2


@pytest.mark.parametrize("key,expected", [
    ("21", -973932308),
    ("foobar", -790332482),
    ("a-little-bit-long-string", -985981536),
    ("a-little-bit-longer-string", -1486304829),
    ("lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    ("abc", 479470107),
])
def test_murmur2_matches_kafka(key, expected):
    assert murmur2(key.encode()) == expected
