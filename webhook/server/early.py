"""The probes while the definitions load: ``serve`` reads and checks every definition and the
policy before gunicorn listens (a bad file is exit 2, and the workers share what the master
loaded), which takes minutes for thousands of ``--catalog`` definitions. Meanwhile
:class:`EarlyProbes` listens on the same ports and answers ``GET /healthz`` 200 (the process
is alive: the kubelet's liveness probe never restarts a container for loading) and
everything else 503 (``/readyz``: ``{"ready": false, "loading": true}``; an admission call
cannot reach a pod that is not ready, and is refused, never answered without the policy).
:meth:`EarlyProbes.stop` closes the ports just before gunicorn binds them.

TLS as the server's own (the serving certificate, TLS >= 1.2), a handshake bounded by
:data:`HANDSHAKE_SECONDS` in the connection's own thread; the metrics port is plain HTTP.
"""

from __future__ import annotations

import contextlib
import json
import socket
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

HANDSHAKE_SECONDS = 5.0
#: the most of a request body read and dropped before the answer
DRAIN_BYTES = 4 << 20


class _Handler(BaseHTTPRequestHandler):
    server_version = "karta-webhook"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _answer(self) -> None:
        # a body is read (up to DRAIN_BYTES) before the answer, or closing with it unread
        # would reset the connection before the client reads the 503
        try:
            length = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            length = 0
        if 0 < length <= DRAIN_BYTES:
            self.rfile.read(length)
        path = self.path.split("?", 1)[0]
        if path == "/healthz":
            code, body, kind = 200, b"ok\n", "text/plain"
        elif path == "/readyz":
            code, kind = 503, "application/json"
            body = json.dumps({"ready": False, "loading": True}).encode()
        else:
            code, body, kind = 503, b"loading definitions; not serving yet\n", "text/plain"
        self.send_response(code)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    do_GET = do_HEAD = do_POST = _answer


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    context: ssl.SSLContext | None = None

    def finish_request(self, request: Any, client_address: Any) -> None:
        request.settimeout(HANDSHAKE_SECONDS)
        if self.context is not None:
            try:
                request = self.context.wrap_socket(request, server_side=True)
            except (OSError, ValueError):
                return
        self.RequestHandlerClass(request, client_address, self)  # type: ignore[arg-type]


class EarlyProbes:
    """Listens on ``host``'s ``port`` (TLS with ``certfile``/``keyfile``) and on
    ``plain_port`` (HTTP; None: none) until :meth:`stop`."""

    def __init__(
        self,
        host: str,
        port: int,
        certfile: Path,
        keyfile: Path,
        plain_port: int | None = None,
    ) -> None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.load_cert_chain(str(certfile), str(keyfile))
        self._servers: list[_Server] = []
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        for p, ctx in ((port, context), (plain_port, None)):
            if p is None:
                continue
            cls = type("_Bound", (_Server,), {"address_family": family, "context": ctx})
            self._servers.append(cls((host, p), _Handler))
        for s in self._servers:
            threading.Thread(target=s.serve_forever, name="karta-early", daemon=True).start()

    def stop(self) -> None:
        for s in self._servers:
            with contextlib.suppress(Exception):
                s.shutdown()
                s.server_close()
        self._servers = []
