"""Kafka's log layout, level selection, and the librdkafka line filter."""

import logging

import pytest

from mirror_maker.errors import ConfigError
from mirror_maker.ops.log import FORMAT, KafkaFormatter, LibrdkafkaFilter, resolve_level


def record(message, level=logging.ERROR):
    return logging.LogRecord("mirror_maker.librdkafka.c", level, __file__, 1, message, None, None)


def test_kafka_layout_and_warn_spelling():
    text = KafkaFormatter(FORMAT).format(record("disk is slow", logging.WARNING))
    assert text.startswith("[") and "] WARN disk is slow (mirror_maker.librdkafka.c)" in text


def test_level_from_option_then_environment(monkeypatch):
    monkeypatch.setenv("MIRROR_MAKER_LOG_LEVEL", "debug")
    assert resolve_level(None) == logging.DEBUG
    assert resolve_level("warn") == logging.WARNING
    monkeypatch.delenv("MIRROR_MAKER_LOG_LEVEL")
    assert resolve_level(None) == logging.INFO
    with pytest.raises(ConfigError):
        resolve_level("LOUD")


def test_repeated_connection_failures_are_folded_into_info_lines():
    now = [0.0]
    keep = LibrdkafkaFilter(window_s=30, clock=lambda: now[0])
    first = record("FAIL [thrd:1]: Connect to 127.0.0.1:5 failed (after 0ms in state CONNECT)")
    assert keep.filter(first) and first.levelno == logging.INFO
    for ms in range(1, 20):
        now[0] += 0.05
        assert not keep.filter(record(f"FAIL [thrd:1]: Connect to 127.0.0.1:5 failed (after {ms}ms in state CONNECT)"))
    now[0] += 30
    again = record("FAIL [thrd:1]: Connect to 127.0.0.1:5 failed (after 3ms in state CONNECT)")
    assert keep.filter(again) and "(and 19 similar lines)" in again.getMessage()


def test_different_lines_pass():
    keep = LibrdkafkaFilter()
    assert keep.filter(record("one", logging.INFO)) and keep.filter(record("two", logging.INFO))


def test_the_same_line_from_two_clients_and_debug_lines_are_never_folded():
    keep = LibrdkafkaFilter()
    line = 'LEAVE [thrd:main]: Group "g": leave (in state up)'
    first, second = record(line, logging.INFO), record(line, logging.INFO)
    second.name = "mirror_maker.librdkafka.g-1"
    assert keep.filter(first) and keep.filter(second) and not keep.filter(record(line, logging.INFO))
    assert all(keep.filter(record("CGRPOP [thrd:main]: received op", logging.DEBUG)) for _ in range(3))


def test_librdkafka_errors_are_warnings_the_mirror_reports_the_one_error():
    keep = LibrdkafkaFilter()
    for line in ("ADDPARTS [thrd:main]: Failed to add partition: old epoch",):
        entry = record(line, logging.ERROR)
        assert keep.filter(entry) and entry.levelname == "WARNING"


def test_a_transaction_s_transient_trouble_the_mirror_reports_itself_is_info():
    """An outage of the target's majority gave 22 WARN lines in 30 s, these among them."""
    keep = LibrdkafkaFilter()
    for line in ("TXNERR [producer-eos-1#producer-35] [thrd:127.0.0.1:1/3]: Current transaction failed in state "
                 "InTransaction: 7 message(s) timed out on t [3] (_TIMED_OUT, requires epoch bump)",
                 "GETPID [producer-eos-1#producer-35] [thrd:main]: Failed to acquire transactional PID from broker "
                 "TxnCoordinator/3: Broker: Producer attempted to update a transaction while another concurrent "
                 "operation on the same transaction was ongoing: retrying",
                 "TXNERR [thrd:main]: Fatal transaction error: Failed to end transaction: Broker: Producer attempted "
                 "a transactional operation in an invalid state (INVALID_TXN_STATE)",
                 "FATAL [thrd:main]: Fatal error: Broker: Producer attempted a transactional operation in an invalid "
                 "state"):
        entry = record(line, logging.WARNING)
        assert keep.filter(entry) and entry.levelname == "INFO", line
