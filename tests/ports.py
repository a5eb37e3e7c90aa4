"""Loopback ports for the servers the tests start."""

from __future__ import annotations

import socket

_GIVEN: set[int] = set()


def free_port() -> int:
    """A TCP port of 127.0.0.1 that nothing listens on now and that this process has not handed
    out before: the kernel may give one ephemeral port to two binds in a row, and a server's
    webhook and metrics ports (two calls, one test) must differ."""
    for _ in range(100):
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        if port not in _GIVEN:
            _GIVEN.add(port)
            return port
    raise RuntimeError("no loopback port this process has not handed out, in 100 tries")
