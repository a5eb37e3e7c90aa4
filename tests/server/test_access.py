"""Which listener serves which paths, and the client-certificate gate, on the WSGI level."""

from __future__ import annotations

from typing import Any

import pytest

from webhook.server import access


def app(environ: dict[str, Any], start_response: Any) -> list[bytes]:
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"app\n"]


def call(wsgi: access.WSGIApp, path: str, port: str = "8443") -> tuple[str, bytes]:
    got: dict[str, str] = {}

    def start_response(status: str, headers: list[tuple[str, str]]) -> None:
        got["status"] = status

    body = b"".join(wsgi({"PATH_INFO": path, "SERVER_PORT": port}, start_response))
    return got["status"], body


def test_nothing_on_means_the_app_itself() -> None:
    assert access.guard(app) is app


@pytest.mark.parametrize(
    ("path", "port", "status"),
    [
        ("/metrics", "9090", "200 OK"),
        ("/healthz", "9090", "200 OK"),
        ("/readyz", "9090", "200 OK"),
        ("/mutate", "9090", "404 Not Found"),
        ("/validate", "9090", "404 Not Found"),
        ("/metrics", "8443", "404 Not Found"),
        ("/mutate", "8443", "200 OK"),
        ("/healthz", "8443", "200 OK"),
    ],
)
def test_a_metrics_port_serves_metrics_and_probes_only(path: str, port: str, status: str) -> None:
    assert call(access.guard(app, metrics_port=9090), path, port)[0] == status


@pytest.mark.parametrize(
    ("path", "status"),
    [
        ("/mutate", "403 Forbidden"),
        ("/validate", "403 Forbidden"),
        ("/metrics", "403 Forbidden"),
        ("/healthz", "200 OK"),
        ("/readyz", "200 OK"),
    ],
)
def test_without_a_client_certificate_only_probes_pass(path: str, status: str) -> None:
    got, body = call(access.guard(app, client_auth=True), path)
    assert got == status
    if status.startswith("403"):
        assert body == b"client certificate required\n"


def test_the_metrics_port_needs_no_client_certificate() -> None:
    guarded = access.guard(app, metrics_port=9090, client_auth=True)
    assert call(guarded, "/metrics", "9090")[0] == "200 OK"
    assert call(guarded, "/mutate", "8443")[0] == "403 Forbidden"


def test_a_connection_without_tls_has_no_client_certificate() -> None:
    assert access.has_client_certificate({}) is False
    assert access.has_client_certificate({"gunicorn.socket": object()}) is False
