"""The driver's line to its Spark workers: stop them gracefully, hear their status, logs and failures.

Spark gives a running Python task no way to learn that its job should end (a job cancel is a
SIGKILL after ``spark.python.task.killTimeout``), and accumulators only report when a task ends.
So the driver listens on a TCP port and every worker connects to it. Messages are JSON objects,
one per line. The first line from a worker must be ``{"t": "hello", "token": ...}`` with the
run's random token, or the connection is dropped; the token travels inside the task closure.

Driver to worker: ``stop``, and ``singletons`` (whether this node runs the flow's syncs,
checkpoints and heartbeats: the dedicated mode's election). Worker to driver: ``status``, ``log``,
``metrics``, ``failed``, ``done``. A worker that loses the connection (the driver died) stops as
if told to.
"""

from __future__ import annotations

import hmac
import json
import logging
import socket
import socketserver
import threading
import time
from typing import Callable, Dict, Optional, Tuple

log = logging.getLogger("mirror_maker.spark.control")

#: How long a worker keeps trying to reach the driver before it gives up (bounded, logged).
CONNECT_TIMEOUT_S = 15.0
HELLO_TIMEOUT_S = 10.0


def _encode(message: dict) -> bytes:
    return (json.dumps(message, separators=(",", ":")) + "\n").encode()


class _Connection:
    """One authenticated worker connection on the driver side."""

    def __init__(self, sock: socket.socket, hello: dict) -> None:
        self.sock = sock
        self.hello = hello
        self._lock = threading.Lock()

    def send(self, message: dict) -> None:
        try:
            with self._lock:
                self.sock.sendall(_encode(message))
        except OSError as exc:
            log.debug("send to worker %s failed: %s", self.hello.get("worker"), exc)


class ControlServer:
    """Accepts worker connections and hands their messages to ``on_message(hello, message)``.

    ``stop_all()`` tells every connected worker to stop, and every worker that connects later
    (a worker still starting when the signal came). ``stop_connected()`` tells only the
    connected ones (the job is being torn down by Spark; a restarted job must run).
    ``announce(message)`` tells every connected worker, and every later one, the latest message
    of its kind. ``name`` names the server's threads (their log lines say whose they are).
    """

    def __init__(self, bind: str, port: int, token: str,
                 on_message: Callable[[dict, dict], None], name: str = "spark-control") -> None:
        self._token = token
        self._on_message = on_message
        self._connections: Dict[int, _Connection] = {}
        self._lock = threading.Lock()
        self._stopping = False
        self._announced: Dict[str, dict] = {}
        server = self

        class Handler(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                threading.current_thread().name = f"{name}-connection"
                server._serve(self.connection, self.rfile)

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self._server = Server((bind, port), Handler)
        self.port = self._server.server_address[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name=name, daemon=True)

    def start(self) -> "ControlServer":
        self._thread.start()
        return self

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        with self._lock:
            connections = list(self._connections.values())
            self._connections.clear()
        for connection in connections:
            try:
                connection.sock.shutdown(socket.SHUT_RDWR)  # the worker sees EOF at once
                connection.sock.close()
            except OSError:
                pass

    def stop_all(self) -> None:
        with self._lock:
            self._stopping = True
        self.stop_connected()

    def stop_connected(self) -> None:
        with self._lock:
            connections = list(self._connections.values())
        for connection in connections:
            connection.send({"t": "stop"})

    def announce(self, message: dict) -> None:
        with self._lock:
            self._announced[message["t"]] = message
            connections = list(self._connections.values())
        for connection in connections:
            connection.send(message)

    def _serve(self, sock: socket.socket, rfile) -> None:
        sock.settimeout(HELLO_TIMEOUT_S)
        try:
            hello = json.loads(rfile.readline(65536) or b"null")
        except (ValueError, OSError):
            hello = None
        if not isinstance(hello, dict) or hello.get("t") != "hello" or not hmac.compare_digest(
                str(hello.get("token", "")).encode(), self._token.encode()):
            log.warning("Refused a control connection without a valid hello")
            return
        sock.settimeout(None)
        hello.pop("token", None)
        connection = _Connection(sock, hello)
        key = id(connection)
        with self._lock:
            self._connections[key] = connection
            stopping = self._stopping
            announced = list(self._announced.values())
        for message in announced:
            connection.send(message)
        if stopping:
            connection.send({"t": "stop"})
        try:
            self._on_message(hello, hello)
            for line in rfile:
                try:
                    message = json.loads(line)
                except ValueError:
                    message = None
                if not isinstance(message, dict):
                    log.warning("Ignored a malformed control message from worker %s", hello.get("worker"))
                    continue
                self._on_message(hello, message)
        except OSError:
            pass
        finally:
            with self._lock:
                self._connections.pop(key, None)
            self._on_message(hello, {"t": "disconnected"})


class ControlClient:
    """The worker's end: connects, says hello, calls ``on_stop`` on ``stop`` or when the line
    drops, and ``on_message`` with any other message from the driver."""

    def __init__(self, address: Tuple[str, int], token: str, hello: dict,
                 on_stop: Callable[[], None], on_message: Optional[Callable[[dict], None]] = None) -> None:
        self._address = address
        self._on_stop = on_stop
        self._on_message = on_message
        self._lock = threading.Lock()
        self._sock = self._connect(address)
        self._closed = False
        self.send({"t": "hello", "token": token, **hello})
        self._reader = threading.Thread(target=self._read, name="spark-control-reader", daemon=True)
        self._reader.start()

    @staticmethod
    def _connect(address: Tuple[str, int]) -> socket.socket:
        deadline = time.monotonic() + CONNECT_TIMEOUT_S
        while True:
            try:
                return socket.create_connection(address, timeout=5.0)
            except OSError as exc:
                if time.monotonic() >= deadline:
                    raise ConnectionError(f"cannot reach the driver's control channel at "
                                          f"{address[0]}:{address[1]} ({exc})") from None
                time.sleep(0.5)

    def send(self, message: dict) -> bool:
        try:
            with self._lock:
                self._sock.sendall(_encode(message))
            return True
        except OSError:
            return False

    def _read(self) -> None:
        try:
            self._sock.settimeout(None)  # raises if the worker closed the line already
            for line in self._sock.makefile("rb"):
                try:
                    message = json.loads(line)
                except ValueError:
                    continue
                if not isinstance(message, dict):
                    continue
                if message.get("t") == "stop":
                    self._on_stop()
                elif self._on_message is not None:
                    self._on_message(message)
        except OSError:
            pass
        if not self._closed:
            self._on_stop()  # the driver is gone: stop cleanly rather than mirror unsupervised

    def close(self) -> None:
        self._closed = True
        try:
            self._sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._sock.close()

