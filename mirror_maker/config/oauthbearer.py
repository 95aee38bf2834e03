"""SASL/OAUTHBEARER: the Java client's settings turned into librdkafka's.

The Java client picks its token source from ``sasl.login.callback.handler.class``:

* none (the default, ``OAuthBearerUnsecuredLoginCallbackHandler``): an unsecured JWT built from
  the JAAS options ``unsecuredLoginStringClaim_sub="alice"``, ``unsecuredLoginListClaim_scope``,
  ``unsecuredLoginLifetimeSeconds``, ``unsecuredLoginPrincipalClaimName``,
  ``unsecuredLoginScopeClaimName``, ``unsecuredLoginExtension_<name>``. librdkafka builds the same
  token from ``sasl.oauthbearer.config`` with ``enable.sasl.oauthbearer.unsecure.jwt=true``.
* ``OAuthBearerLoginCallbackHandler`` (KIP-768): a token from an OAuth/OIDC provider's
  ``sasl.oauthbearer.token.endpoint.url``, with the client credentials grant (client id, secret
  and scope, as ``sasl.oauthbearer.client.credentials.*``/``sasl.oauthbearer.scope`` since Kafka
  4.1, or as the JAAS options ``clientId``, ``clientSecret``, ``scope``, which they override) or,
  with ``sasl.oauthbearer.jwt.retriever.class=...JwtBearerJwtRetriever``, the JWT bearer grant
  (``sasl.oauthbearer.assertion.*``, the same names in librdkafka). librdkafka's
  ``sasl.oauthbearer.method=oidc`` fetches and refreshes it.

Settings only a broker or the JVM reads are ignored with an INFO line; what librdkafka cannot do
is one error line.
"""

from __future__ import annotations

import logging
from typing import Callable, Dict, Mapping, Set, Tuple

from ..errors import ConfigError

MECHANISM = "OAUTHBEARER"
_LOGIN_HANDLERS = ("org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
                   "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler")
_UNSECURED_HANDLER = ("org.apache.kafka.common.security.oauthbearer.internals.unsecured."
                      "OAuthBearerUnsecuredLoginCallbackHandler")
_RETRIEVERS = {
    "org.apache.kafka.common.security.oauthbearer.DefaultJwtRetriever": "client_credentials",
    "org.apache.kafka.common.security.oauthbearer.ClientCredentialsJwtRetriever": "client_credentials",
    "org.apache.kafka.common.security.oauthbearer.JwtBearerJwtRetriever":
        "urn:ietf:params:oauth:grant-type:jwt-bearer",
}
#: Java's JWT bearer assertion settings that librdkafka names otherwise (the rest match).
_ASSERTION_RENAMES = {"sasl.oauthbearer.assertion.template.file": "sasl.oauthbearer.assertion.jwt.template.file"}
#: Settings the Java client uses for what librdkafka does its own way, or a broker's.
_IGNORED = {
    "sasl.oauthbearer.scope.claim.name": "librdkafka does not check the token it receives",
    "sasl.oauthbearer.sub.claim.name": "librdkafka does not check the token it receives",
    "sasl.oauthbearer.clock.skew.seconds": "librdkafka does not check the token it receives",
    "sasl.oauthbearer.expected.audience": "a broker setting",
    "sasl.oauthbearer.expected.issuer": "a broker setting",
    "sasl.oauthbearer.jwks.endpoint.url": "a broker setting",
    "sasl.oauthbearer.jwks.endpoint.refresh.ms": "a broker setting",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.ms": "a broker setting",
    "sasl.oauthbearer.jwks.endpoint.retry.backoff.max.ms": "a broker setting",
    "sasl.oauthbearer.jwt.validator.class": "librdkafka does not check the token it receives",
    "sasl.login.connect.timeout.ms": "a setting of the Java token request",
    "sasl.login.read.timeout.ms": "a setting of the Java token request",
    "sasl.login.retry.backoff.ms": "librdkafka retries the token request itself",
    "sasl.login.retry.backoff.max.ms": "librdkafka retries the token request itself",
    "sasl.login.refresh.window.factor": "librdkafka refreshes the token at 80% of its lifetime",
    "sasl.login.refresh.window.jitter": "librdkafka refreshes the token at 80% of its lifetime",
    "sasl.login.refresh.min.period.seconds": "librdkafka refreshes the token at 80% of its lifetime",
    "sasl.login.refresh.buffer.seconds": "librdkafka refreshes the token at 80% of its lifetime",
    "sasl.login.class": "a JVM setting",
}
_UNSECURED = "unsecuredLogin"
#: The Java settings an OIDC login is made of (besides sasl.oauthbearer.assertion.*).
_OIDC_SETTINGS = frozenset({
    "sasl.oauthbearer.token.endpoint.url", "sasl.oauthbearer.jwt.retriever.class",
    "sasl.oauthbearer.client.credentials.client.id", "sasl.oauthbearer.client.credentials.client.secret",
    "sasl.oauthbearer.scope",
})


