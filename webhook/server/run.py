"""Serving the app: gunicorn with the connection-safe worker, per-worker start-up, dev certificates.

:func:`run` serves :func:`webhook.server.app.create_app` with gunicorn: threaded workers whose
poller handles handshakes, slow clients and oversized bodies, so that only complete requests
reach a thread (:class:`webhook.server.transport.worker.ThreadWorker`, bounded by :class:`webhook.server.transport.conns.Limits`),
TLS >= 1.2 from files that are re-read when they change (:class:`webhook.server.tls.CertReloader`,
optionally requiring client certificates of a CA), an optional plain-HTTP metrics listener
(:func:`webhook.server.access.guard` decides which listener serves what), the state loaded once in
the master before forking (a bad catalog or policy fails startup, not the first request) and
per-worker start-up callables (``worker_start``) for whatever must run inside each worker: the
file reload thread, warming the jq sandbox, and a cluster watch.

:func:`run` prepares the master, then builds gunicorn's settings (:func:`configuration`), its
hooks (:class:`webhook.server.server_hooks.ServerHooks`), and starts it (:func:`start`).
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from flask import Flask

from webhook.admission.state import State
from webhook.base import waits
from webhook.base.limits import DRAIN_LIMIT, EVAL_TIMEOUT, LIVE_SAMPLES, MAX_BODY
from webhook.jq.engine import Engine
from webhook.jq.sandbox import Sandbox
from webhook.karta.samples import SampleIndex
from webhook.server import access, logs, metrics
from webhook.server.allocator import fix_mmap_threshold
from webhook.server.app import Webhooks, create_app
from webhook.server.app_admission import AdmissionRoutes
from webhook.server.certs import CertError
from webhook.server.readiness import Peers
from webhook.server.server_hooks import ServerHooks, WorkerStart, freeze_heap
from webhook.server.tls import CertReloader, ClientCAError
from webhook.server.transport.worker import WAITING_FACTOR, Limits, Shares, worker_class

__all__ = [
    "WorkerStart",
    "cluster_start",
    "configuration",
    "dev_certificate",
    "freeze_heap",
    "raise_open_files",
    "run",
    "start",
]

log = logging.getLogger("karta_webhook")


def dev_certificate(certs_dir: Path, port: int) -> tuple[Path, Path]:
    """The certificate and key for serving without ``--tls-cert``: a development CA and a
    certificate for localhost, made or reused in ``certs_dir`` (see
    :func:`~webhook.server.certs_dev.ensure_dev_certs`). Logs which CA to trust and how to try it."""
    from webhook.server.certs_dev import ensure_dev_certs

    paths = ensure_dev_certs(certs_dir)
    log.info(
        "no --tls-cert/--tls-key: serving a development certificate for localhost",
        extra={
            "fields": {
                "ca": str(paths.ca_cert),
                "try": f"curl --cacert {paths.ca_cert} https://localhost:{port}/healthz",
            }
        },
    )
    return paths.cert, paths.key


def raise_open_files(want: int) -> int:
    """Raise this process's soft limit on open files towards ``want`` (workers inherit it);
    warn when the hard limit is lower. Returns the soft limit now in force."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or soft >= want:
        return int(soft)
    new = want if hard == resource.RLIM_INFINITY else min(want, hard)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (new, hard))
    except (OSError, ValueError):
        new = soft
    if new < want:
        log.warning(
            "open-file limit below what --max-connections needs: connections past it wait",
            extra={"fields": {"limit": new, "wanted": want}},
        )
    return int(new)


def cluster_start(
    kubeconfig: str | None,
    certfile: Path,
    *,
    live_samples: int = LIVE_SAMPLES,
    manage_webhooks: bool = True,
) -> WorkerStart:
    """The per-worker start of the cluster side (:func:`webhook.cluster.wiring.start`).

    The ``ca.crt`` beside the serving certificate, when there is one (the mounted Secret, or
    ``karta-webhook certs`` output), is what the keeper publishes as ``caBundle``;
    ``live_samples`` is how many live objects ``/validate`` reads (0: none);
    ``manage_webhooks`` false leaves the webhook configurations to someone else (GitOps).
    """
    from webhook.cluster import wiring as kube
    from webhook.server.certs import CA_CERT_FILE

    ca_file = Path(certfile).parent / CA_CERT_FILE
    return functools.partial(
        kube.start,
        kubeconfig=kubeconfig,
        ca_file=ca_file if ca_file.is_file() else None,
        live_samples=live_samples,
        keep_webhooks=manage_webhooks,
        on_gang_api=metrics.set_gang_api,
    )


