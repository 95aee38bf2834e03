"""The runner's topic subscription: matching topics with their partition counts, refreshed; a
source that cannot be reached is named and retried, and a stop ends the wait for it."""

import re

from mirror_maker.engine.subscription import TopicSubscription

from .test_admin import AwayAdmin, FakeAdmin, Run, held


def subscription(admin, state=None):
    return TopicSubscription(admin, re.compile("orders.*"), True, 30000, "source:9092", state=state)


def test_matching_topics_with_their_partition_counts():
    topics = subscription(FakeAdmin({"orders": 3, "orders-eu": 2, "payments": 4}))
    topics.refresh_if_due(now=0.0)
    assert topics.current() == (1, ["orders", "orders-eu"])
    assert topics.partitions() == (1, {"orders": 3, "orders-eu": 2})


def test_a_source_that_cannot_be_reached_is_named_and_retried(caplog, monkeypatch):
    admin, clock = held(monkeypatch, {"orders": 3}, away=1000)
    topics = subscription(admin, Run())
    topics.refresh_if_due(now=100.0)
    assert clock[0] == 5.0  # the refresh's whole wait
    assert "Cannot reach the source cluster at source:9092 to list its topics" in caplog.text
    admin.away = 0
    topics.refresh_if_due(now=101.0)  # retried a second later
    assert topics.current() == (1, ["orders"])


def test_a_stop_ends_the_wait_for_the_source_without_naming_it_unreachable(caplog):
    admin = AwayAdmin({"orders": 3}, away=1000)
    run = Run(stop_after=1)
    subscription(admin, run).refresh_if_due(now=100.0)
    assert len(admin.timeouts) == 2 and run.stopping  # the request under way, then out
    assert "Cannot reach" not in caplog.text
