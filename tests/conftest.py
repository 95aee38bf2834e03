"""Shared test set-up: log capture at INFO for the mirror_maker loggers."""

import logging

import pytest


@pytest.fixture(autouse=True)
def _mirror_maker_logging(caplog):
    caplog.set_level(logging.INFO, logger="mirror_maker")
