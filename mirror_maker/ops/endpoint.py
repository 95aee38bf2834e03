"""The opt-in operations endpoint: ``/metrics`` (Prometheus), ``/healthz`` and ``/ready``.

``/healthz`` answers 200 while the process runs. ``/ready`` answers 200 only when partitions
are assigned and every mirror thread's loop made progress recently (503 otherwise, with the
reason), so a load balancer or Kubernetes sees a mirror stuck on an unreachable target.
"""

from __future__ import annotations

import logging
import threading
from socketserver import ThreadingMixIn
from typing import Callable, Tuple
from wsgiref.simple_server import WSGIRequestHandler, WSGIServer, make_server

from prometheus_client import CollectorRegistry, ProcessCollector, make_wsgi_app

from ..errors import ConfigError

log = logging.getLogger("mirror_maker.endpoint")


class _ThreadingServer(ThreadingMixIn, WSGIServer):
    daemon_threads = True


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format, *args):  # scrapes every few seconds: not worth a log line
        log.debug("%s - %s", self.address_string(), format % args)


class OpsServer:
    def __init__(self, bind: str, port: int, collector,
                 readiness: Callable[[], Tuple[bool, str]]) -> None:
        registry = CollectorRegistry(auto_describe=False)
        registry.register(collector)
        registry.register(ProcessCollector(registry=None))  # process_cpu_seconds_total, memory, open files
        self._metrics_app = make_wsgi_app(registry)
        self._readiness = readiness
        try:
            self._server = make_server(bind, port, self._app, server_class=_ThreadingServer,
                                       handler_class=_QuietHandler)
        except OSError as exc:  # in use, or an address this host does not have
            raise ConfigError(f"--metrics.port {port} (--metrics.bind {bind}): cannot listen there: "
                              f"{exc.strerror or exc}") from None
        self.port = self._server.server_port
        self._thread = threading.Thread(target=self._server.serve_forever, name="ops-http",
                                        daemon=True)

    def start(self) -> "OpsServer":
        self._thread.start()
        log.info("Metrics on http://%s:%d/metrics, health on /healthz and /ready",
                 self._server.server_address[0], self.port)
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _app(self, environ, start_response):
        path = environ.get("PATH_INFO", "/")
        if path == "/healthz":
            return _text(start_response, "200 OK", "ok\n")
        if path == "/ready":
            ready, reason = self._readiness()
            return _text(start_response, "200 OK" if ready else "503 Service Unavailable", reason + "\n")
        if path in ("/metrics", "/"):
            return self._metrics_app(environ, start_response)
        return _text(start_response, "404 Not Found", "not found: try /metrics, /healthz, /ready\n")


def _text(start_response, status: str, body: str):
    data = body.encode()
    start_response(status, [("Content-Type", "text/plain; charset=utf-8"),
                            ("Content-Length", str(len(data)))])
    return [data]
