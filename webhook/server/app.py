"""The HTTP side of the webhooks: the Flask app factory and the admission wrapper.

:func:`create_app` builds the WSGI app around a :class:`~webhook.admission.registry.State`. The app holds
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
import time
from collections.abc import Callable, Mapping
from typing import Any

from flask import Flask, Response, request
from werkzeug.exceptions import HTTPException, RequestEntityTooLarge

from webhook.admission import handlers
from webhook.admission import review as admission
from webhook.admission.registry import FileReloader, Snapshot, State
from webhook.base.gvk import GVK
from webhook.base.limits import (
    DRAIN_LIMIT,
    EVAL_TIMEOUT,
    LIVE_SAMPLES_TIMEOUT,
    MAX_BODY,
    VALIDATE_BUDGET,
    VALIDATE_CONCURRENCY,
    VALIDATE_WAITERS,
    WEBHOOK_TIMEOUT_SECONDS,
)
from webhook.jq.engine import Engine
from webhook.jq.sandbox import Sandbox
from webhook.karta import loading
from webhook.karta import model as definitions
from webhook.karta.model import is_karta_kind
from webhook.karta.samples import SampleIndex
from webhook.server import logs, metrics

__all__ = ["Webhooks", "create_app"]


log = logging.getLogger("karta_webhook")
admission_log = logging.getLogger("karta_webhook.admission")


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
    :class:`~webhook.admission.registry.FileReloader`); when served, a thread per worker does it,
    otherwise requests do it lazily.
    """
    app = Flask("webhook")
    app.config["MAX_CONTENT_LENGTH"] = MAX_BODY
    engine = engine or Engine()
    validate_engine = validate_engine or Engine(Sandbox(VALIDATE_CONCURRENCY, nice=10))
    hooks = Webhooks(state, engine, validate_engine, samples, validate_timeout, reloader)
    app.extensions["karta"] = hooks

    def count(snap: Snapshot) -> None:
        metrics.set_definitions(len(snap.registry), len(snap.file_errors), len(snap.cluster_errors))

    count(state.snapshot)
    state.listeners.append(count)
    metrics.set_reload_status(state.reload_status)
    hooks.reloader.on_result.append(metrics.set_reload_status)

    def mutate_handler(req: admission.Request, snap: Snapshot) -> handlers.Result:
        return handlers.mutate(req, snap.registry, snap.policy, hooks.engine)

    def validate_handler(req: admission.Request, snap: Snapshot) -> handlers.Result:
        # Waiting longer than this would let the API server's timeout, not our answer, decide.
        wait = max(0.0, WEBHOOK_TIMEOUT_SECONDS - VALIDATE_BUDGET - 1.0)
        # At most VALIDATE_WAITERS request threads wait for a slot; the others are answered
        # busy at once, so Kartas never hold the threads /mutate needs.
        if not hooks.validate_waiters.acquire(blocking=False):
            return _busy(req)
        try:
            got = hooks.validations.acquire(timeout=wait)
        finally:
            hooks.validate_waiters.release()
        if not got:
            return _busy(req)
        try:
            start = time.monotonic()
            cluster, warnings = _cluster_inputs(req, snap, state)
            result = handlers.validate(
                req,
                hooks.samples(),
                snap.cluster_kartas,
                hooks.validate_engine,
                timeout=hooks.validate_timeout,
                # what the live list took comes out of the budget, but the check keeps half
                budget=max(VALIDATE_BUDGET / 2, VALIDATE_BUDGET - (time.monotonic() - start)),
                **cluster,
            )
            result.response.warnings.extend(f"karta-webhook: {w}" for w in warnings)
            return result
        finally:
            hooks.validations.release()

    routes: dict[str, tuple[str, Handler]] = {
        "/mutate": ("mutate", mutate_handler),
        "/validate": ("validate", validate_handler),
    }

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

    @app.get("/healthz")
    def healthz() -> Response:
        return _text(200, "ok")

    @app.get("/readyz")
    def readyz() -> Response:
        snap = state.snapshot
        n = len(snap.registry)
        ready = bool(state.ready) and n > 0
        body = {
            "ready": ready,
            "definitions": n,
            "policyRules": len(snap.policy.rules),
            "clusterSynced": bool(state.ready),
            # sources whose last reload failed: still ready, their last good version serves
            # (as Prometheus does); the reload gauges are what to alert on
            "staleSources": stale_sources(state.reload_status),
        }
        return Response(admission.dumps(body), 200 if ready else 503, mimetype="application/json")

    @app.get("/metrics")
    def metrics_view() -> Response:
        data, content_type = metrics.render()
        return Response(data, 200, content_type=content_type)

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

    app.wsgi_app = AdmissionRoutes(  # type: ignore[method-assign]
        app.wsgi_app, routes, hooks.reloader, state
    )
    return app


