"""librdkafka's client-level errors (``error_cb``), turned into what an operator can act on.

Every client gets a callback that knows which side it talks to. An authentication or TLS
failure is fatal (exit 255, as the Java client's AuthenticationException is for MirrorMaker),
with one line naming the side and its address. So is a refused authorization, with one line
naming the principal, the resource and the permission it lacks. An unreachable cluster is
retried by librdkafka for ever; it is logged as an ERROR naming the side and address, at most
every 10 s, and once it answers again (a client's statistics show a broker up) an INFO line says
so; meanwhile ``unreachable_for()`` tells the status line how long it has been away.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from typing import Dict, Optional

from confluent_kafka import KafkaError, KafkaException

from ..callbacks import client_callback
from ..errors import ClientFailed

log = logging.getLogger("mirror_maker.clients")

AUTHENTICATION_CODES = frozenset({
    KafkaError._AUTHENTICATION,
    KafkaError.SASL_AUTHENTICATION_FAILED,
})
AUTHORIZATION_CODES = frozenset({
    KafkaError.TOPIC_AUTHORIZATION_FAILED,
    KafkaError.GROUP_AUTHORIZATION_FAILED,
    KafkaError.CLUSTER_AUTHORIZATION_FAILED,
    KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
})
#: A TLS error is an authentication failure only when the handshake itself failed; a TLS
#: connection that breaks later is an outage and is retried.
_TLS_AUTH_MARKERS = ("handshake failed", "certificate verify failed")
UNREACHABLE_CODES = frozenset({
    KafkaError._ALL_BROKERS_DOWN,
    KafkaError._TRANSPORT,
    KafkaError._RESOLVE,
})
#: librdkafka's word that no broker of the cluster answers (a single broker's _TRANSPORT is not).
ALL_DOWN_CODES = frozenset({KafkaError._ALL_BROKERS_DOWN, KafkaError._RESOLVE})
REPEAT_EVERY_S = 10.0


def principal(conf: Dict[str, str]) -> str:
    """Who the cluster sees, as far as the client's settings tell (for error lines)."""
    if conf.get("sasl.username"):
        return f"User:{conf['sasl.username']}"
    unsecured = re.search(r"(?:^|\s)principal=(\S+)", str(conf.get("sasl.oauthbearer.config", "")))
    if unsecured and str(conf.get("enable.sasl.oauthbearer.unsecure.jwt", "")).lower() == "true":
        return f"User:{unsecured.group(1)}"
    if conf.get("sasl.oauthbearer.client.id"):
        return f"the principal of client {conf['sasl.oauthbearer.client.id']}'s OAUTHBEARER token"
    if conf.get("sasl.kerberos.principal"):
        return f"the Kerberos principal {conf['sasl.kerberos.principal']}"
    if conf.get("ssl.certificate.location") or conf.get("ssl.keystore.location"):
        return "the principal of the TLS client certificate"
    return "User:ANONYMOUS"


class ClientErrors:
    """The ``error_cb`` of every client of one cluster side ("source" or "target")."""

    def __init__(self, side: str, bootstrap: str, state, principal: str = "the client") -> None:
        self.side = side
        self.bootstrap = bootstrap
        self.principal = principal
        self._state = state
        self._lock = threading.Lock()
        self._last_logged = {}
        #: When every broker of this side was last found down (None: reachable, as far as known).
        self._unreachable_since: Optional[float] = None

    def not_authorized(self, err: KafkaError, topic: Optional[str] = None,
                       group: Optional[str] = None) -> ClientFailed:
        """One line naming the principal, the resource and the permission it lacks."""
        code = err.code()
        if code == KafkaError.TOPIC_AUTHORIZATION_FAILED:
            operation = "WRITE" if self.side == "target" else "READ"
            need = f"{operation} on topic {topic}" if topic else f"{operation} on the topics it mirrors"
        elif code == KafkaError.GROUP_AUTHORIZATION_FAILED:
            need = f"READ on consumer group {group}" if group else "READ on the consumer group"
        elif code == KafkaError.CLUSTER_AUTHORIZATION_FAILED and self.side == "target":
            need = ("WRITE on the target topics (or IDEMPOTENT_WRITE on the cluster) for an idempotent "
                    "producer id")
        elif code == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED:
            need = "WRITE on the transactional id"
        else:
            need = "a permission the request needs"
        return ClientFailed(f"not authorized: the {self.side} cluster ({self.bootstrap}) refused "
                            f"{self.principal}, which needs {need} ({err.str()})")

    def fatal(self, err: KafkaError) -> ClientFailed:
        """What a fatal client error means, as one line."""
        code = err.code()
        if code in AUTHORIZATION_CODES:
            return self.not_authorized(err)
        tls_auth = code == KafkaError._SSL and any(m in err.str() for m in _TLS_AUTH_MARKERS)
        what = "authentication failed" if code in AUTHENTICATION_CODES or tls_auth else "fatal client error"
        return ClientFailed(f"{what} with the {self.side} cluster ({self.bootstrap}): {err.str()}")

    @client_callback
    def __call__(self, err: KafkaError) -> None:
        code = err.code()
        tls_auth = code == KafkaError._SSL and any(m in err.str() for m in _TLS_AUTH_MARKERS)
        if code in AUTHENTICATION_CODES or code in AUTHORIZATION_CODES or tls_auth or err.fatal():
            self._state.fail(self.fatal(err))
            return
        now = time.monotonic()
        with self._lock:
            if code in ALL_DOWN_CODES and self._unreachable_since is None:
                self._unreachable_since = now
            if now - self._last_logged.get(code, -REPEAT_EVERY_S) < REPEAT_EVERY_S:
                return
            self._last_logged[code] = now
        if code in ALL_DOWN_CODES:
            log.error("Cannot reach the %s cluster at %s: %s (retrying)", self.side, self.bootstrap, err.str())
        elif code in UNREACHABLE_CODES:  # one broker (a restart, a leader move): the others serve meanwhile
            log.warning("A broker of the %s cluster at %s is unreachable: %s (retrying)", self.side,
                        self.bootstrap, err.str())
        else:
            log.warning("Client error from the %s cluster at %s: %s (retrying)", self.side, self.bootstrap,
                        err.str())


    def unreachable_for(self) -> Optional[float]:
        """Seconds since every broker of this side was found down, or None while reachable."""
        since = self._unreachable_since
        return None if since is None else time.monotonic() - since

    def brokers_seen(self, stats: dict) -> None:
        """A client's statistics (``stats_cb``): a broker up again ends an outage, with one line."""
        if self._unreachable_since is None:
            return
        if not any(broker.get("state") == "UP" for broker in stats.get("brokers", {}).values()):
            return
        with self._lock:
            since, self._unreachable_since = self._unreachable_since, None
        if since is not None:
            log.info("The %s cluster at %s is reachable again (after %.0f s)", self.side, self.bootstrap,
                     time.monotonic() - since)


def raised_fatal(exc: BaseException) -> Optional[KafkaException]:
    """The KafkaException behind what a client's poll() or flush() raised, if any.

    confluent-kafka raises a fatal error from poll() but leaves it pending while it still serves
    the callbacks already queued; the first of them that calls into the client (``err.code()``)
    turns it into a SystemError caused by the KafkaException (seen when a transactional producer
    is fenced).
    """
    while exc is not None and not isinstance(exc, KafkaException):
        exc = exc.__cause__ or exc.__context__
    return exc
