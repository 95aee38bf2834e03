"""``verify`` without brokers: fingerprints, and how each comparison names a record missing,
changed or duplicated on the target by the first offset it touches."""

import json

import pytest

from mirror_maker.cli import exit_codes
from mirror_maker.cli.verify import answer
from mirror_maker.verify import compare
from mirror_maker.verify.fingerprint import Fingerprints, fingerprint
from mirror_maker.records import TopicPartition
from mirror_maker.verify.report import IN_ORDER, MULTISET, Report, Row


def _records(values, offsets=None):
    sequence = Fingerprints()
    for i, value in enumerate(values):
        sequence.add(offsets[i] if offsets else i, fingerprint(b"k", value, [("h", b"1")], 1000))
    return sequence


SOURCE = [f"v{i}".encode() for i in range(100)]


def test_a_fingerprint_covers_key_value_headers_and_timestamp_and_is_stable():
    base = fingerprint(b"k", b"v", [("h", b"1")], 5)
    assert len(base) == 8 and base == fingerprint(b"k", b"v", (("h", b"1"),), 5)
    others = {fingerprint(b"K", b"v", [("h", b"1")], 5), fingerprint(b"k", b"w", [("h", b"1")], 5),
              fingerprint(b"k", b"v", [("h", b"2")], 5), fingerprint(b"k", b"v", [], 5),
              fingerprint(b"k", b"v", [("h", b"1")], 6), fingerprint(None, b"v", [("h", b"1")], 5),
              fingerprint(b"k", None, [("h", b"1")], 5), fingerprint(b"k", b"", [("h", b"1")], 5)}
    assert base not in others and len(others) == 8
    assert fingerprint(b"k", b"v", None, None) == fingerprint(b"k", b"v", [], None)
    assert base.hex() == "%s" % fingerprint(b"k", b"v", [("h", b"1")], 5).hex()


def test_offsets_are_kept_as_runs_across_gaps():
    sequence = _records([b"a", b"b", b"c", b"d"], offsets=[0, 1, 5, 6])
    assert [sequence.offset(i) for i in range(4)] == [0, 1, 5, 6]
    assert sequence.index_of(sequence.at(2)) == 2 and sequence.index_of(b"x" * 8) == -1


def test_identical_partitions_match_with_equal_digests_even_at_other_offsets():
    source, target = _records(SOURCE), _records(SOURCE, offsets=[i + 7 for i in range(100)])
    outcome = compare.in_order(source, target)
    assert outcome.matched == 100 and not outcome.differs and source.digest() == target.digest()


@pytest.mark.parametrize("at", [0, 41, 99])
def test_a_record_missing_on_the_target_is_named_by_its_source_offset(at):
    outcome = compare.in_order(_records(SOURCE), _records(SOURCE[:at] + SOURCE[at + 1:]))
    assert outcome.counts == {"missing": 1} and outcome.matched == 99
    assert outcome.differences[0].source_offset == at
    assert f"missing on the target from source offset {at}" in outcome.differences[0].describe()


@pytest.mark.parametrize("at", [0, 41, 99])
def test_a_record_changed_on_the_target_is_named_by_both_offsets(at):
    changed = list(SOURCE)
    changed[at] = b"changed"
    outcome = compare.in_order(_records(SOURCE), _records(changed))
    assert outcome.counts == {"different": 1} and outcome.matched == 99
    assert (outcome.differences[0].source_offset, outcome.differences[0].target_offset) == (at, at)


@pytest.mark.parametrize("at", [0, 41, 99])
def test_a_record_duplicated_on_the_target_is_named_as_an_extra_and_what_it_repeats(at):
    target = _records(SOURCE[:at + 1] + SOURCE[at:at + 1] + SOURCE[at + 1:])
    outcome = compare.in_order(_records(SOURCE), target)
    assert outcome.counts == {"extra": 1} and outcome.matched == 100
    assert outcome.differences[0].target_offset == at + 1 and outcome.differences[0].duplicate_of == at
    assert "a duplicate of source offset" in outcome.differences[0].describe()


def test_several_differences_are_each_counted_once_and_the_walk_goes_on():
    target = SOURCE[:10] + SOURCE[15:50] + [b"x"] + SOURCE[51:]
    target += [b"tail1", b"tail2"]
    outcome = compare.in_order(_records(SOURCE), _records(target))
    assert outcome.counts == {"missing": 5, "different": 1, "extra": 2}
    assert [(d.kind, d.source_offset) for d in outcome.differences] == [
        ("missing", 10), ("different", 50), ("extra", None)]


