"""Shared test set-up: log capture at INFO for the mirror_maker loggers, and the set-up budgets
of module and session fixtures (``tests/budgets.py``)."""

import logging
import signal
import sys
import threading
import time
import traceback

import pytest

from .budgets import budget_of


@pytest.fixture(autouse=True)
def _mirror_maker_logging(caplog):
    caplog.set_level(logging.INFO, logger="mirror_maker")
    yield
    # A test that ran the command line left its handler on the test's captured stderr, closed
    # now: a later test's log line would print "--- Logging error ---" through it.
    root = logging.getLogger()
    for handler in [h for h in root.handlers if getattr(h, "_mirror_maker", False)]:
        root.removeHandler(handler)


#: The order in which ``make test``'s workers (``--dist loadscope --no-loadscope-reorder``) take the
#: modules, each as a worker becomes free: the longest first (their durations on an idle machine),
#: so that no long module starts near the end while the other workers have run out of work. The
#: suite is bound by CPU on two cores, so the order decides only how the run ends. Modules not
#: named (short ones, the unit tests) keep their place after these.
SCHEDULE = (
    "tests/integration/test_broker_failures.py",  # about 300 s
    "tests/integration/test_reliability.py",  # 210 s
    "tests/integration/test_dedicated_mode.py",  # 150 s
    "tests/integration/test_exact_failover.py",  # 140 s
    "tests/integration/test_spark.py",  # 110 s
    "tests/integration/test_mode_matrix.py",  # 90 s
    "tests/integration/test_spark_failures.py",  # 80 s
    "tests/integration/test_spark_standalone.py",  # 80 s
    "tests/integration/test_raw_mode.py",
    "tests/integration/test_consumer_failover.py",
    "tests/integration/test_parity_with_kafka_mirror_maker.py",
    "tests/integration/test_mirror_maker_2_topics.py",
    "tests/integration/test_exactly_once.py",
    "tests/integration/test_bad_input.py",
    "tests/integration/test_packaging.py",
    "tests/integration/test_oauthbearer.py",
    "tests/integration/test_plugins_and_topics.py",
    "tests/integration/test_rebalancing.py",
    "tests/integration/test_delivery_guarantees.py",
    "tests/integration/test_shutdown_and_failures.py",
    "tests/integration/test_verify.py",
)


def pytest_collection_modifyitems(items):
    def rank(item) -> int:
        path = item.nodeid.split("::")[0]
        return SCHEDULE.index(path) if path in SCHEDULE else len(SCHEDULE)
    items.sort(key=rank)  # stable: every other module keeps its place


_REPORTS = []


@pytest.fixture(scope="session")
def report():
    """Lines for the end-of-run summary (e.g. duplicate counts of the reliability tests); session
    scoped, so that a fixture that runs a scenario for several tests can report too."""
    return _REPORTS.append


def pytest_sessionfinish(session):
    """A pytest-xdist worker hands its lines to the controller, which prints them."""
    output = getattr(session.config, "workeroutput", None)
    if output is not None:
        output["mirror_reports"] = list(_REPORTS)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    _REPORTS.extend(getattr(node, "workeroutput", {}).get("mirror_reports", []))


def pytest_terminal_summary(terminalreporter):
    if _REPORTS:
        terminalreporter.section("mirror reports")
        for line in _REPORTS:
            terminalreporter.write_line(line)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """A failed test shows the state of every Kafka node still meant to run, and the last lines of
    those that are not running: a node that died (or was never back) is often the failure's
    cause, and its folder is gone once pytest keeps only its last three basetemps."""
    report = yield
    kafka = sys.modules.get("tests.brokers.apache_kafka")
    if report.failed and kafka is not None:
        nodes = [(cluster.name, node) for cluster in list(kafka._running) for node in cluster.nodes.values()]
        if nodes:
            report.sections.append(("Kafka nodes", "\n".join(
                f"{name}: " + (f"node {node.node_id} running ({node.log_path})" if node.running
                               else node.last_words(20)) for name, node in nodes)))
    return report


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef, request):
    """A module or session fixture sets up on its own budget (``tests/budgets.py``): the test's
    timeout (pytest-timeout's SIGALRM) is suspended meanwhile and resumed afterwards with what it
    had left. Over its budget, the fixture fails naming itself and where its code was."""
    if fixturedef.scope == "function" or threading.current_thread() is not threading.main_thread():
        return (yield)
    budget = budget_of(fixturedef.func)
    test_left, _interval = signal.getitimer(signal.ITIMER_REAL)
    test_handler = signal.getsignal(signal.SIGALRM)
    started = time.monotonic()

    def over_budget(_signum, frame):
        stack = traceback.extract_stack(frame)
        code = getattr(fixturedef.func, "__code__", None)
        first = next((i for i, f in enumerate(stack) if code is not None and f.filename == code.co_filename
                      and f.name == code.co_name), 0)
        inside = stack[first:]  # from the fixture's own frame down to where it was
        where = "".join(traceback.format_list(inside[:1] + inside[1:][-7:]))
        pytest.fail(f"the {fixturedef.scope} fixture {fixturedef.argname} did not set up within its budget of "
                    f"{budget:.0f} s (tests/budgets.py); it was at:\n{where}", pytrace=False)

    signal.signal(signal.SIGALRM, over_budget)
    signal.setitimer(signal.ITIMER_REAL, budget)
    try:
        return (yield)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, test_handler)
        if test_left > 0:
            signal.setitimer(signal.ITIMER_REAL, test_left)
        took = time.monotonic() - started
        if took > 10:
            logging.getLogger("tests.budgets").info("%s fixture %s set up in %.1f s (budget %.0f s)",
                                                    fixturedef.scope, fixturedef.argname, took, budget)
