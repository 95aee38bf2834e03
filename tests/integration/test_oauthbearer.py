"""OAUTHBEARER against Apache Kafka: the Java client's unsecured JWT login (Kafka's default
unsecured validator on the broker) and the OIDC client credentials login (tokens from a local
provider, checked by Kafka's OAuthBearerValidatorCallbackHandler against the provider's JWKS),
with the properties a Java client has. One node serves both sides: a renaming handler keeps the
mirror from reading what it writes."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from ..brokers.apache_kafka import KAFKA_4, start_budget_s
from ..budgets import setup_budget
from ..oidc_server import OidcProvider
from .harness import Cluster, MirrorProcess, broker_kind, make_records, mirror_args, mirror_files, unique

pytestmark = [pytest.mark.needs_kafka_feature("OAUTHBEARER listeners"),
              pytest.mark.needs_own_brokers("a node with OAUTHBEARER listeners and a local token provider")]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
CLIENT_ID, CLIENT_SECRET = "mirror-client", "oidc-client-s3cret"


@pytest.fixture(scope="module")
@setup_budget(start_budget_s(KAFKA_4))
def oauth(tmp_path_factory):
    """(the node, the token provider): Kafka 4's validator and allowed-URLs property."""
    if broker_kind() != "kafka":
        pytest.skip("the OIDC listener is set up for Apache Kafka 4")
    from ..brokers.apache_kafka import OIDC_AUDIENCE, KafkaCluster, Security

    provider = OidcProvider({CLIENT_ID: (CLIENT_SECRET, "admin")}, OIDC_AUDIENCE).start()
    node = KafkaCluster("oauth", tmp_path_factory.mktemp("oauth"), KAFKA_4, security=Security(
        users={"admin": "admin-secret"}, super_users=["admin"], oauthbearer=True, jwks_url=provider.jwks_url))
    try:
        node.start()
        yield node, provider
    finally:
        node.stop()
        provider.stop()


def unsecured(node) -> dict:
    return {"bootstrap.servers": node.oauth_bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER",
            "sasl.jaas.config": f'{MODULE} required unsecuredLoginStringClaim_sub="admin";'}


def oidc(node, provider, secret: str = CLIENT_SECRET) -> dict:
    return {"bootstrap.servers": node.oidc_bootstrap, "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "OAUTHBEARER", "sasl.login.callback.handler.class": HANDLER,
            "sasl.oauthbearer.token.endpoint.url": provider.token_url,
            "sasl.jaas.config": f'{MODULE} required clientId="{CLIENT_ID}" clientSecret="{secret}" scope="kafka";'}


@pytest.mark.parametrize("consumer_login,producer_login", [("oidc", "unsecured"), ("unsecured", "oidc")])
def test_a_mirror_logs_in_with_unsecured_and_oidc_tokens(tmp_path, oauth, consumer_login, producer_login):
    node, provider = oauth
    cluster = Cluster("oauth", node.bootstrap, node)
    logins = {"unsecured": unsecured(node), "oidc": oidc(node, provider)}
    topic = cluster.create_topic("oauth", partitions=2)
    records = make_records(200)
    cluster.seed(topic, records)
    files = mirror_files(tmp_path, cluster, cluster, consumer=logins[consumer_login],
                         producer=logins[producer_login])
    mirror = MirrorProcess(mirror_args(files, topic, "--message.handler", "renaming_handler.PrefixTopics",
                                       "--message.handler.args", "copy-", "--offset.commit.interval.ms", "300"),
                           tmp_path / "m.log", env={"PYTHONPATH": str(EXAMPLES)})
    try:
        cluster.read_values(f"copy-{topic}", [r.value for r in records], timeout_s=60)
    finally:
        assert mirror.stop(signal.SIGTERM) == 143, mirror.log()
    assert sum(cluster.committed(files.group, topic).values()) == 200
    assert (CLIENT_ID, 200) in provider.requests  # the OIDC side's token came from the provider
    assert CLIENT_SECRET not in mirror.log()


def test_a_refused_client_secret_is_one_line_and_never_shown(tmp_path, oauth):
    node, provider = oauth
    cluster = Cluster("oauth", node.bootstrap, node)
    wrong = unique("Wrong-Client-Secret")
    files = mirror_files(tmp_path, cluster, cluster, consumer=oidc(node, provider, wrong),
                         producer=unsecured(node))
    mirror = MirrorProcess(mirror_args(files, cluster.create_topic("refused"), "--log.level", "DEBUG"),
                           tmp_path / "m.log")
    try:
        status = mirror.wait(90)
    finally:
        mirror.kill()
    log = mirror.log()
    assert (CLIENT_ID, 401) in provider.requests
    assert status == 255, log
    errors = [line for line in log.splitlines() if " ERROR " in line]
    assert any("authentication failed with the source cluster" in line for line in errors), errors
    assert wrong.lower() not in log.lower() and "Traceback" not in log