def test_retention_on_the_source_leaves_the_target_s_older_records_uncompared_not_extra():
    source = _records(SOURCE[30:], offsets=list(range(30, 100)))
    outcome = compare.in_order(source, _records(SOURCE), source_trimmed=True)
    assert not outcome.differs and outcome.matched == 70
    assert "30 target records before the source's log start" in outcome.not_compared[0]


def test_retention_on_the_target_is_not_compared_rather_than_missing_and_without_it_missing():
    target = _records(SOURCE[20:], offsets=list(range(20, 100)))
    outcome = compare.in_order(_records(SOURCE), target, target_trimmed=True)
    assert not outcome.differs and outcome.not_compared
    outcome = compare.in_order(_records(SOURCE), _records(SOURCE[20:]))
    assert outcome.counts == {"missing": 20}


def test_a_multiset_names_what_is_missing_and_what_is_extra_wherever_the_partitioner_put_it():
    multiset = compare.Multiset()
    for offset, value in enumerate(SOURCE):
        multiset.add_source(fingerprint(b"k", value, None, None), (offset % 3, offset))
    for offset, value in enumerate(SOURCE[1:] + [SOURCE[5], b"foreign"]):
        multiset.take_target(fingerprint(b"k", value, None, None), (offset % 2, offset))
    outcome = multiset.finish()
    assert outcome.counts == {"missing": 1, "extra": 2} and outcome.matched == 99
    assert [(d.kind, d.source_partition, d.source_offset) for d in outcome.differences][0] == ("missing", 0, 0)


def test_a_compacted_topic_compares_each_key_s_latest_record_a_tombstone_as_no_record():
    latest = compare.LatestByKey()
    for side in (0, 1):
        latest.add(side, b"a", False, b"old.....", (0, 0))
        latest.add(side, b"a", False, b"new.....", (0, 1))
        latest.add(side, b"b", False, b"b.......", (0, 2))
    latest.add(0, b"b", True, b"tomb....", (0, 3))  # deleted on the source; the target compacted both away
    latest.add(1, b"b", True, b"tomb....", (0, 3))
    latest.add(0, b"c", False, b"c.......", (0, 4))
    latest.add(1, b"c", False, b"C.......", (0, 4))
    latest.add(0, b"d", False, b"d.......", (0, 5))
    outcome = latest.finish()
    assert outcome.counts == {"different": 1, "missing": 1} and outcome.matched == 1


def test_the_exit_status_is_0_only_when_everything_was_compared_and_nothing_differs():
    assert exit_codes.for_verification(differs=False, proven=True) == exit_codes.OK
    assert exit_codes.for_verification(differs=True, proven=False) == exit_codes.TARGET_DIFFERS == 3
    assert exit_codes.for_verification(differs=False, proven=False) == exit_codes.NOT_PROVEN == 4


def _report(source, target, outcome=None, unfinished=()):
    row = Row("t", 0, "t", IN_ORDER, outcome=outcome or compare.Outcome(), unfinished=list(unfinished))
    return Report(source, target, started=0.0, rows=[row])


def test_flows_answer_with_one_status_a_difference_outranking_what_was_not_proven(tmp_path, capsys):
    differs = compare.Outcome()
    differs.add(compare.Difference("missing", 1, source_offset=3, target_offset=3))
    reports = [_report("A", "B", unfinished=["t-0"]), _report("A", "C", differs), _report("B", "A")]
    assert answer(reports, str(tmp_path / "r.json")) == exit_codes.TARGET_DIFFERS
    written = json.loads((tmp_path / "r.json").read_text())
    assert [(flow["source"], flow["target"], flow["complete"], flow["differs"]) for flow in written["flows"]] == [
        ("A", "B", False, False), ("A", "C", False, True), ("B", "A", True, False)]
    printed = capsys.readouterr().out
    assert "A -> C: the target differs from the source in 1 of 1 rows" in printed
    assert answer(reports[:1]) == exit_codes.NOT_PROVEN and answer(reports[2:]) == exit_codes.OK