def is_oauthbearer(props: Mapping[str, str]) -> bool:
    return props.get("sasl.mechanism", "").strip().upper() == MECHANISM


def _no_spaces(name: str, value: str) -> str:
    # librdkafka's sasl.oauthbearer.config is space-separated name=value pairs.
    if any(char.isspace() for char in value) or not value:
        raise ConfigError(f"sasl.jaas.config: {name} must be one word for librdkafka's unsecured token")
    return value


def _unsecured(options: Dict[str, str], note: Callable[[int, str], None]) -> Dict[str, object]:
    """librdkafka's built-in unsecured JWT, from the Java unsecured login options."""
    if not options:
        raise ConfigError("sasl.jaas.config: the OAUTHBEARER login module has no options: an unsecured token "
                          "needs unsecuredLoginStringClaim_sub=\"<principal>\" (or sasl.login.callback.handler.class "
                          "with a token endpoint)")
    principal_claim = options.get(f"{_UNSECURED}PrincipalClaimName", "").strip() or "sub"
    scope_claim = options.get(f"{_UNSECURED}ScopeClaimName", "").strip() or "scope"
    principal = options.get(f"{_UNSECURED}StringClaim_{principal_claim}")
    if not principal:
        raise ConfigError(f"sasl.jaas.config: the unsecured OAUTHBEARER token needs its principal: "
                          f"{_UNSECURED}StringClaim_{principal_claim}=\"<name>\"")
    parts = [f"principalClaimName={_no_spaces('the principal claim name', principal_claim)}",
             f"principal={_no_spaces('the principal', principal)}"]
    scope = options.get(f"{_UNSECURED}ListClaim_{scope_claim}")
    if scope:  # Java: the first character is the delimiter of the list
        scope = ",".join(item for item in scope[1:].split(scope[0]) if item)
    else:
        scope = options.get(f"{_UNSECURED}StringClaim_{scope_claim}")
    if scope:
        parts += [f"scopeClaimName={_no_spaces('the scope claim name', scope_claim)}",
                  f"scope={_no_spaces('the scope', scope)}"]
    if f"{_UNSECURED}LifetimeSeconds" in options:
        parts.append(f"lifeSeconds={_no_spaces('the lifetime', options[f'{_UNSECURED}LifetimeSeconds'])}")
    dropped = []
    for name, value in options.items():
        if name.startswith(f"{_UNSECURED}Extension_"):
            extension = name[len(f"{_UNSECURED}Extension_"):]
            parts.append(f"extension_{_no_spaces('an extension', extension)}={_no_spaces('an extension', value)}")
        elif (name.startswith((f"{_UNSECURED}StringClaim_", f"{_UNSECURED}NumberClaim_", f"{_UNSECURED}ListClaim_"))
              and name.split("_", 1)[1] not in (principal_claim, scope_claim)):
            dropped.append(name)
    if dropped:
        note(logging.WARNING, f"sasl.jaas.config: {', '.join(dropped)} not sent: librdkafka's unsecured token "
                              "carries only the principal, the scope and the lifetime")
    return {"enable.sasl.oauthbearer.unsecure.jwt": "true", "sasl.oauthbearer.config": " ".join(parts)}


