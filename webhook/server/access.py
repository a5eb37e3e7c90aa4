"""Which listener serves which paths, and who may call the webhooks: a WSGI wrapper.

* With a separate metrics listener (``serve --metrics-port``), ``/metrics`` is served there
  only, with ``/healthz`` and ``/readyz``; anything else on it is 404, and the webhook
  listener no longer serves ``/metrics`` (so a NetworkPolicy on the metrics port is what
  decides who reads them).
* With client authentication (``serve --client-ca``), a request on the webhook listener
  whose connection presented no client certificate gets 403, except ``/healthz`` and
  ``/readyz`` (kubelet probes present none). A certificate from another CA never gets this
  far: the TLS handshake refuses it (:class:`webhook.server.tls.CertReloader`).

Listeners are told apart by ``SERVER_PORT``, which gunicorn sets from the listening socket's
address (not from the request's ``Host``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

#: Paths every listener answers without a client certificate.
PROBES = frozenset({"/healthz", "/readyz"})
METRICS = "/metrics"

StartResponse = Callable[..., Any]
WSGIApp = Callable[[dict[str, Any], StartResponse], Iterable[bytes]]


def _refuse(start_response: StartResponse, status: str, text: str) -> list[bytes]:
    body = (text + "\n").encode()
    start_response(
        status, [("Content-Type", "text/plain; charset=utf-8"), ("Content-Length", str(len(body)))]
    )
    return [body]


def has_client_certificate(environ: dict[str, Any]) -> bool:
    """Whether the request's TLS connection presented a (verified) client certificate. The
    socket is a TLS one, or the worker's :class:`~webhook.server.transport.thread_io.OneSend` around one: asked
    for what it has, not for its type."""
    getpeercert = getattr(environ.get("gunicorn.socket"), "getpeercert", None)
    return getpeercert is not None and bool(getpeercert())


def guard(app: WSGIApp, *, metrics_port: int | None = None, client_auth: bool = False) -> WSGIApp:
    """``app`` behind the rules of the module text (unchanged when neither is on)."""
    if metrics_port is None and not client_auth:
        return app
    metrics_port_text = str(metrics_port) if metrics_port is not None else None

    def guarded(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        if metrics_port_text is not None and environ.get("SERVER_PORT") == metrics_port_text:
            if path != METRICS and path not in PROBES:
                return _refuse(start_response, "404 Not Found", "404 Not Found")
            return app(environ, start_response)
        if metrics_port_text is not None and path == METRICS:
            return _refuse(start_response, "404 Not Found", "404 Not Found")
        if client_auth and path not in PROBES and not has_client_certificate(environ):
            return _refuse(start_response, "403 Forbidden", "client certificate required")
        return app(environ, start_response)

    return guarded
