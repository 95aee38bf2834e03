"""Shared test set-up: log capture at INFO for the mirror_maker loggers."""

import logging

import pytest


@pytest.fixture(autouse=True)
def _mirror_maker_logging(caplog):
    caplog.set_level(logging.INFO, logger="mirror_maker")
    yield
    # A test that ran the command line left its handler on the test's captured stderr, closed
    # now: a later test's log line would print "--- Logging error ---" through it.
    root = logging.getLogger()
    for handler in [h for h in root.handlers if getattr(h, "_mirror_maker", False)]:
        root.removeHandler(handler)


#: The longest modules (a scenario of minutes each): collected first, so that ``make test``'s two
#: workers (``--dist loadscope --no-loadscope-reorder``) start them at once, one each, and the
#: short modules fill in around them. xdist's own order (most tests first) started the longest one
#: eight minutes in.
LONGEST_FIRST = ("tests/integration/test_broker_failures.py", "tests/integration/test_dedicated_mode.py")


def pytest_collection_modifyitems(items):
    def rank(item) -> int:
        path = item.nodeid.split("::")[0]
        return LONGEST_FIRST.index(path) if path in LONGEST_FIRST else len(LONGEST_FIRST)
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
