"""A long wait for the target is logged at growing intervals, not every 10 s per stream."""

from mirror_maker.clients.waiting import WaitLog


def test_a_long_wait_is_logged_at_10_30_70_and_150_s():
    now = [0.0]
    wait_log = WaitLog(clock=lambda: now[0])
    logged = []
    for second in range(0, 160):
        now[0] = float(second)
        if wait_log.due():
            logged.append(second)
    assert logged == [10, 30, 70, 150]
