"""gunicorn's threaded worker, made safe against idle and slow TLS clients."""

from __future__ import annotations

import ssl
from typing import Any

from gunicorn import http as _ghttp
from gunicorn import sock as _gsock
from gunicorn.workers import gthread as _gthread

#: Newer gthread workers (>= 27) park connections without data in their poller.
_DEFER: Any = getattr(_gthread, "_DEFER", None)
_BaseThreadWorker: Any = _gthread.ThreadWorker

#: How long a worker thread waits for the first bytes of a connection, and then for its first
#: request after the TLS handshake, before parking the connection in the poller.
FIRST_BYTES_WAIT = 0.25
#: Bound on a TLS handshake, so a client that stalls mid-handshake cannot keep a thread.
HANDSHAKE_TIMEOUT = 5.0


class ThreadWorker(_BaseThreadWorker):  # type: ignore[misc]
    """gunicorn's ``gthread`` worker that never lets an idle connection hold a thread.

    Stock gthread waits for a new connection's first bytes (the TLS ClientHello), shakes hands
    and then blocks the thread reading the HTTP request. A client that opens TLS connections
    and sends nothing (an API server keeping spares, or a hostile one) thereby takes one thread
    each until all are gone. Here the handshake is done first, and a connection with no request
    yet goes back to the worker's poller; it gets a thread again when a request arrives.
    """

    def handle(self, conn: Any) -> Any:
        if _DEFER is None or not self.cfg.is_ssl or conn.initialized:
            return super().handle(conn)
        if not conn.data_ready and not conn.wait_for_data(FIRST_BYTES_WAIT):
            return _DEFER
        try:  # what TConn.init does, with a bound on the handshake (ALPN offers http/1.1 only)
            conn.initialized = True
            conn.sock.setblocking(True)
            conn.sock = _gsock.ssl_wrap_socket(conn.sock, self.cfg)
            conn.sock.settimeout(HANDSHAKE_TIMEOUT)
            conn.sock.do_handshake()
            conn.sock.settimeout(None)
            conn.parser = _ghttp.get_parser(self.cfg, conn.sock, conn.client)
        except (OSError, ssl.SSLError, ValueError) as e:
            self.log.debug("TLS handshake failed with %s: %s", conn.client, e)
            return False
        pending = conn.sock.pending() if isinstance(conn.sock, ssl.SSLSocket) else 0
        conn.data_ready = False
        if pending or conn.wait_for_data(FIRST_BYTES_WAIT):
            conn.data_ready = True
            return super().handle(conn)
        return _DEFER


def worker_class() -> str:
    """The gunicorn ``worker_class`` to run: this worker where gunicorn supports parking."""
    return "webhook.worker.ThreadWorker" if _DEFER is not None else "gthread"
