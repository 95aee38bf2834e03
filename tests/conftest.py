"""Shared test set-up: log capture at INFO for the mirror_maker loggers."""

import logging

import pytest


@pytest.fixture(autouse=True)
def _mirror_maker_logging(caplog):
    caplog.set_level(logging.INFO, logger="mirror_maker")


_REPORTS = []


@pytest.fixture(scope="session")
def report():
    """Lines for the end-of-run summary (e.g. duplicate counts of the reliability tests); session
    scoped, so that a fixture that runs a scenario for several tests can report too."""
    return _REPORTS.append


def pytest_terminal_summary(terminalreporter):
    if _REPORTS:
        terminalreporter.section("mirror reports")
        for line in _REPORTS:
            terminalreporter.write_line(line)
