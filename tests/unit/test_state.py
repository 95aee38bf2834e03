"""RunState: a stop reaches threads that wait on something else than its own event."""

import logging

from mirror_maker.engine.state import RunState
from mirror_maker.errors import ClientFailed


def test_a_requested_stop_wakes_every_registered_waiter():
    state, woken = RunState(), []
    state.on_stop(lambda: woken.append("a"))
    state.on_stop(lambda: woken.append("b"))
    assert woken == []
    state.request_stop()
    assert state.stopping and woken == ["a", "b"]


def test_a_failure_wakes_the_waiters_too():
    state, woken = RunState(), []
    state.on_stop(lambda: woken.append(1))
    state.fail(ClientFailed("the target went away"))
    assert state.failed and woken == [1]


def test_a_waiter_registered_after_the_stop_is_woken_at_once():
    state, woken = RunState(), []
    state.request_stop()
    state.on_stop(lambda: woken.append(1))
    assert woken == [1]


def test_a_waiter_that_raises_does_not_keep_the_others_from_waking(caplog):
    state, woken = RunState(), []

    def closed():
        raise OSError("selector closed")

    state.on_stop(closed)
    state.on_stop(lambda: woken.append(1))
    with caplog.at_level(logging.DEBUG, logger="mirror_maker.state"):
        state.request_stop()
    assert woken == [1]
    assert "waking a thread for the stop failed" in caplog.text
