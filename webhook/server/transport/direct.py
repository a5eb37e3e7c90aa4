"""The direct path: the admission webhooks' requests as the API server sends them, answered
without gunicorn's parser, environ and response objects.

A POST to one of ``direct_paths`` whose head the framer found plain
(:attr:`~webhook.server.transport.framing.Head.plain`: HTTP/1.1, a Content-Length, only fields
gunicorn neither refuses nor acts on) is answered as gunicorn's ``handle_request`` would answer
it: the WSGI app with the environ keys such a request has (what the admission routes and the
access guard read), then gunicorn's head (status, ``Server``, ``Date``, ``Connection``, the
app's headers) and the body, as one piece. What that path saves of the server's CPU per
request, by an A/B run: docs/performance.md.

:func:`run_app` calls the app; :func:`encode` makes the bytes to send once the worker has
decided whether the connection stays open. Neither touches the socket.
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable
from typing import Any

from gunicorn import SERVER as _SERVER
from gunicorn.util import http_date as _http_date

from webhook.server.transport.conns import Conn

__all__ = ["Answer", "encode", "run_app"]

#: What the app answered: its status line, its headers and its body.
Answer = tuple[str, list[tuple[str, str]], bytes]


def run_app(
    wsgi: Callable[..., Any], conn: Conn, target: bytes, body: bytes, multiprocess: bool
) -> Answer:
    """The WSGI app's answer to ``POST target`` with ``body`` on ``conn``."""
    path, _, query = target.partition(b"?")
    client = conn.client if isinstance(conn.client, tuple) else ("", 0)
    environ = {
        "REQUEST_METHOD": "POST",
        "SCRIPT_NAME": "",
        "PATH_INFO": path.decode("latin-1"),
        "QUERY_STRING": query.decode("latin-1"),
        "RAW_URI": target.decode("latin-1"),
        "SERVER_PROTOCOL": "HTTP/1.1",
        "SERVER_PORT": str(conn.server[1]),
        "REMOTE_ADDR": str(client[0]),
        "CONTENT_LENGTH": str(len(body)),
        "wsgi.input": io.BytesIO(body),
        "wsgi.url_scheme": "https" if conn.tls else "http",
        "wsgi.multithread": True,
        "wsgi.multiprocess": multiprocess,
        "wsgi.run_once": False,
        "gunicorn.socket": conn.sock,
    }
    answer: list[Any] = []

    def start_response(status: str, headers: list[tuple[str, str]], exc: Any = None) -> Any:
        answer[:] = [status, headers]
        return _no_write

    chunks = wsgi(environ, start_response)
    try:
        out = b"".join(chunks)
    finally:
        close = getattr(chunks, "close", None)
        if close is not None:
            close()
    status, headers = answer
    return status, headers, out


def encode(answer: Answer, keep: bool) -> bytes:
    """gunicorn's head for ``answer`` (``Connection`` as ``keep`` says) and its body."""
    status, headers, out = answer
    lines = [
        f"HTTP/1.1 {status}\r\nServer: {_SERVER}\r\nDate: {_date()}\r\n"
        f"Connection: {'keep-alive' if keep else 'close'}\r\n"
    ]
    lines += [f"{name}: {str(value).strip()}\r\n" for name, value in headers]
    if not any(name.lower() == "content-length" for name, _ in headers):
        lines.append(f"Content-Length: {len(out)}\r\n")  # gunicorn would chunk it
    lines.append("\r\n")
    return "".join(lines).encode("latin-1") + out


#: The last second :func:`_date` formatted, and its text.
_second: tuple[int, str] = (-1, "")


def _date() -> str:
    """gunicorn's ``Date`` (``util.http_date()``), formatted once per second: the email
    module's formatting took a twentieth of the direct path's CPU when done per request."""
    global _second
    now = int(time.time())
    last = _second
    if last[0] != now:
        last = _second = (now, _http_date(now))
    return last[1]


def _no_write(data: bytes) -> None:
    """The ``write`` a WSGI ``start_response`` returns: the admission routes return their
    answer instead."""
    raise NotImplementedError("write() is not supported on the direct path")
