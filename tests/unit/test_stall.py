"""The stall report: no acknowledgement or commit while records wait is a stall, named in the
status line (a WARN), the metric and /ready; waiting with nothing to wait for is not."""

import logging

from mirror_maker.ops.stall import ProgressWatch
from mirror_maker.ops.status import StatusReporter


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def totals(acked=0, commits=0, queued=0, lag=0):
    return {"records": acked, "bytes": 0, "acked": acked, "lag": lag, "dropped": 0, "filtered": 0,
            "assigned": 2, "queued": queued, "commits": commits, "rebalanced": True, "at_end": False}


def test_no_progress_while_records_wait_is_a_stall_after_the_threshold_and_progress_ends_it():
    clock = Clock()
    watch = ProgressWatch(15.0, clock)
    assert watch.look(totals(acked=10, queued=5)) == 0.0
    clock.now = 14.0
    assert watch.look(totals(acked=10, queued=5)) == 0.0
    clock.now = 20.0
    assert watch.look(totals(acked=10, queued=5)) == 20.0  # "lag 0" would have hidden it
    assert watch.look(totals(acked=11, queued=5)) == 0.0  # one acknowledgement is progress
    clock.now = 40.0
    assert watch.look(totals(acked=11, commits=1, lag=3)) == 0.0  # a commit too


def test_nothing_waiting_is_no_stall_however_long_it_lasts():
    clock = Clock()
    watch = ProgressWatch(15.0, clock)
    watch.look(totals(acked=10))
    clock.now = 1000.0
    assert watch.look(totals(acked=10)) == 0.0


def test_the_status_line_says_stalled_as_a_warning(caplog):
    clock = Clock()
    snapshot = {"value": totals(acked=10, queued=5)}
    reporter = StatusReporter(lambda: snapshot["value"], 30.0, clock=clock, stall_s=15.0)
    caplog.set_level(logging.INFO, logger="mirror_maker.status")
    clock.now = 31.0
    reporter.tick()
    (record,) = [r for r in caplog.records if r.name == "mirror_maker.status"]
    assert record.levelno == logging.WARNING and "STALLED for 31 s" in record.getMessage()
    assert reporter.stalled_s == 31.0


def test_a_long_stall_is_a_warning_when_it_starts_and_each_time_its_age_doubles(caplog):
    """Every status line of a 30 s outage was a WARN: the log said it in a flood."""
    clock = Clock()
    snapshot = {"value": totals(acked=10, queued=5)}
    reporter = StatusReporter(lambda: snapshot["value"], 10.0, clock=clock, stall_s=15.0)
    caplog.set_level(logging.INFO, logger="mirror_maker.status")
    for now in (10.0, 20.0, 30.0, 40.0, 50.0, 60.0):
        clock.now = now
        reporter.tick()
    levels = [(r.levelno, "STALLED" in r.getMessage()) for r in caplog.records if r.name == "mirror_maker.status"]
    assert levels == [(logging.INFO, False), (logging.WARNING, True), (logging.INFO, True),
                      (logging.WARNING, True), (logging.INFO, True), (logging.INFO, True)]
    snapshot["value"] = totals(acked=11, queued=5)  # progress: the next stall warns again from its start
    clock.now = 70.0
    reporter.tick()
    snapshot["value"] = totals(acked=11, queued=5)
    clock.now = 90.0
    caplog.clear()
    reporter.tick()
    assert [r.levelno for r in caplog.records if r.name == "mirror_maker.status"] == [logging.WARNING]