class AdmissionRoutes:
    """WSGI middleware in front of Flask that answers ``POST /mutate`` and ``POST /validate``
    itself: the admission path is the hot path, and Flask's request context, routing and
    response objects cost more than the answer (everything else goes on to Flask). Bodies over
    :data:`MAX_BODY` get 413 (read and dropped up to :data:`DRAIN_LIMIT` first, so that the
    client sees it; under the server's worker, the poller has done that already)."""

    def __init__(
        self,
        app: Callable[..., Any],
        routes: Mapping[str, tuple[str, Handler]],
        reloader: FileReloader,
        state: State,
    ) -> None:
        self.app = app
        self.routes = routes
        self.reloader = reloader
        self.state = state

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        route = self.routes.get(environ.get("PATH_INFO", ""))
        if route is None or environ.get("REQUEST_METHOD") != "POST":
            return self.app(environ, start_response)
        self.reloader.maybe_reload()
        body = _read_body(environ)
        if body is None:
            status, out = 413, f"request body larger than {MAX_BODY} bytes\n".encode()
        else:
            status, out = admit(self.state, route[0], route[1], body)
        kind = "application/json" if status == 200 else "text/plain; charset=utf-8"
        start_response(_STATUS[status], [("Content-Type", kind), ("Content-Length", str(len(out)))])
        return [out]


_STATUS = {200: "200 OK", 400: "400 BAD REQUEST", 413: "413 REQUEST ENTITY TOO LARGE"}


def _read_body(environ: Mapping[str, Any]) -> bytes | None:
    """The request body, or None when it is over :data:`MAX_BODY` (drained up to
    :data:`DRAIN_LIMIT` first). Without a Content-Length (chunked), read to the end, capped."""
    stream = environ.get("wsgi.input")
    if stream is None:
        return b""
    try:
        length = int(environ.get("CONTENT_LENGTH") or -1)
    except ValueError:
        length = -1
    if 0 <= length <= MAX_BODY:
        return bytes(stream.read(length)) if length else b""
    if length > MAX_BODY:
        if length <= DRAIN_LIMIT:
            # A client that hangs up mid-drain is still answered 413 (as far as it listens):
            # the answer does not depend on the rest of the body, and a 500 would be wrong.
            with contextlib.suppress(OSError):
                while length > 0 and (chunk := stream.read(min(length, 1 << 16))):
                    length -= len(chunk)
        return None
    chunks, size = [], 0
    while chunk := stream.read(1 << 16):
        size += len(chunk)
        if size > MAX_BODY:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _judged(req: admission.Request) -> bool:
    """Whether ``/validate`` checks this request (the others are allowed unchecked)."""
    return (
        req.operation in ("CREATE", "UPDATE")
        and isinstance(req.object, Mapping)
        and is_karta_kind(req.object_kind)
        and not handlers.unchanged_or_leaving(req)
    )


def _cluster_inputs(
    req: admission.Request, snap: Snapshot, state: State
) -> tuple[dict[str, Any], list[str]]:
    """What a cluster adds to checking a Karta: the CRD schemas (a root kind without a CRD is
    then admitted with a warning) and live objects of the root kind, read within
    :data:`LIVE_SAMPLES_TIMEOUT` (part of the validation budget), with warnings for what could
    not be read. Only what is known is passed: offline, the check runs as in the CLI."""
    extra: dict[str, Any] = {}
    if snap.crds is not None:
        extra["schemas"] = snap.crds
        extra["crd_required"] = True
    live = state.live_samples
    gvk = definitions.root_gvk(req.object) if live is not None and _judged(req) else None
    if live is None or gvk is None or is_karta_kind(gvk):
        return extra, []
    try:
        samples, warnings = live(gvk, snap.crds, LIVE_SAMPLES_TIMEOUT)
    except Exception as e:  # reading is best effort: never the reason a Karta is denied
        log.exception("reading live samples failed")
        samples, warnings = [], [f"live objects of {gvk} not read ({type(e).__name__}: {e})"]
    if samples:
        extra["live_samples"] = samples
    return extra, warnings


