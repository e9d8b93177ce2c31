"""Wire format between sources and the controller: one JSON object per line over a TCP loopback connection.

Why TCP on 127.0.0.1 rather than a Unix socket or a multiprocessing pipe: the sources run in Python processes
Spark's JVM starts (not children of the driver's Python), so the address must be a string that travels in a source
option; TCP loopback works the same on every OS and in containers with read-only temp directories. Each request
gets exactly one reply line; a connection carries any number of requests. Messages are small (< 4 KiB)."""

from __future__ import annotations

import contextlib
import json
import socket
from typing import Any

MAX_LINE = 256 * 1024  # a line longer than this is a protocol error, not a reason to grow memory


def parse_address(address: str) -> tuple[str, int]:
    """``host:port`` -> (host, port); the error says what was expected."""
    from adaptstream.errors import ConfigError

    host, sep, port = str(address).rpartition(":")
    if not sep or not host or not port.isdigit():
        msg = f"controller address must look like 127.0.0.1:PORT, got {address!r}"
        raise ConfigError(msg)
    return host, int(port)


def encode(msg: dict[str, Any]) -> bytes:
    return json.dumps(msg, separators=(",", ":"), allow_nan=False).encode() + b"\n"


class LineSocket:
    """A connected socket that sends and receives newline-terminated JSON messages."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._buf = b""

    def send(self, msg: dict[str, Any]) -> None:
        self.sock.sendall(encode(msg))

    def recv(self) -> dict[str, Any] | None:
        """The next message, or None when the peer closed the connection."""
        while b"\n" not in self._buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                return None
            self._buf += chunk
            if len(self._buf) > MAX_LINE:
                msg = "message too long"
                raise ValueError(msg)
        line, self._buf = self._buf.split(b"\n", 1)
        return json.loads(line)

    def shutdown(self) -> None:
        """End the connection from this side now (a blocked ``recv`` on the other side returns)."""
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()
