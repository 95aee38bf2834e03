"""librdkafka's client-level errors (``error_cb``), turned into what an operator can act on.

Every client gets a callback that knows which side it talks to. An authentication or TLS
failure is fatal (exit 255, as the Java client's AuthenticationException is for MirrorMaker),
with one line naming the side and its address. An unreachable cluster is retried by librdkafka
for ever; it is logged as an ERROR naming the side and address, at most every 10 s.
"""

from __future__ import annotations

import logging
import threading
import time

from confluent_kafka import KafkaError

from ..errors import ClientFailed

log = logging.getLogger("mirror_maker.clients")

FATAL_CODES = frozenset({
    KafkaError._AUTHENTICATION,
    KafkaError.SASL_AUTHENTICATION_FAILED,
    KafkaError.CLUSTER_AUTHORIZATION_FAILED,
})
#: A TLS error is an authentication failure only when the handshake itself failed; a TLS
#: connection that breaks later is an outage and is retried.
_TLS_AUTH_MARKERS = ("handshake failed", "certificate verify failed")
UNREACHABLE_CODES = frozenset({
    KafkaError._ALL_BROKERS_DOWN,
    KafkaError._TRANSPORT,
    KafkaError._RESOLVE,
})
REPEAT_EVERY_S = 10.0


class ClientErrors:
    """The ``error_cb`` of every client of one cluster side ("source" or "target")."""

    def __init__(self, side: str, bootstrap: str, state) -> None:
        self.side = side
        self.bootstrap = bootstrap
        self._state = state
        self._lock = threading.Lock()
        self._last_logged = {}

    def __call__(self, err: KafkaError) -> None:
        code = err.code()
        tls_auth = code == KafkaError._SSL and any(m in err.str() for m in _TLS_AUTH_MARKERS)
        if code in FATAL_CODES or tls_auth or err.fatal():
            what = "authentication failed" if code in FATAL_CODES or tls_auth else "fatal client error"
            self._state.fail(ClientFailed(
                f"{what} with the {self.side} cluster ({self.bootstrap}): {err.str()}"))
            return
        level = logging.ERROR if code in UNREACHABLE_CODES else logging.WARNING
        now = time.monotonic()
        with self._lock:
            if now - self._last_logged.get(code, -REPEAT_EVERY_S) < REPEAT_EVERY_S:
                return
            self._last_logged[code] = now
        prefix = "Cannot reach" if code in UNREACHABLE_CODES else "Client error from"
        log.log(level, "%s the %s cluster at %s: %s (retrying)", prefix, self.side, self.bootstrap,
                err.str())