def run(
    state: State,
    *,
    host: str = "0.0.0.0",
    port: int = 8443,
    certfile: str | Path,
    keyfile: str | Path,
    workers: int = 2,
    threads: int = 8,
    samples: SampleIndex | None = None,
    validate_timeout: float = EVAL_TIMEOUT,
    keepalive: int = 30,
    graceful_timeout: int = 20,
    worker_start: Sequence[WorkerStart] = (),
    handshake_timeout: float = 5.0,
    request_timeout: float = 5.0,
    max_connections: int = 1000,
    client_ca: str | Path | None = None,
    metrics_port: int | None = None,
) -> int:
    """Serve ``create_app(state)`` with gunicorn until a signal stops it.

    Connections: a TLS handshake must be done within ``handshake_timeout`` seconds of the
    connect, a request (head and body) within ``request_timeout`` of its first byte; an idle
    keep-alive connection is closed after ``keepalive``; each worker holds at most
    ``max_connections`` (see :mod:`webhook.server.transport.worker` for what happens past it). ``client_ca``
    requires callers of the webhooks to present a certificate that CA signed;
    ``metrics_port`` serves ``/metrics`` (and the probes) there, as plain HTTP, instead of on
    the webhook port.

    ``state`` is loaded here, in the master, before the workers fork (so a bad catalog or policy
    fails before serving). Each worker then runs, in order: warm the jq sandbox, start the file
    reload thread, and every callable of ``worker_start`` with the worker's ``State`` and jq
    engine (e.g. a cluster watch calling ``state.set_cluster(...)``: threads do not survive
    ``fork``, so per-process work belongs there).
    """
    cert = _certificate(certfile, keyfile, client_ca)
    app = _master_app(state, cert, threads, samples, validate_timeout, max_connections)
    hooks: Webhooks = app.extensions["karta"]
    binds = _binds(host, port, metrics_port)
    wsgi = access.guard(app, metrics_port=metrics_port, client_auth=client_ca is not None)
    limits = _limits(app, workers, handshake_timeout, request_timeout, metrics_port)
    tmp_dir = "/dev/shm" if os.path.isdir("/dev/shm") else None
    peers = Peers(workers, tmp_dir)  # /readyz: ready once every worker is
    hooks.peers = peers.ready
    options = configuration(
        binds,
        limits,
        certfile=certfile,
        keyfile=keyfile,
        workers=workers,
        threads=threads,
        max_connections=max_connections,
        keepalive=keepalive,
        graceful_timeout=graceful_timeout,
        tmp_dir=tmp_dir,
    )
    served = ServerHooks(state, hooks, peers, cert, worker_start, binds, workers, threads)
    options.update(served.settings())
    start(options, wsgi)
    return 0


def _certificate(
    certfile: str | Path, keyfile: str | Path, client_ca: str | Path | None
) -> CertReloader:
    """The serving certificate, loaded now: unusable files fail here, before forking, as an
    input error (exit 2)."""
    try:
        return CertReloader(certfile, keyfile, client_ca)
    except ClientCAError as e:
        raise CertError(str(e)) from None
    except (OSError, ValueError) as e:
        why = (e.strerror if isinstance(e, OSError) else None) or e
        raise CertError(
            f"cannot load TLS certificate {certfile} with key {keyfile}: {why}"
        ) from None


def _master_app(
    state: State,
    cert: CertReloader,
    threads: int,
    samples: SampleIndex | None,
    validate_timeout: float,
    max_connections: int,
) -> Flask:
    """The master's preparation before it forks: the process's limits, and the app over
    ``state`` with the certificate among its reload sources."""
    # large blocks go back to the system when freed, in the master and every worker it forks
    # (webhook.server.allocator: without it a worker keeps what hostile requests grew it to)
    fix_mmap_threshold()
    # every connection a worker may hold, and some for sandbox pipes, listeners, metric files
    raise_open_files((1 + WAITING_FACTOR) * max(1, max_connections) + 256)
    app = create_app(
        state,
        engine=Engine(Sandbox(threads)),  # one child per request thread: none waits for one
        samples=samples,
        validate_timeout=validate_timeout,
    )
    hooks: Webhooks = app.extensions["karta"]
    # the serving certificate is a reload source too: checked with the files, reported with them
    hooks.reloader.sources["certificates"] = cert.poll
    state.reload_status["certificates"] = cert.status
    # The master never serves: drop the gauge it just set, or its stale value would outlive
    # the workers' reloads ("livemax" counts every live process).
    metrics.mark_process_dead(os.getpid())
    metrics.FAILURE_SOURCES["logs"] = logs.failed_writes  # lines a worker could not write
    return app


