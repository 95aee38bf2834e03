"""systemd's notification protocol (sd_notify): READY=1 once consuming, STOPPING=1 on shutdown.

Only when ``NOTIFY_SOCKET`` is set (``Type=notify`` units). The protocol is one datagram per
message to that Unix socket; a leading ``@`` names an abstract socket.
"""

from __future__ import annotations

import logging
import os
import socket

log = logging.getLogger("mirror_maker.notify")


def notify(message: str) -> bool:
    """Send ``message`` (e.g. "READY=1"); False, logged at DEBUG, when it could not be sent."""
    address = os.environ.get("NOTIFY_SOCKET")
    if not address:
        return False
    if address.startswith("@"):
        address = "\0" + address[1:]
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.connect(address)
            sock.sendall(message.encode())
        return True
    except OSError as exc:
        log.debug("sd_notify %s failed: %s", message, exc)
        return False
