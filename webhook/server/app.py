"""The HTTP side of the webhooks: the Flask app factory (the admission wrapper it puts in front
is :mod:`webhook.server.app_admission`, the server's side of ``/validate`` is
:mod:`webhook.server.app_validate`).

:func:`create_app` builds the WSGI app around a :class:`~webhook.admission.state.State`. The app holds
no admission logic of its own (``/mutate`` is :func:`webhook.admission.handlers.mutate`, ``/validate`` is
:func:`webhook.admission.handlers.validate`): the wrapper decodes, calls, encodes, counts and logs, and
decides what happens when a handler fails (a workload is allowed, a Karta denied). Every request
reads ``state.snapshot`` once, so it sees one consistent set of definitions and policy even while
a reload swaps in the next. How the app is served (gunicorn, TLS) is :mod:`webhook.server.run`.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Mapping

from flask import Flask, Response, request
from werkzeug.exceptions import HTTPException, RequestEntityTooLarge

from webhook.admission import gangpod, handlers
from webhook.admission import review as admission
from webhook.admission.manifests import GANG_PATH
from webhook.admission.state import FileReloader, Snapshot, State
from webhook.base.limits import (
    DRAIN_LIMIT,
    EVAL_TIMEOUT,
    MAX_BODY,
    VALIDATE_CONCURRENCY,
    VALIDATE_WAITERS,
)
from webhook.jq.engine import Engine
from webhook.jq.sandbox import Sandbox
from webhook.karta import loading
from webhook.karta.samples import SampleIndex
from webhook.server import metrics
from webhook.server.app_admission import AdmissionRoutes, Handler, admit
from webhook.server.app_validate import validate

__all__ = ["Webhooks", "create_app"]


log = logging.getLogger("karta_webhook")


class Webhooks:
    """What the views share (kept on ``app.extensions["karta"]``): the state, its file
    reloader, the jq engines (one for workloads, one for definitions being checked, whose
    sandbox children run at a lower CPU priority) and the sample objects definitions are
    checked against."""

    def __init__(
        self,
        state: State,
        engine: Engine,
        validate_engine: Engine,
        samples: SampleIndex | None,
        validate_timeout: float,
        reloader: FileReloader | None = None,
    ) -> None:
        self.state = state
        self.engine = engine
        self.validate_engine = validate_engine
        self.reloader = reloader or FileReloader(state)
        self.validate_timeout = validate_timeout
        #: Karta checks running at once in this process (each may keep a sandbox child busy)
        self.validations = threading.BoundedSemaphore(VALIDATE_CONCURRENCY)
        #: request threads that may wait for a validation slot (running ones not counted)
        self.validate_waiters = threading.BoundedSemaphore(VALIDATE_WAITERS)
        self._samples = samples
        self._samples_lock = threading.Lock()
        #: whether every worker of the server is ready (:class:`webhook.server.readiness.Peers`;
        #: None: this process is the only one)
        self.peers: Callable[[], bool] | None = None

    def samples(self) -> SampleIndex:
        """The bundled catalog's samples unless the app was given others (loaded on the first
        /validate: /mutate must not pay for them)."""
        if self._samples is None:
            with self._samples_lock:
                if self._samples is None:
                    try:
                        self._samples = SampleIndex.load([loading.samples_dir()])
                    except Exception:
                        log.exception("cannot load the bundled samples; validating without them")
                        self._samples = SampleIndex()
        return self._samples


def create_app(
    state: State,
    *,
    engine: Engine | None = None,
    validate_engine: Engine | None = None,
    samples: SampleIndex | None = None,
    validate_timeout: float = EVAL_TIMEOUT,
    reloader: FileReloader | None = None,
) -> Flask:
    """The webhook WSGI app over ``state``.

    Routes: ``POST /mutate``, ``POST /validate`` (AdmissionReview v1 in and out), ``GET /healthz``
    (the process answers), ``GET /readyz`` (definitions loaded and ``state.ready``, e.g. the
    first cluster list applied; 503 otherwise; ``staleSources`` names the sources whose last
    reload failed, which leaves the server ready on their last good version), ``GET /metrics``
    (Prometheus).

    ``engine`` evaluates the definitions' jq on workloads and ``validate_engine`` on samples
    when a Karta is checked (the app owns them unless given); ``samples`` are
    the objects Karta definitions are evaluated on (default: the bundled catalog's samples);
    ``validate_timeout`` bounds each evaluation of a definition's jq; ``reloader`` re-reads
    the state's files (one with the default interval unless given).

    Policy and catalog files are re-read when they change (see
    :class:`~webhook.admission.state.FileReloader`); when served, a thread per worker does it,
    otherwise requests do it lazily.
    """
    app = Flask("webhook")
    app.config["MAX_CONTENT_LENGTH"] = MAX_BODY
    engine = engine or Engine()
    validate_engine = validate_engine or Engine(Sandbox(VALIDATE_CONCURRENCY, nice=10))
    hooks = Webhooks(state, engine, validate_engine, samples, validate_timeout, reloader)
    app.extensions["karta"] = hooks
    _publish_metrics(state, hooks)
    routes = _admission_routes(state, hooks)
    _add_admission(app, routes, state, hooks)
    _add_probes(app, state, hooks)
    _add_error_pages(app)
    app.wsgi_app = AdmissionRoutes(  # type: ignore[method-assign]
        app.wsgi_app, routes, hooks.reloader, state
    )
    return app


def _publish_metrics(state: State, hooks: Webhooks) -> None:
    """The definitions' and the reloads' gauges: now, and at every change."""

    def count(snap: Snapshot) -> None:
        metrics.set_definitions(len(snap.registry), len(snap.file_errors), len(snap.cluster_errors))

    count(state.snapshot)
    state.listeners.append(count)
    metrics.set_reload_status(state.reload_status)
    hooks.reloader.on_result.append(metrics.set_reload_status)


def _admission_routes(state: State, hooks: Webhooks) -> dict[str, tuple[str, Handler]]:
    """The admission webhooks by path: each one's name (a metric label) and its handler over
    the snapshot a request sees."""

    def mutate_handler(req: admission.Request, snap: Snapshot) -> handlers.Result:
        return handlers.mutate(req, snap.registry, snap.policy, hooks.engine, state.namespaces)

    def validate_handler(req: admission.Request, snap: Snapshot) -> handlers.Result:
        return validate(req, snap, state, hooks)

    def gang_handler(req: admission.Request, snap: Snapshot) -> handlers.Result:
        return gangpod.mutate_pod(req, snap.registry, snap.policy, hooks.engine, state.owners)

    return {
        "/mutate": ("mutate", mutate_handler),
        GANG_PATH: ("gang", gang_handler),
        "/validate": ("validate", validate_handler),
    }


def _add_admission(
    app: Flask, routes: Mapping[str, tuple[str, Handler]], state: State, hooks: Webhooks
) -> None:
    """The admission routes on Flask's side (reached only without :class:`AdmissionRoutes`
    in front), and the lazy reload before every request."""

    @app.before_request
    def _reload() -> None:
        hooks.reloader.maybe_reload()

    def flask_admit() -> Response:  # reached only without AdmissionRoutes in front
        webhook, handle = routes[request.path]
        _drain_oversized()
        status, body = admit(state, webhook, handle, request.get_data(cache=False))
        mimetype = "application/json" if status == 200 else "text/plain"
        return Response(body, status, mimetype=mimetype)

    for path in routes:  # registered so that other methods get 405 with Allow
        app.add_url_rule(path, path.strip("/"), flask_admit, methods=["POST"])


def _add_probes(app: Flask, state: State, hooks: Webhooks) -> None:
    """``/healthz``, ``/readyz`` and ``/metrics``."""

    @app.get("/healthz")
    def healthz() -> Response:
        return _text(200, "ok")

    @app.get("/readyz")
    def readyz() -> Response:
        snap = state.snapshot
        n = len(snap.registry)
        ready = bool(state.ready) and n > 0
        workers = hooks.peers() if hooks.peers is not None else True
        body = {
            "ready": ready and workers,
            "definitions": n,
            "policyRules": len(snap.policy.rules),
            "clusterSynced": bool(state.ready),
            # sources this process has not read yet; whether every worker has read them all
            "waitingFor": state.waiting_for(),
            "workersReady": workers,
            # sources whose last reload failed: still ready, their last good version serves
            # (as Prometheus does); the reload gauges are what to alert on
            "staleSources": stale_sources(state.reload_status),
        }
        status = 200 if ready and workers else 503
        return Response(admission.dumps(body), status, mimetype="application/json")

    @app.get("/metrics")
    def metrics_view() -> Response:
        data, content_type = metrics.render()
        return Response(data, 200, content_type=content_type)


def _add_error_pages(app: Flask) -> None:
    """Errors answered as one line of plain text."""

    @app.errorhandler(HTTPException)
    def http_error(e: HTTPException) -> Response:
        # 404, 405, 413 ...: one line of plain text, never an HTML page, but with the
        # exception's own headers (a 405 must say what is Allowed).
        code = e.code or 500
        text = f"request body larger than {MAX_BODY} bytes" if code == 413 else f"{code} {e.name}"
        resp = _text(code, text)
        for name, value in e.get_headers():
            if name.lower() != "content-type":
                resp.headers[name] = value
        return resp

    @app.errorhandler(Exception)
    def internal_error(e: Exception) -> Response:  # the last resort; views catch their own
        log.exception("unhandled error", extra={"fields": {"path": request.path}})
        return _text(500, "internal error")


def stale_sources(status: Mapping[str, tuple[bool, float]]) -> list[str]:
    """The sources (``catalog``, ``policy``, ``certificates``) whose last reload failed."""
    return sorted(name for name, (ok, _) in status.items() if not ok)


def _text(code: int, text: str) -> Response:
    return Response(text + "\n", code, mimetype="text/plain")


def _drain_oversized() -> None:
    """Read and drop an announced body over :data:`MAX_BODY` (up to :data:`DRAIN_LIMIT`)
    before the 413, so a client that writes its whole body before reading gets the answer
    instead of a reset connection (gunicorn itself drains only 64 KiB)."""
    length = request.content_length
    if length is None or length <= MAX_BODY:
        return
    stream = request.environ.get("wsgi.input")
    if stream is not None and length <= DRAIN_LIMIT:
        # A client that hangs up mid-drain is still answered 413 (as far as it listens): the
        # answer does not depend on the rest of the body, and a 500 would be wrong.
        with contextlib.suppress(OSError):
            while length > 0 and (chunk := stream.read(min(length, 1 << 16))):
                length -= len(chunk)
    raise RequestEntityTooLarge()