def _oidc(props: Mapping[str, str], options: Dict[str, str]) -> Dict[str, object]:
    """librdkafka's OIDC token requests, from the Java login callback handler's settings."""
    endpoint = props.get("sasl.oauthbearer.token.endpoint.url", "").strip()
    if not endpoint:
        raise ConfigError("sasl.oauthbearer.token.endpoint.url is missing (the OAuth login callback handler "
                          "needs the token endpoint)")
    if endpoint.lower().startswith("file:"):
        raise ConfigError("sasl.oauthbearer.token.endpoint.url: a file: token is not supported (librdkafka "
                          "requests its tokens from an HTTP(S) endpoint)")
    retriever = props.get("sasl.oauthbearer.jwt.retriever.class",
                          "org.apache.kafka.common.security.oauthbearer.DefaultJwtRetriever").strip()
    grant = _RETRIEVERS.get(retriever)
    if grant is None:
        raise ConfigError(f"sasl.oauthbearer.jwt.retriever.class: {retriever} is not supported (Java classes "
                          f"cannot run here; {', '.join(_RETRIEVERS)} are mapped)")
    conf: Dict[str, object] = {"sasl.oauthbearer.method": "oidc", "sasl.oauthbearer.token.endpoint.url": endpoint}
    if grant != "client_credentials":
        conf["sasl.oauthbearer.grant.type"] = grant
        for key, value in props.items():
            if key.startswith("sasl.oauthbearer.assertion."):
                conf[_ASSERTION_RENAMES.get(key, key)] = value
        return conf
    # Kafka 4.1's settings win over the older JAAS options (ClientCredentialsJwtRetriever).
    for setting, jaas, target, required in (
            ("sasl.oauthbearer.client.credentials.client.id", "clientId", "sasl.oauthbearer.client.id", True),
            ("sasl.oauthbearer.client.credentials.client.secret", "clientSecret",
             "sasl.oauthbearer.client.secret", True),
            ("sasl.oauthbearer.scope", "scope", "sasl.oauthbearer.scope", False)):
        value = props.get(setting, options.get(jaas))
        if value:
            conf[target] = value
        elif required:
            raise ConfigError(f"{setting} (or the JAAS option {jaas}) is missing: the client credentials grant "
                              "needs it")
    extensions = [f"{name[len('extension_'):]}={value}" for name, value in options.items()
                  if name.startswith("extension_")]
    if extensions:
        conf["sasl.oauthbearer.extensions"] = ",".join(extensions)
    return conf


def translate(props: Mapping[str, str], options: Dict[str, str],
              note: Callable[[int, str], None]) -> Tuple[Dict[str, object], Set[str]]:
    """librdkafka's settings for an OAUTHBEARER client, and the Java keys they stand for.

    ``options`` are the OAUTHBEARER login module's JAAS options (empty without
    ``sasl.jaas.config``); ``note`` takes the INFO and WARN lines to log. Other
    ``sasl.oauthbearer.*`` keys of an OIDC login go to librdkafka as they are (it knows some, e.g.
    ``sasl.oauthbearer.metadata.authentication.type``, and drops the others with a WARN)."""
    handler = props.get("sasl.login.callback.handler.class", "").strip()
    oauthbearer_keys = {key for key in props if key.startswith("sasl.oauthbearer.")}
    if handler in _LOGIN_HANDLERS:
        conf = _oidc(props, options)
        used = {key for key in oauthbearer_keys
                if key in _OIDC_SETTINGS or key.startswith("sasl.oauthbearer.assertion.")}
        unused = {}
    elif handler in ("", _UNSECURED_HANDLER):
        conf, used = _unsecured(options, note), set()
        unused = {key: "the unsecured login does not use it" for key in oauthbearer_keys}
    else:
        raise ConfigError(f"sasl.login.callback.handler.class: {handler} is not supported for OAUTHBEARER "
                          f"(Java classes cannot run here; {_LOGIN_HANDLERS[0]} and the default unsecured "
                          "login are mapped)")
    unused.update({key: reason for key, reason in _IGNORED.items() if key in props})
    if unused:
        note(logging.INFO, "ignored for OAUTHBEARER: " + ", ".join(f"{key} ({unused[key]})" for key in sorted(unused)))
    return conf, used | set(unused) | {"sasl.login.callback.handler.class", "sasl.jaas.config"}
