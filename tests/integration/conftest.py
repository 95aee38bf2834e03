"""Two clusters for the integration tests, one source and one target per test session.

``MIRROR_MAKER_TEST_BROKER`` picks them (see ``harness.broker_kind``): Apache Kafka 4.x by
default, Kafka 3.9, the embedded Tansu broker, or your own clusters. Tests get fresh topics and
groups, never fresh clusters. The Kafka clusters also have a SASL_PLAINTEXT listener (PLAIN and
SCRAM users, ACLs enforced), an SSL listener with JKS stores, and a listener for an outage proxy.
Tests of broker failures get two 3-node clusters of their own (``three_node_clusters``).
"""

from __future__ import annotations

import os
import time

import pytest

from ..brokers.apache_kafka import KAFKA_3_9, KAFKA_4, start_budget_s
from ..budgets import setup_budget
from .harness import SOURCE_ENV, TARGET_ENV, Cluster, broker_kind, mirror_files

#: SASL users of the Kafka clusters: admin is a super user, the others get ACLs in their tests.
SASL_USERS = {"admin": "admin-secret", "alice": "alice-secret", "bob": "bob-secret"}
#: The principal of the TLS client certificate (tests/tls_material.py), a super user too.
TLS_CLIENT_PRINCIPAL = "CN=mirror-client"


def pytest_collection_modifyitems(config, items):
    kind = broker_kind()
    for item in items:
        if "integration" in str(item.fspath):
            item.add_marker(pytest.mark.integration)
        feature = item.get_closest_marker("needs_kafka_feature")
        if feature is not None and kind == "tansu":
            item.add_marker(pytest.mark.skip(reason=f"Tansu lacks: {feature.args[0]}"))
        own = item.get_closest_marker("needs_own_brokers")
        if own is not None and kind == "byo":
            item.add_marker(pytest.mark.skip(reason=f"needs brokers the tests start: {own.args[0]}"))


def _kafka_clusters(work, version):
    from ..brokers.apache_kafka import KafkaCluster, Security
    from ..tls_material import make_tls_files

    tls = make_tls_files(work)
    security = Security(users=SASL_USERS, super_users=["admin", TLS_CLIENT_PRINCIPAL],
                        keystore=tls.server_keystore_jks, truststore=tls.server_truststore_jks,
                        store_password=tls.store_password, key_password=tls.key_password)
    # The log cleaner looks for work every 200 ms rather than 15 s: a compacted test topic is
    # cleaned while its test waits.
    brokers = [KafkaCluster(name, work, version, security=security, proxied=True,
                            overrides={"log.cleaner.backoff.ms": 200})
               for name in ("source", "target")]
    return brokers, tls


def _version() -> str:
    return KAFKA_3_9 if broker_kind() == "kafka-3.9" else KAFKA_4


@pytest.fixture(scope="session")
@setup_budget(start_budget_s(_version()))
def clusters(tmp_path_factory):
    kind = broker_kind()
    if kind == "byo":
        yield Cluster("source", os.environ[SOURCE_ENV]), Cluster("target", os.environ[TARGET_ENV])
        return
    work = tmp_path_factory.mktemp("brokers")
    tls = None
    if kind == "tansu":
        from mirror_maker.embedded import EmbeddedBroker

        brokers = [EmbeddedBroker(name, work) for name in ("source", "target")]
    else:
        brokers, tls = _kafka_clusters(work, _version())
    try:
        if kind == "tansu":
            for broker in brokers:
                broker.start()
        else:
            from ..brokers.apache_kafka import start_together

            start_together(brokers)  # two JVMs start faster side by side
        yield tuple(Cluster(b.name, b.bootstrap, b, tls=tls) for b in brokers)
    finally:
        for broker in brokers:
            broker.stop()


@pytest.fixture(scope="module")
@setup_budget(start_budget_s(_version()))
def three_node_clusters(tmp_path_factory, report):
    """Two 3-node Apache Kafka clusters (source, target) for the tests that fail brokers: started
    for the module that asks for them and stopped after it (six JVMs are too many to keep for the
    rest of the run). Your own clusters as they are (tests that stop brokers skip there)."""
    kind = broker_kind()
    if kind == "byo":
        yield Cluster("source", os.environ[SOURCE_ENV]), Cluster("target", os.environ[TARGET_ENV])
        return
    if kind == "tansu":
        pytest.skip("Tansu runs one node: there is no broker to lose while others serve")
    from ..brokers.apache_kafka import KafkaCluster, start_together

    work = tmp_path_factory.mktemp("three-node-clusters")
    version = _version()
    brokers = [KafkaCluster(name, work, version, nodes=3) for name in ("source", "target")]
    try:
        started = time.monotonic()
        start_together(brokers)
        report(f"two 3-node Apache Kafka {version} clusters started in {time.monotonic() - started:.1f} s")
        yield tuple(Cluster(b.name, b.bootstrap, b) for b in brokers)
    finally:
        for broker in brokers:
            broker.stop()


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