def test_a_reader_s_place_on_the_target_is_the_target_record_of_the_first_source_record_it_has_not_read():
    # The source has a gap (compaction) at 3-4 and a marker at 8; the target (exactly-once) has
    # markers at 5 and 9: the same six records at other offsets.
    source, target = _records(SOURCE[:6], [0, 1, 2, 5, 6, 7]), _records(SOURCE[:6], [0, 1, 2, 3, 4, 6])
    row = Row("t", 0, "t", IN_ORDER, outcome=compare.in_order(source, target, False, False),
              sequences=(source, target, 10))
    assert [row.target_position(x) for x in range(10)] == [0, 1, 2, 3, 3, 3, 4, 6, 10, 10]
    assert source.count_before(0) == 0 and source.count_before(4) == 3 and source.count_before(100) == 6
    row.unfinished = ["t-0"]  # not everything compared: no place is exact
    assert row.target_position(2) is None


class _Message:
    """What verify reads of a consumed record."""

    def __init__(self, offset, value, key=b"k"):
        self._offset, self._value, self._key = offset, value, key

    def offset(self):
        return self._offset

    def key(self):
        return self._key

    def value(self):
        return self._value

    def headers(self):
        return None

    def timestamp(self):
        return (1, 1000)


def _comparison(method=IN_ORDER, partitions=1, custom=None):
    from mirror_maker.verify.check import _Comparison, _Topic

    rules = type("Rules", (), {"remote": staticmethod(lambda name: f"a.{name}")})()
    return _Comparison([_Topic("t", partitions, "a.t", method, True)], custom, rules, custom is None)


def _read(comparison, source, target, target_partitions=(0,)):
    for offset, value in enumerate(source):
        comparison.source_record(TopicPartition("t", 0), _Message(offset, value))
    for partition in target_partitions:
        for offset, value in enumerate(target):
            comparison.target_record(TopicPartition("a.t", partition), _Message(offset, value))
    source_bounds = {TopicPartition("t", 0): (0, len(source))}
    target_bounds = {TopicPartition("a.t", p): (0, len(target)) for p in target_partitions}
    return source_bounds, target_bounds


def test_a_target_partition_the_source_does_not_have_is_a_row_of_extras():
    comparison = _comparison()
    bounds = _read(comparison, SOURCE[:5], SOURCE[:5], target_partitions=(0, 1))
    rows = comparison.rows(*bounds, unfinished=set())
    assert [(row.partition, row.status) for row in rows] == [(0, "ok"), (1, "differs")]
    assert rows[1].outcome.counts == {"extra": 5}


def test_a_side_not_read_to_its_end_is_compared_as_far_as_it_was_read_and_never_passed():
    comparison = _comparison()
    bounds = _read(comparison, SOURCE[:10], SOURCE[:4])  # the target read only 4 of its 10 by the deadline
    row, = comparison.rows(*bounds, unfinished={TopicPartition("a.t", 0)})
    assert row.status == "not proven" and not row.outcome.differs and row.outcome.matched == 4
    sampled, = _comparison().rows(*_read(_comparison(), [], []), unfinished=set(), sample=3)
    comparison = _comparison()
    row, = comparison.rows(*_read(comparison, SOURCE[:3], SOURCE[:3]), unfinished=set(), sample=3)
    assert row.status == "not proven" and "not compared (--sample)" in row.outcome.not_compared[0]
    assert sampled.status == "ok"  # an empty partition is all there is


def test_records_a_handler_sends_to_a_topic_not_compared_are_never_passed():
    from mirror_maker.records import ProducerRecord

    class Renaming:
        def handle(self, record):
            return [ProducerRecord("elsewhere", record.value, record.key)]

    comparison = _comparison(MULTISET, custom=Renaming())
    row, = comparison.rows(*_read(comparison, SOURCE[:5], []), unfinished=set())
    assert row.status == "not proven" and "5 records the handler sent to other topics than a.t" in \
        row.outcome.not_compared[0]


def test_a_source_emptied_by_retention_leaves_the_target_s_records_uncompared_not_extra():
    outcome = compare.in_order(_records([]), _records(SOURCE[:3]), source_trimmed=True)
    assert not outcome.differs and "the source's log holds none any more" in outcome.not_compared[0]
    assert compare.in_order(_records([]), _records(SOURCE[:3])).counts == {"extra": 3}
