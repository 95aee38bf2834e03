"""``cutover`` without brokers: where each group is placed, and which step's failure decides the
exit status."""

from mirror_maker.cli import exit_codes
from mirror_maker.cutover.drain import Drained
from mirror_maker.cutover.flow import Cutover
from mirror_maker.cutover.groups import Placement, groups_moved, plan
from mirror_maker.records import TopicPartition
from mirror_maker.verify import compare
from mirror_maker.verify.fingerprint import Fingerprints, fingerprint
from mirror_maker.verify.report import IN_ORDER, MULTISET, Report, Row


def _partition(offsets):
    sequence = Fingerprints()
    for i, offset in enumerate(offsets):
        sequence.add(offset, fingerprint(b"k", f"v{i}".encode(), None, 1))
    return sequence


def _row(partition, source_offsets, target_offsets, target_end):
    source, target = _partition(source_offsets), _partition(target_offsets)
    return Row("orders", partition, "A.orders", IN_ORDER, [(partition, 0, source_offsets[-1] + 1)],
               [(partition, 0, target_end)], len(source), len(target),
               outcome=compare.in_order(source, target, False, False), sequences=(source, target, target_end))


def test_each_group_is_placed_before_the_target_record_of_the_first_source_record_it_has_not_read():
    # Partition 0 as it is; partition 1 from an exactly-once mirror (a marker after every 2 records).
    rows = [_row(0, list(range(6)), list(range(6)), 6), _row(1, list(range(4)), [0, 1, 3, 4], 6)]
    committed = {"app": {TopicPartition("orders", 0): 4, TopicPartition("orders", 1): 2},
                 "late": {TopicPartition("orders", 1): 4}, "new": {TopicPartition("orders", 0): 0}}
    placed = {(p.group, p.source.partition): (p.target_topic, p.target_offset, p.ok) for p in plan(committed, rows)}
    assert placed == {("app", 0): ("A.orders", 4, True), ("app", 1): ("A.orders", 3, True),
                      ("late", 1): ("A.orders", 6, True), ("new", 0): ("A.orders", 0, True)}


def test_a_partition_not_compared_record_for_record_or_not_complete_is_never_placed():
    incomplete = _row(0, list(range(6)), list(range(5)), 5)  # a record missing on the target
    multiset = Row("orders", None, "orders", MULTISET)
    placements = plan({"app": {TopicPartition("orders", 0): 3, TopicPartition("other", 0): 1}}, [incomplete, multiset])
    assert [(p.source.topic, p.target_offset, p.ok) for p in placements] == [("orders", None, False),
                                                                             ("other", None, False)]
    assert "does not hold" in placements[0].result and "record for record" in placements[1].result


def test_a_group_that_committed_meanwhile_is_named():
    tp = TopicPartition("orders", 0)
    assert groups_moved({"a": {tp: 1}, "b": {tp: 2}}, {"a": {tp: 1}, "b": {tp: 3}, "c": {tp: 0}}) == ["b", "c"]


def _cutover(drained=Drained(0, True, 0), differs=False, proven=True, moved=(), placed=True):
    result = Cutover("A", "B", 60.0, drained=drained, moved=list(moved))
    row = Row("orders", 0, "A.orders", IN_ORDER, unfinished=[] if proven else ["orders-0"])
    if differs:
        row.outcome.add(compare.Difference("missing", 1, source_offset=3, target_offset=3))
    result.verified = Report("A", "B", 0.0, rows=[row])
    result.placements = [Placement("app", TopicPartition("orders", 0), 3, "A.orders", 3,
                                   "placed" if placed else "not placed: the group has members on the target")]
    return result


def test_the_status_names_the_first_step_that_did_not_hold():
    assert _cutover().status() == exit_codes.OK and _cutover().complete
    assert "cut over: the target holds every record of the source and 1 group is placed" in _cutover().verdict()
    assert _cutover(drained=Drained(255, True, 0, "a record refused")).status() == exit_codes.FATAL
    not_drained = _cutover(drained=Drained(0, False, 120))
    assert not_drained.status() == exit_codes.CUTOVER_INCOMPLETE == 5
    assert "not drained within --timeout.ms (60 s): 120 records still to mirror" in not_drained.verdict()
    unacknowledged = _cutover(drained=Drained(0, True, 0, unacknowledged=100, unreachable={"target": 22.4}))
    assert unacknowledged.status() == exit_codes.CUTOVER_INCOMPLETE
    assert ("not drained: 100 records not acknowledged by the target before --shutdown.timeout.ms (the target "
            "cluster unreachable for 22 s)") in unacknowledged.verdict()
    assert _cutover(differs=True).status() == exit_codes.TARGET_DIFFERS
    assert _cutover(proven=False).status() == exit_codes.NOT_PROVEN
    # Records written after the drain explain the difference: the source moved, not the mirror.
    moving = _cutover(differs=True, moved=["orders-0 was written to during the cutover"])
    assert moving.status() == exit_codes.CUTOVER_INCOMPLETE and "written to during the cutover" in moving.verdict()
    unplaced = _cutover(placed=False)
    assert unplaced.status() == exit_codes.CUTOVER_INCOMPLETE and "1 group partitions not placed" in unplaced.verdict()
    assert any("has members on the target" in line for line in unplaced.table())


def test_a_group_is_placed_whole_or_not_at_all():
    from mirror_maker.cutover.groups import place

    class Admin:
        def alter_consumer_group_offsets(self, requests, request_timeout):
            raise AssertionError("nothing may be committed")

    placements = [Placement("app", TopicPartition("orders", 0), 3, "A.orders", 3),
                  Placement("app", TopicPartition("events", 0), 9, "", None, "not placed: compacted")]
    place(Admin(), placements)
    assert placements[0].result == "not placed: another partition of the group cannot be placed"


def test_a_signal_during_the_checks_stops_before_placing_and_during_the_placement_after_it():
    import os
    import signal

    from mirror_maker.cutover.flow import _Stopped, _StopBeforePlacing

    stop, placed = _StopBeforePlacing(), []
    with stop:
        try:
            os.kill(os.getpid(), signal.SIGTERM)
            for _ in range(1000):  # the handler runs between two bytecodes
                placed.append("checked")
        except _Stopped as stopped:
            assert stopped.signum == signal.SIGTERM and len(placed) < 1000
        placed.clear()
        try:
            with stop.deferred():
                os.kill(os.getpid(), signal.SIGINT)
                placed += ["group"] * 1000
        except _Stopped as stopped:
            assert stopped.signum == signal.SIGINT and len(placed) == 1000  # the placement finished first
    assert signal.getsignal(signal.SIGTERM) is not stop._handle
    stopped = _cutover()
    stopped.stopped = signal.SIGTERM
    assert stopped.status() == exit_codes.SIGTERM and "stopped by SIGTERM after placing 1 group" in stopped.verdict()
