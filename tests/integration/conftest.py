"""Two clusters for the integration tests: embedded Tansu brokers, or your own.

Set MIRROR_MAKER_TEST_SOURCE_BOOTSTRAP and MIRROR_MAKER_TEST_TARGET_BOOTSTRAP to run the same
tests, unchanged, against existing clusters (e.g. Apache Kafka). Tests that need to stop or cut
a broker get the embedded broker objects and are skipped on your own clusters.
"""

from __future__ import annotations

import os

import pytest

from .harness import SOURCE_ENV, TARGET_ENV, Cluster, byo, mirror_files


def pytest_collection_modifyitems(config, items):
    for item in items:
        if "integration" in str(item.fspath):
            item.add_marker(pytest.mark.integration)
        if item.get_closest_marker("needs_kafka_feature") and not byo():
            reason = item.get_closest_marker("needs_kafka_feature").args[0]
            item.add_marker(pytest.mark.skip(reason=f"the embedded test broker lacks: {reason}"))
        if item.get_closest_marker("embedded_only") and byo():
            item.add_marker(pytest.mark.skip(reason="stops or cuts brokers: embedded brokers only"))


def pytest_configure(config):
    config.addinivalue_line("markers", "embedded_only: stops or cuts brokers; needs the embedded ones")


@pytest.fixture(scope="session")
def clusters(tmp_path_factory):
    if byo():
        yield Cluster("source", os.environ[SOURCE_ENV]), Cluster("target", os.environ[TARGET_ENV])
        return
    from mirror_maker.embedded import EmbeddedBroker

    log_dir = tmp_path_factory.mktemp("brokers")
    source = EmbeddedBroker("source", log_dir).start()
    target = EmbeddedBroker("target", log_dir)
    try:
        target.start()
        yield Cluster("source", source.bootstrap, source), Cluster("target", target.bootstrap, target)
    finally:
        target.stop()
        source.stop()


@pytest.fixture
def source(clusters):
    return clusters[0]


@pytest.fixture
def target(clusters):
    return clusters[1]


@pytest.fixture
def files(tmp_path, source, target):
    """Java-style properties files for a mirror from source to target, with a fresh group."""
    return mirror_files(tmp_path, source, target)