def _binds(host: str, port: int, metrics_port: int | None) -> list[str]:
    """The listeners' addresses: the webhook's, then the metrics one if any (an IPv6 host in
    brackets)."""
    ports = [port] if metrics_port is None else [port, metrics_port]
    return [f"[{host}]:{p}" if ":" in host else f"{host}:{p}" for p in ports]


def _limits(
    app: Flask,
    workers: int,
    handshake_timeout: float,
    request_timeout: float,
    metrics_port: int | None,
) -> Limits:
    """What the worker's transport holds connections to (:class:`Limits`)."""
    return Limits(
        handshake_timeout=handshake_timeout,
        request_timeout=request_timeout,
        max_body=MAX_BODY,
        drain_limit=DRAIN_LIMIT,
        plain_ports=frozenset({metrics_port} if metrics_port is not None else ()),
        on_cut=metrics.count_cut,  # never raises: metrics never cost a connection
        shares=Shares(max(64, 2 * workers)) if workers > 1 else None,
        # /mutate and /validate: the admission routes answer a POST from the body alone
        direct_paths=frozenset(path.encode() for path in _admission_paths(app)),
        inline_paths=frozenset(path.encode() for path in _admission_paths(app, "mutate")),
        inline=waits.attempt,
    )


def configuration(
    binds: Sequence[str],
    limits: Limits,
    *,
    certfile: str | Path,
    keyfile: str | Path,
    workers: int,
    threads: int,
    max_connections: int,
    keepalive: int,
    graceful_timeout: int,
    tmp_dir: str | None,
) -> dict[str, Any]:
    """gunicorn's settings by name, but for the server hooks (:class:`ServerHooks`)."""
    options: dict[str, Any] = {
        "bind": list(binds),
        "workers": max(1, workers),
        "worker_class": worker_class(limits),
        "threads": max(1, threads),
        "worker_connections": max(1, max_connections),
        "keepalive": keepalive,
        "timeout": 30,
        "graceful_timeout": graceful_timeout,
        "certfile": str(certfile),
        "keyfile": str(keyfile),
        "preload_app": True,
        "accesslog": None,
        "errorlog": "-",
        "loglevel": "info",
        "proc_name": "karta-webhook",
        # Headers only; bodies are capped by the app (MAX_BODY). Generous for long tokens.
        # The poller's framer applies the same limits first (webhook.server.transport.framing).
        "limit_request_line": limits.max_line,
        "limit_request_fields": limits.max_fields,
        "limit_request_field_size": limits.max_field,
        # gunicorn's pure-Python parser, whatever else is installed: "auto" would take the
        # optional C parser (gunicorn_h1c) when present, and the poller's framer
        # (webhook.server.transport.framing) is held to the rules of this one (tests/server/test_framing.py).
        "http_parser": "python",
        # gunicorn >= 24 opens a control socket in ~/.gunicorn by default; one server per
        # machine could own it, and the webhook has no use for it.
        "control_socket_disable": True,
    }
    if tmp_dir is not None:
        options["worker_tmp_dir"] = tmp_dir
    return options


def start(options: Mapping[str, Any], wsgi: access.WSGIApp) -> None:
    """Run gunicorn with ``options`` (those this gunicorn knows: settings differ between its
    versions) serving ``wsgi``, until a signal stops it."""
    from gunicorn.app.base import BaseApplication

    class _Server(BaseApplication):  # type: ignore[misc]
        def load_config(self) -> None:
            for key, value in options.items():
                if key in self.cfg.settings:
                    self.cfg.set(key, value)

        def load(self) -> access.WSGIApp:
            return wsgi

    _Server().run()


def _admission_paths(app: Any, webhook: str | None = None) -> Iterable[str]:
    """The paths :class:`AdmissionRoutes` answers in front of ``app`` (none without it), or
    those of one ``webhook`` (``mutate``, ``validate``)."""
    routes = app.wsgi_app
    if not isinstance(routes, AdmissionRoutes):
        return ()
    return [path for path, (name, _) in routes.routes.items() if webhook in (None, name)]
