"""Process exit statuses, as Kafka 3.9's ``kafka-mirror-maker.sh`` (a JVM) returns them, and the
one mapping from how a run ended to its status (the command line maps errors with it too)."""

from __future__ import annotations

import signal
from typing import Optional

OK = 0
#: Usage and configuration errors, found before connecting (Kafka exits 1 for all of them).
USAGE = 1
#: A mirror thread died or a send failed with ``--abort.on.send.failure true`` (Kafka's ``exit(-1)``).
FATAL = 255
#: A clean stop on SIGINT, as the JVM reports it (128 + 2).
SIGINT = 130
#: A clean stop on SIGTERM, as the JVM reports it (128 + 15).
SIGTERM = 143
#: ``verify``: the target lacks records of the source or holds others.
TARGET_DIFFERS = 3
#: ``verify``: nothing differs in what was compared, but not everything could be compared
#: (records removed by retention on the target, a deadline, an open transaction).
NOT_PROVEN = 4
#: ``cutover``: the flow did not drain in time, the source moved while it was checked, or a
#: group could not be placed on the target.
CUTOVER_INCOMPLETE = 5

_SIGNALS = {signal.SIGTERM: SIGTERM, signal.SIGINT: SIGINT}


def for_signal(signum: int) -> int:
    """The JVM's status for a stop on ``signum`` (FATAL for a signal Kafka's tool does not stop on)."""
    return _SIGNALS.get(signum, FATAL)


def for_run(failed: bool, stop_signal: Optional[int], incomplete: bool = False) -> int:
    """How a run ended, as a status: a failure first, then the signal that stopped it, then a
    bounded run that stopped with records the target never acknowledged."""
    if failed:
        return FATAL
    if stop_signal is not None:
        return for_signal(stop_signal)
    return FATAL if incomplete else OK


def for_verification(differs: bool, proven: bool) -> int:
    """A verification's status: 0 only when everything was compared and nothing differs."""
    if differs:
        return TARGET_DIFFERS
    return OK if proven else NOT_PROVEN


def for_cutover(drain_status: int, drained: bool, differs: bool, proven: bool, complete: bool) -> int:
    """A cutover's status: the drain's own failure first (255, 143...), 5 if it did not catch up
    or the source moved meanwhile (which explains a difference), then verify's status, then 5 for
    anything else that did not hold; 0 only when all of it held."""
    if drain_status:
        return drain_status
    if not drained:
        return CUTOVER_INCOMPLETE
    if differs or not proven:
        return for_verification(differs, proven)
    return OK if complete else CUTOVER_INCOMPLETE


def for_error(exc: BaseException) -> int:
    """The status of a run that ended with ``exc``: bad input before anything connected (a
    ``ConfigError``) is a usage error, a mirror's failure or anything unexpected a fatal one."""
    from ..errors import ConfigError

    if isinstance(exc, KeyboardInterrupt):
        return SIGINT
    return USAGE if isinstance(exc, ConfigError) else FATAL
