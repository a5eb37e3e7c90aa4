"""``karta-webhook serve`` as a subprocess on 127.0.0.1, and TLS clients for it (the e2e tests
and ``bench/bench_hostile.py`` share these).

The client verifies the serving certificate against its CA for
``karta-webhook.karta-system.svc``, as the API server does when it calls the Service, while
connecting to 127.0.0.1; it can present a client certificate.
"""

from __future__ import annotations

import http.client
import json
import os
import resource
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from clientcerts import ClientCert
from ports import free_port as free_port  # the e2e modules import it from here

ROOT = Path(__file__).resolve().parent.parent.parent
SERVICE, NAMESPACE = "karta-webhook", "karta-system"
SERVER_NAME = f"{SERVICE}.{NAMESPACE}.svc"


class ServerFailed(RuntimeError):
    """The server exited or did not answer /healthz in time (the message holds its log)."""


@dataclass
class Server:
    port: int
    ca: Path
    certs: Path
    policy: Path
    log: Path
    proc: subprocess.Popen[bytes]
    metrics_port: int | None = None
    client: ClientCert | None = field(default=None)

    def context(self, client: ClientCert | None = None) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.ca))
        client = client or self.client
        if client is not None:
            ctx.load_cert_chain(str(client.cert), str(client.key))
        return ctx

    def connect(
        self, timeout: float = 10.0, client: ClientCert | None = None
    ) -> http.client.HTTPSConnection:
        return TLSConn(self.port, self.context(client), timeout)

    def request(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        timeout: float = 10.0,
        client: ClientCert | None = None,
    ) -> tuple[int, bytes]:
        conn = self.connect(timeout, client)
        try:
            headers = {"Content-Type": "application/json"} if body is not None else {}
            conn.request(method, path, body=body, headers=headers)
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()

    def admit(self, path: str, rv: dict[str, Any], timeout: float = 10.0) -> dict[str, Any]:
        status, body = self.request("POST", path, json.dumps(rv).encode(), timeout)
        assert status == 200, body
        out = json.loads(body)
        assert out["kind"] == "AdmissionReview" and out["apiVersion"] == "admission.k8s.io/v1"
        assert out["response"]["uid"] == rv["request"]["uid"]
        return dict(out["response"])

    def plain(self, method: str, path: str, timeout: float = 10.0) -> tuple[int, bytes]:
        """A plain-HTTP request to the metrics port."""
        assert self.metrics_port is not None
        conn = http.client.HTTPConnection("127.0.0.1", self.metrics_port, timeout=timeout)
        try:
            conn.request(method, path)
            resp = conn.getresponse()
            return resp.status, resp.read()
        finally:
            conn.close()

    def stop(self) -> None:
        """Stop the server; its log must hold no logging failure (a record a handler could not
        format is a traceback on stderr, whoever logged it)."""
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)
        text = self.log.read_text(errors="replace")
        assert "--- Logging error ---" not in text, text[:4000]


class TLSConn(http.client.HTTPSConnection):
    """Connects to 127.0.0.1 but sends SNI for, and verifies, the Service's DNS name."""

    def __init__(self, port: int, ctx: ssl.SSLContext, timeout: float) -> None:
        super().__init__("127.0.0.1", port, timeout=timeout, context=ctx)
        self._ctx = ctx

    def connect(self) -> None:
        raw = socket.create_connection((self.host, self.port), self.timeout)
        # As the API server (Go) does; http.client writes a body apart from its head, and
        # Nagle's algorithm would hold the body's last segment for the delayed ACK.
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = self._ctx.wrap_socket(raw, server_hostname=SERVER_NAME)


def serve_env() -> dict[str, str]:
    """The environment for ``python -m webhook serve`` run from a temporary directory: the
    checkout importable, and no inherited metrics directory (serve makes and removes its own)."""
    env = {k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def raise_fd_limit(want: int) -> int:
    """Raise this process's soft limit on open files towards ``want`` (children inherit it)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < want:
        new = want if hard == resource.RLIM_INFINITY else min(want, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
        soft = new
    return soft


@contextmanager
def serving(tmp: Path, policy_text: str, args: Sequence[str] = (), **kw: Any) -> Iterator[Server]:
    """:func:`start` for a test (the same arguments): a server that does not start fails the
    test with its exit and log; it is stopped on the way out."""
    try:
        server = start(tmp, policy_text, args, **kw)
    except ServerFailed as e:
        pytest.fail(str(e))
    try:
        yield server
    finally:
        server.stop()


def start(
    tmp: Path,
    policy_text: str,
    args: Sequence[str] = (),
    *,
    metrics_port: int | None = None,
    client: ClientCert | None = None,
    python: str = sys.executable,
    wait: float = 30,
) -> Server:
    """Start ``serve`` with certificates for the Service in ``tmp/certs`` and wait for it
    (``wait`` seconds at most)."""
    from webhook.server.certs import write_certs

    paths = write_certs(tmp / "certs", SERVICE, NAMESPACE)
    policy = tmp / "policy.yaml"
    policy.write_text(policy_text)
    log = tmp / "server.log"
    port = free_port()
    cmd = [
        python,
        "-m",
        "webhook",
        "serve",
        "--host=127.0.0.1",
        f"--port={port}",
        f"--tls-cert={paths.cert}",
        f"--tls-key={paths.key}",
        f"--policy={policy}",
        "--no-kube",
        *([f"--metrics-port={metrics_port}"] if metrics_port is not None else []),
        *args,
    ]
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, cwd=tmp, env=serve_env(), stdout=out, stderr=subprocess.STDOUT)
    server = Server(port, paths.ca_cert, tmp / "certs", policy, log, proc, metrics_port, client)
    deadline = time.monotonic() + wait
    while True:
        if proc.poll() is not None:
            raise ServerFailed(f"server exited with {proc.returncode}:\n{log.read_text()}")
        try:
            # /healthz answers while the definitions load (webhook.server.early); served once
            # /readyz is no longer the loading one
            if (
                server.request("GET", "/healthz", timeout=2)[0] == 200
                and b'"loading"' not in (server.request("GET", "/readyz", timeout=2)[1])
            ):
                return server
        except OSError:
            pass
        if time.monotonic() > deadline:
            server.stop()
            raise ServerFailed(f"server did not serve in {wait} s:\n{log.read_text()}")
        time.sleep(0.1)
