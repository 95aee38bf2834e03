"""A TCP proxy in its own process, for outages: cut it (SIGKILL: every connection drops at once)
and restore it on the same port.

It stands in front of a Kafka listener that advertises the proxy's port (``KafkaCluster`` with
``proxied=True``), so every connection a client makes, to the bootstrap and to the broker it
learns from metadata, goes through it.

    python tcp_proxy.py LISTEN_PORT ORIGIN_HOST:ORIGIN_PORT
"""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Optional

READY_TIMEOUT_S = 15.0


class TcpProxy:
    def __init__(self, port: int, origin: str, log_dir: os.PathLike, name: str = "proxy") -> None:
        self.port = port
        self.origin = origin
        self.name = name
        self.log_dir = Path(log_dir)
        self.process: Optional[subprocess.Popen] = None

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def start(self) -> "TcpProxy":
        from mirror_maker.embedded import die_with_parent

        self.log_dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_dir / f"{self.name}.log", "ab") as out:
            self.process = subprocess.Popen(
                [sys.executable, __file__, str(self.port), self.origin], stdin=subprocess.DEVNULL,
                stdout=out, stderr=subprocess.STDOUT, preexec_fn=die_with_parent(), start_new_session=True)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    return self
            except OSError:
                if self.process.poll() is not None:
                    break
                time.sleep(0.02)
        raise RuntimeError(f"the TCP proxy did not start on port {self.port}")

    def cut(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.wait()
            self.process = None

    stop = cut

    def restore(self) -> "TcpProxy":
        return self.start()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            data = await reader.read(262144)
            if not data:
                break
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        writer.close()


async def _serve(port: int, origin_host: str, origin_port: int) -> None:
    async def handle(client_reader, client_writer):
        try:
            origin_reader, origin_writer = await asyncio.open_connection(origin_host, origin_port)
        except OSError:
            client_writer.close()
            return
        await asyncio.gather(_pipe(client_reader, origin_writer), _pipe(origin_reader, client_writer))

    server = await asyncio.start_server(handle, "127.0.0.1", port, reuse_address=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    port = int(sys.argv[1])
    host, _, origin_port = sys.argv[2].rpartition(":")
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    asyncio.run(_serve(port, host, int(origin_port)))


if __name__ == "__main__":
    main()
