"""OAUTHBEARER: the Java client's unsecured and OIDC settings mapped to librdkafka's."""

import logging

import pytest

from mirror_maker.config.client_conf import build_producer_conf
from mirror_maker.errors import ConfigError

MODULE = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"
HANDLER = "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler"
BASE = {"bootstrap.servers": "h:1", "security.protocol": "SASL_SSL", "sasl.mechanism": "OAUTHBEARER"}


def conf(**settings):
    return build_producer_conf({**BASE, **{k.replace("_", "."): v for k, v in settings.items()}}, "p")[0]


def jaas(options: str) -> str:
    return f"{MODULE} required {options};"


def test_unsecured_login_options_become_librdkafkas_unsecured_jwt(caplog):
    result = build_producer_conf({**BASE, "sasl.jaas.config": jaas(
        'unsecuredLoginStringClaim_sub="alice" unsecuredLoginListClaim_scope="|read|write" '
        'unsecuredLoginLifetimeSeconds="600" unsecuredLoginExtension_traceId="123" '
        'unsecuredLoginStringClaim_team="x"')}, "p")[0]
    assert result["enable.sasl.oauthbearer.unsecure.jwt"] == "true"
    assert result["sasl.oauthbearer.config"] == ("principalClaimName=sub principal=alice scopeClaimName=scope "
                                                 "scope=read,write lifeSeconds=600 extension_traceId=123")
    assert "unsecuredLoginStringClaim_team not sent" in caplog.text


def test_a_custom_principal_claim_name():
    result = build_producer_conf({**BASE, "sasl.jaas.config": jaas(
        'unsecuredLoginPrincipalClaimName="azp" unsecuredLoginStringClaim_azp="svc"')}, "p")[0]
    assert result["sasl.oauthbearer.config"] == "principalClaimName=azp principal=svc"


def test_oidc_client_credentials_from_jaas_options(caplog):
    caplog.set_level(logging.INFO, logger="mirror_maker")
    result = build_producer_conf({
        **BASE, "sasl.login.callback.handler.class": HANDLER,
        "sasl.oauthbearer.token.endpoint.url": "https://idp.example/oauth2/token",
        "sasl.oauthbearer.expected.audience": "kafka",
        "sasl.jaas.config": jaas('clientId="mirror" clientSecret="s3cret-value" scope="kafka" extension_logicalCluster="lkc-1"'),
    }, "p")[0]
    assert {k: v for k, v in result.items() if k.startswith("sasl.oauthbearer.")} == {
        "sasl.oauthbearer.method": "oidc", "sasl.oauthbearer.token.endpoint.url": "https://idp.example/oauth2/token",
        "sasl.oauthbearer.client.id": "mirror", "sasl.oauthbearer.client.secret": "s3cret-value",
        "sasl.oauthbearer.scope": "kafka", "sasl.oauthbearer.extensions": "logicalCluster=lkc-1"}
    assert "sasl.oauthbearer.expected.audience (a broker setting)" in caplog.text
    assert "s3cret-value" not in caplog.text


def test_kafka_4_1_client_credentials_settings_win_over_the_jaas_options():
    result = build_producer_conf({
        **BASE, "sasl.login.callback.handler.class": "org.apache.kafka.common.security.oauthbearer.secured."
                                                     "OAuthBearerLoginCallbackHandler",
        "sasl.oauthbearer.token.endpoint.url": "https://idp/token",
        "sasl.oauthbearer.client.credentials.client.id": "new-id",
        "sasl.oauthbearer.client.credentials.client.secret": "new-secret",
        "sasl.jaas.config": jaas('clientId="old-id" clientSecret="old-secret"'),
    }, "p")[0]
    assert (result["sasl.oauthbearer.client.id"], result["sasl.oauthbearer.client.secret"]) == ("new-id", "new-secret")
    assert "sasl.oauthbearer.scope" not in result


def test_jwt_bearer_grant_passes_the_assertion_settings(tmp_path):
    key = tmp_path / "key.pem"
    key.write_text("not read before a token is needed")
    result = build_producer_conf({
        **BASE, "sasl.login.callback.handler.class": HANDLER, "sasl.oauthbearer.token.endpoint.url": "https://idp/t",
        "sasl.oauthbearer.jwt.retriever.class": "org.apache.kafka.common.security.oauthbearer.JwtBearerJwtRetriever",
        "sasl.oauthbearer.assertion.claim.sub": "svc", "sasl.oauthbearer.assertion.private.key.file": str(key),
        "sasl.jaas.config": f"{MODULE} required;"}, "p")[0]
    assert result["sasl.oauthbearer.grant.type"] == "urn:ietf:params:oauth:grant-type:jwt-bearer"
    assert result["sasl.oauthbearer.assertion.claim.sub"] == "svc"


@pytest.mark.parametrize("settings,message", [
    ({"sasl.jaas.config": f"{MODULE} required;"}, "has no options: an unsecured token needs"),
    ({"sasl.jaas.config": jaas('unsecuredLoginStringClaim_team="x"')}, "needs its principal"),
    ({"sasl.jaas.config": jaas('unsecuredLoginStringClaim_sub="a b"')}, "must be one word"),
    ({"sasl.login.callback.handler.class": HANDLER, "sasl.jaas.config": jaas('clientId="c" clientSecret="s"')},
     "sasl.oauthbearer.token.endpoint.url is missing"),
    ({"sasl.login.callback.handler.class": HANDLER, "sasl.oauthbearer.token.endpoint.url": "https://idp/t",
      "sasl.jaas.config": jaas('clientId="c"')}, "client.secret (or the JAAS option clientSecret) is missing"),
    ({"sasl.login.callback.handler.class": HANDLER, "sasl.oauthbearer.token.endpoint.url": "file:/tmp/jwt"},
     "a file: token is not supported"),
    ({"sasl.login.callback.handler.class": "com.example.Login"}, "com.example.Login is not supported for OAUTHBEARER"),
    ({"sasl.jaas.config": 'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p";'},
     "sasl.mechanism=OAUTHBEARER needs the org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule"),
])
def test_what_librdkafka_cannot_do_is_one_line(settings, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        build_producer_conf({**BASE, **settings}, "p")


def test_the_oauthbearer_login_module_with_another_mechanism_is_one_line():
    with pytest.raises(ConfigError, match="needs sasl.mechanism=OAUTHBEARER"):
        build_producer_conf({**BASE, "sasl.mechanism": "PLAIN", "sasl.jaas.config": jaas('a="b"')}, "p")


def test_an_authorization_error_names_the_token_s_principal():
    from mirror_maker.clients.client_errors import principal

    unsecured = build_producer_conf({**BASE, "sasl.jaas.config": jaas('unsecuredLoginStringClaim_sub="alice"')}, "p")[0]
    assert principal(unsecured) == "User:alice"
    oidc = build_producer_conf({**BASE, "sasl.login.callback.handler.class": HANDLER,
                                "sasl.oauthbearer.token.endpoint.url": "https://idp/t",
                                "sasl.jaas.config": jaas('clientId="mirror" clientSecret="s"')}, "p")[0]
    assert principal(oidc) == "the principal of client mirror's OAUTHBEARER token"
