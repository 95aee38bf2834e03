"""TLS targets: Apache Kafka's own SSL listener, or a TLS front for Tansu.

Tansu cannot serve TLS itself (test-broker.md section 6), so for it a few lines of Python's ssl
module terminate TLS on one port and pipe the bytes to the broker's plaintext port; the broker
advertises the TLS port, so every connection goes through the front.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading

from ..tls_material import TlsFiles, pem_client_conf


class TlsFront:
    """Terminates TLS (client certificates required) on ``port`` and pipes to ``origin``."""

    def __init__(self, port: int, origin_port: int, files: TlsFiles) -> None:
        self.port, self.origin_port = port, origin_port
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(str(files.server_cert), str(files.server_key))
        self.context.load_verify_locations(str(files.ca_pem))
        self.context.verify_mode = ssl.CERT_REQUIRED
        self.handshakes = 0
        self.failed_handshakes = 0
        self._listener = socket.create_server(("127.0.0.1", port))
        self._stop = threading.Event()
        threading.Thread(target=self._accept, daemon=True, name="tls-front").start()

    def _accept(self) -> None:
        self._listener.settimeout(0.2)
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                continue
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        try:
            tls = self.context.wrap_socket(conn, server_side=True)
        except (ssl.SSLError, OSError):
            self.failed_handshakes += 1
            conn.close()
            return
        self.handshakes += 1
        try:
            origin = socket.create_connection(("127.0.0.1", self.origin_port))
        except OSError:
            tls.close()
            return
        threading.Thread(target=self._pipe, args=(origin, tls), daemon=True).start()
        self._pipe(tls, origin)

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for sock in (src, dst):
                try:
                    sock.close()
                except OSError:
                    pass

    def close(self) -> None:
        self._stop.set()
        self._listener.close()


@contextlib.contextmanager
def tls_broker(tmp_path, files: TlsFiles, name: str = "tls-target"):
    """An embedded broker reachable only through a TLS front; yields (Cluster, front).

    The Cluster's own clients use the PEM client settings, so tests can read what arrived.
    """
    from mirror_maker.embedded import EmbeddedBroker, free_port

    from .harness import Cluster

    tls_port, plain_port = free_port(), free_port()
    front = TlsFront(tls_port, plain_port, files)
    broker = EmbeddedBroker(name, tmp_path, port=plain_port, advertised_port=tls_port,
                            client_conf=pem_client_conf(files))
    try:
        broker.start()
        yield Cluster(name, broker.bootstrap, client_conf=pem_client_conf(files)), front
    finally:
        front.close()
        broker.stop()


@contextlib.contextmanager
def tls_target(tmp_path, target):
    """The target reached over TLS, with client certificates required: yields (Cluster, the
    TLS material its certificates come from, the Tansu front or None on Apache Kafka)."""
    from mirror_maker.embedded import EmbeddedBroker

    if isinstance(target.broker, EmbeddedBroker):
        from ..tls_material import make_tls_files

        files = make_tls_files(tmp_path)
        with tls_broker(tmp_path, files) as (cluster, front):
            yield cluster, files, front
        return
    files = target.tls
    yield target.view("tls-target", target.broker.ssl_bootstrap, pem_client_conf(files)), files, None
