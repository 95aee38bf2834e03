"""A local OAuth/OIDC provider for the tests: a client credentials token endpoint and the JWKS
that Apache Kafka's ``OAuthBearerValidatorCallbackHandler`` checks the tokens' signatures with.

Tokens are RS256 JWTs (``sub``, ``aud``, ``iat``, ``exp``, ``scope``) for the clients it knows; a wrong
client secret gets a 401, as from a real provider. Not a dependency of the tool.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Dict, List
from urllib.parse import parse_qs

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import padding, rsa

KEY_ID = "test-key"


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class OidcProvider:
    """``clients``: client id -> (secret, the token's sub); serves /token and /jwks on loopback.
    Tokens are for ``audience`` (their ``aud``)."""

    def __init__(self, clients: Dict[str, tuple], audience: str, lifetime_s: int = 3600) -> None:
        self.clients = clients
        self.audience = audience
        self.lifetime_s = lifetime_s
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        #: (client id, status) of every token request, for the tests to check.
        self.requests: List[tuple] = []
        provider = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):  # noqa: N802 (http.server's naming)
                if self.path != "/jwks":
                    return self._answer(404, {"error": "not found"})
                self._answer(200, provider.jwks())

            def do_POST(self):  # noqa: N802
                body = self.rfile.read(int(self.headers.get("Content-Length", 0))).decode()
                form = {k: v[0] for k, v in parse_qs(body).items()}
                client_id, secret = form.get("client_id"), form.get("client_secret")
                auth = self.headers.get("Authorization", "")
                if auth.startswith("Basic "):
                    client_id, _, secret = base64.b64decode(auth[6:]).decode().partition(":")
                known = provider.clients.get(client_id)
                if form.get("grant_type") != "client_credentials" or known is None or known[0] != secret:
                    provider.requests.append((client_id, 401))
                    return self._answer(401, {"error": "invalid_client"})
                provider.requests.append((client_id, 200))
                self._answer(200, {"access_token": provider.token(known[1], form.get("scope", "")),
                                   "token_type": "Bearer", "expires_in": provider.lifetime_s})

            def _answer(self, status: int, payload: dict) -> None:
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True, name="oidc")

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def token_url(self) -> str:
        return f"{self.base_url}/token"

    @property
    def jwks_url(self) -> str:
        return f"{self.base_url}/jwks"

    def jwks(self) -> dict:
        numbers = self.key.public_key().public_numbers()

        def encode(value: int) -> str:
            return _b64(value.to_bytes((value.bit_length() + 7) // 8, "big"))

        return {"keys": [{"kty": "RSA", "kid": KEY_ID, "use": "sig", "alg": "RS256",
                          "n": encode(numbers.n), "e": encode(numbers.e)}]}

    def token(self, subject: str, scope: str) -> str:
        now = int(time.time())
        header = {"alg": "RS256", "typ": "JWT", "kid": KEY_ID}
        claims = {"sub": subject, "aud": self.audience, "iat": now, "exp": now + self.lifetime_s, "scope": scope,
                  "iss": self.base_url}
        signing_input = f"{_b64(json.dumps(header).encode())}.{_b64(json.dumps(claims).encode())}"
        signature = self.key.sign(signing_input.encode(), padding.PKCS1v15(), hashes.SHA256())
        return f"{signing_input}.{_b64(signature)}"

    def start(self) -> "OidcProvider":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
