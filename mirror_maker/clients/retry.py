"""The one place that decides what is retried, how often and how it is logged (tenacity)."""

from __future__ import annotations

import logging
import time

from confluent_kafka import KafkaError, KafkaException
from tenacity import (
    Retrying,
    before_sleep_log,
    retry_if_exception,
    stop_after_attempt,
    stop_after_delay,
    wait_exponential,
)

log = logging.getLogger("mirror_maker.retry")

RETRIABLE_CODES = frozenset({
    KafkaError.REQUEST_TIMED_OUT,
    KafkaError._TIMED_OUT,
    KafkaError._WAIT_COORD,
    KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.NETWORK_EXCEPTION,
    KafkaError._TRANSPORT,
    KafkaError._ALL_BROKERS_DOWN,
})

#: A commit rejected because the group moved on; retrying cannot help.
REBALANCE_CODES = frozenset({
    KafkaError.ILLEGAL_GENERATION,
    KafkaError.STALE_MEMBER_EPOCH,  # KIP-848's ILLEGAL_GENERATION: librdkafka does not retry it
    KafkaError.UNKNOWN_MEMBER_ID,
    KafkaError.REBALANCE_IN_PROGRESS,
    KafkaError._ASSIGNMENT_LOST,
    KafkaError.FENCED_INSTANCE_ID,
    KafkaError._STATE,
})


def error_code(exc: BaseException):
    if isinstance(exc, KafkaException) and exc.args and isinstance(exc.args[0], KafkaError):
        return exc.args[0].code()
    return None


def is_retriable(exc: BaseException) -> bool:
    return error_code(exc) in RETRIABLE_CODES


def stop_at(deadline: float):
    """A tenacity stop condition: no new attempt once ``time.monotonic()`` reached ``deadline``
    (a stop's --shutdown.timeout.ms bounds retries too)."""
    def stop(retry_state) -> bool:
        return time.monotonic() >= deadline
    return stop


def commit_retrying(max_attempts: int = 5, max_delay_s: float = 30.0) -> Retrying:
    """Retry a synchronous commit (or a read of committed offsets) on retriable errors only,
    bounded, logging each retry (INFO)."""
    return Retrying(
        retry=retry_if_exception(is_retriable),
        stop=stop_after_attempt(max_attempts) | stop_after_delay(max_delay_s),
        wait=wait_exponential(multiplier=0.2, max=5.0),
        # A retry that then succeeds is no warning; one that gives up raises to its caller.
        before_sleep=before_sleep_log(log, logging.INFO),
        reraise=True,
    )