def _busy(req: admission.Request) -> handlers.Result:
    """The answer when other Karta checks hold every validation slot: denied, to retry (a
    Karta nobody checked must not slip in, and /mutate keeps its threads)."""
    resp = admission.Response(
        uid=req.uid,
        allowed=False,
        code=429,
        reason="TooManyRequests",
        message="karta-webhook: other Kartas are being validated right now; try again",
    )
    return handlers.Result(resp, "Karta", "busy")


def stale_sources(status: Mapping[str, tuple[bool, float]]) -> list[str]:
    """The sources (``catalog``, ``policy``, ``certificates``) whose last reload failed."""
    return sorted(name for name, (ok, _) in status.items() if not ok)


def _text(code: int, text: str) -> Response:
    return Response(text + "\n", code, mimetype="text/plain")


#: A webhook's handler: the answer, its outcome (a metric label) and its patch's length.
Handler = Callable[[admission.Request, Snapshot], handlers.Result]


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


def admit(state: State, webhook: str, handle: Handler, body: bytes) -> tuple[int, bytes]:
    """One admission request: decode, handle, encode, count and log. The HTTP status (200,
    or 400 for a body that is no AdmissionReview, with a one-line reason) and the body."""
    start = time.perf_counter()
    try:
        req = admission.decode(body)
    except admission.BadReview as e:
        metrics.count_admission(webhook, "", "", "bad_request", time.perf_counter() - start)
        admission_log.warning(
            "bad admission request",
            extra={"fields": {"webhook": webhook, "outcome": "bad_request", "reason": str(e)}},
        )
        return 400, (str(e) + "\n").encode()
    snap = state.snapshot  # once per request: one consistent registry and policy
    gvk = req.object_kind
    kind = _kind_label(snap, gvk)
    failure: str | None = None
    try:
        result = handle(req, snap)
        resp, outcome, ops, failure = result.response, result.outcome, result.ops, result.failure
    except Exception as e:
        # Never a 5xx. A workload we could not handle is allowed unchanged (failing it would
        # block workloads on our bug); a Karta we could not check is denied, as the validating
        # webhook's failurePolicy: Fail intends — a definition nobody checked must not slip in.
        admission_log.exception(
            "handler failed", extra={"fields": {"webhook": webhook, "uid": req.uid}}
        )
        said = f"karta-webhook: {webhook} failed: {type(e).__name__}: {e}"
        closed = webhook == "validate" or snap.policy.failure_mode == "closed"
        if closed:
            resp = admission.Response(
                uid=req.uid, allowed=False, code=500, reason="InternalError", message=said
            )
        else:
            resp = admission.Response(uid=req.uid, warnings=[said])
        outcome, ops = "error", 0
        failure = "error" if webhook == "mutate" else None
    out = admission.encode(resp)
    elapsed = time.perf_counter() - start
    metrics.count_admission(webhook, kind, req.operation, outcome, elapsed, ops, failure)
    logs.emit(
        admission_log,
        logging.INFO,
        "admission",
        {
            "uid": req.uid,
            "webhook": webhook,
            "apiVersion": gvk.api_version if gvk else "",
            "kind": gvk.kind if gvk else "",
            "namespace": req.namespace,
            "name": req.name or _meta_name(req.object),
            "operation": req.operation,
            "dryRun": req.dry_run,
            "outcome": outcome,
            "ops": ops,
            **({"failure": failure, "failureMode": snap.policy.failure_mode} if failure else {}),
            "warnings": len(resp.warnings),
            "ms": round(elapsed * 1000, 3),
        },
    )
    return 200, out


def _meta_name(obj: Any) -> str:
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    if not isinstance(meta, dict):
        return ""
    return str(meta.get("name") or meta.get("generateName") or "")


def _kind_label(snap: Snapshot, gvk: GVK | None) -> str:
    """A bounded ``kind`` label: Kinds with a definition, Karta, else ``other``."""
    if gvk is None:
        return ""
    if is_karta_kind(gvk) or snap.registry.lookup(gvk) is not None:
        return gvk.kind
    return "other"
