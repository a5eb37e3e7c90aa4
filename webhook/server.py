"""The HTTP side of the webhooks: a Flask app factory and its gunicorn wiring.

:func:`create_app` builds the WSGI app around a :class:`~webhook.registry.State`; the app holds
no logic of its own (``/mutate`` is :func:`webhook.handlers.mutate`, ``/validate`` is
:func:`webhook.validation.check`), it decodes, calls, encodes, counts and logs. Every request
reads ``state.snapshot`` once, so it sees one consistent set of definitions and policy even while
a reload swaps in the next.

:func:`run` serves the app with gunicorn: threaded workers (``gthread``; a TLS connection that
has shaken hands but sends nothing is handed back to the worker's poller instead of holding a
thread, see :class:`ThreadWorker`), TLS >= 1.2 from files that are re-read when they change
(:class:`CertReloader`), the state loaded once in the master before forking (a bad catalog or
policy fails startup, not the first request) and per-worker start-up callables
(``worker_start``) for whatever must run inside each worker: the file reload thread, warming
the jq sandbox, and a cluster watch.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import functools
import json
import logging
import os
import ssl
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flask import Flask, Response, request
from werkzeug.exceptions import HTTPException, RequestEntityTooLarge

from webhook import admission, definitions, handlers, metrics
from webhook.certs import CertError
from webhook.definitions import GVK
from webhook.manifests import KARTA_VERSION, is_karta
from webhook.registry import Snapshot, State

if TYPE_CHECKING:  # validation is imported lazily: /mutate must not pay for it
    from webhook.validation import SampleIndex

__all__ = [
    "MAX_BODY",
    "CertReloader",
    "FileReloader",
    "JsonFormatter",
    "ThreadWorker",
    "configure_logging",
    "create_app",
    "run",
]

#: A little above the API server's 3 MiB request limit (an object plus its old version).
MAX_BODY = 7 * 1024 * 1024
#: Oversized bodies up to this size are read (and dropped) so their 413 reaches the client.
DRAIN_LIMIT = 4 * MAX_BODY
#: Reload checks of policy and catalog files per process, at most one per this many seconds.
RELOAD_INTERVAL = 1.0

log = logging.getLogger("karta_webhook")
admission_log = logging.getLogger("karta_webhook.admission")

WorkerStart = Callable[[State], None]


# --------------------------------------------------------------------------------- logging


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``ts``, ``level``, ``logger``, ``msg`` and the record's
    ``fields`` (``logger.info("...", extra={"fields": {...}})``)."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": _dt.datetime.fromtimestamp(record.created, _dt.UTC).isoformat(
                timespec="milliseconds"
            ),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        fields = getattr(record, "fields", None)
        if isinstance(fields, Mapping):
            out.update(fields)
        if record.exc_info:
            out["exc"] = self.formatException(record.exc_info)
        return json.dumps(out, ensure_ascii=False, default=str)


def configure_logging(level: int = logging.INFO) -> None:
    """JSON lines on stderr for this package's loggers (gunicorn keeps its own format)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    pkg = logging.getLogger("karta_webhook")
    pkg.handlers[:] = [handler]
    pkg.setLevel(level)
    pkg.propagate = False


# --------------------------------------------------------------------------------- reload


class FileReloader:
    """Calls ``state.reload_files()`` at most once per ``interval`` seconds in this process.

    Either from a daemon thread (:meth:`start`, one per worker: threads do not survive a fork)
    or, when no thread runs (the Flask test client, a plain WSGI server), lazily at the start of
    a request (:meth:`maybe_reload`). A file that fails to load is logged once per change and
    its last good version stays in force.
    """

    def __init__(self, state: State, interval: float = RELOAD_INTERVAL) -> None:
        self.state = state
        self.interval = interval
        self._last = time.monotonic()
        self._lock = threading.Lock()
        self._thread_pid: int | None = None

    @property
    def threaded(self) -> bool:
        return self._thread_pid == os.getpid()

    def maybe_reload(self) -> None:
        if self.threaded or time.monotonic() - self._last < self.interval:
            return
        if not self._lock.acquire(blocking=False):
            return  # another thread is checking right now; this request uses the snapshot it has
        try:
            if time.monotonic() - self._last >= self.interval:
                self._reload()
        finally:
            self._lock.release()

    def _reload(self) -> None:
        self._last = time.monotonic()
        before = self.state.snapshot
        try:
            errors = self.state.reload_files()
        except Exception:  # never let a reload problem reach a request or kill the thread
            log.exception("reloading definitions and policy failed")
            return
        for e in errors:
            log.error(
                "reload failed; the last good version stays in force",
                extra={"fields": {"error": str(e)}},
            )
        after = self.state.snapshot
        if after is not before:
            log.info(
                "reloaded definitions and policy",
                extra={"fields": {"definitions": len(after.registry)}},
            )

    def start(self) -> None:
        """Start the polling thread in this process (idempotent per process)."""
        if self.threaded:
            return
        self._thread_pid = os.getpid()
        threading.Thread(target=self._loop, name="karta-reload", daemon=True).start()

    def _loop(self) -> None:
        while True:
            time.sleep(self.interval)
            with self._lock:
                self._reload()


# --------------------------------------------------------------------------------- app


class _Webhooks:
    """What the views share; kept on ``app.extensions["karta"]``."""

    def __init__(self, state: State, samples: SampleIndex | None, validate_timeout: float) -> None:
        self.state = state
        self.reloader = FileReloader(state)
        self.validate_timeout = validate_timeout
        self._samples = samples
        self._samples_lock = threading.Lock()

    def samples(self) -> SampleIndex | None:
        """The sample objects definitions are checked against; the bundled catalog's samples
        unless the app was given others (loaded on the first /validate)."""
        if self._samples is None:
            with self._samples_lock:
                if self._samples is None:
                    from webhook.validation import SampleIndex

                    try:
                        self._samples = SampleIndex.load([definitions.catalog_dir() / "samples"])
                    except Exception:
                        log.exception("cannot load the bundled samples; validating without them")
                        self._samples = SampleIndex.load([])
        return self._samples


def create_app(
    state: State,
    *,
    samples: SampleIndex | None = None,
    validate_timeout: float = 2.0,
) -> Flask:
    """The webhook WSGI app over ``state``.

    Routes: ``POST /mutate``, ``POST /validate`` (AdmissionReview v1 in and out), ``GET /healthz``
    (the process answers), ``GET /readyz`` (definitions loaded and ``state.ready``, e.g. the
    first cluster list applied; 503 otherwise), ``GET /metrics`` (Prometheus).

    ``samples`` are the objects Karta definitions are evaluated on (default: the bundled
    catalog's samples); ``validate_timeout`` bounds each evaluation of a definition's jq.

    Policy and catalog files are re-read when they change (see :class:`FileReloader`); under
    :func:`run` a thread per worker does it, otherwise requests do it lazily.
    """
    app = Flask("webhook")
    app.config["MAX_CONTENT_LENGTH"] = MAX_BODY
    hooks = _Webhooks(state, samples, validate_timeout)
    app.extensions["karta"] = hooks
    metrics.DEFINITIONS.set(len(state.snapshot.registry))
    state.listeners.append(lambda snap: metrics.DEFINITIONS.set(len(snap.registry)))

    @app.before_request
    def _reload() -> None:
        hooks.reloader.maybe_reload()

    @app.post("/mutate")
    def mutate() -> Response:
        return _admit("mutate", _mutate)

    @app.post("/validate")
    def validate() -> Response:
        return _admit("validate", lambda req, snap: _validate(hooks, req, snap))

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

    return app


def _text(code: int, text: str) -> Response:
    return Response(text + "\n", code, mimetype="text/plain")


#: A webhook's handler: the answer, its outcome (a metric label) and its patch's length.
_Handler = Callable[[admission.Request, Snapshot], tuple[admission.Response, str, int]]


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


def _admit(webhook: str, handle: _Handler) -> Response:
    start = time.perf_counter()
    _drain_oversized()
    body = request.get_data(cache=False)  # 413 past MAX_CONTENT_LENGTH; any content type
    try:
        req = admission.decode(body)
    except admission.BadReview as e:
        metrics.REQUESTS.labels(webhook, "", "", "bad_request").inc()
        metrics.DURATION.labels(webhook).observe(time.perf_counter() - start)
        admission_log.warning(
            "bad admission request",
            extra={"fields": {"webhook": webhook, "outcome": "bad_request", "reason": str(e)}},
        )
        return _text(400, str(e))
    snap = state_of().snapshot  # once per request: one consistent registry and policy
    gvk = handlers.object_gvk(req)
    kind = _kind_label(snap, gvk)
    try:
        resp, outcome, ops = handle(req, snap)
    except Exception as e:
        # Never a 5xx. A workload we could not handle is allowed unchanged (failing it would
        # block workloads on our bug); a Karta we could not check is denied, as the validating
        # webhook's failurePolicy: Fail intends — a definition nobody checked must not slip in.
        admission_log.exception(
            "handler failed", extra={"fields": {"webhook": webhook, "uid": req.uid}}
        )
        failure = f"karta-webhook: {webhook} failed: {type(e).__name__}: {e}"
        if webhook == "validate":
            resp = admission.Response(
                uid=req.uid, allowed=False, code=500, reason="InternalError", message=failure
            )
        else:
            resp = admission.Response(uid=req.uid, warnings=[failure])
        outcome, ops = "error", 0
    out = admission.encode(resp)
    elapsed = time.perf_counter() - start
    metrics.REQUESTS.labels(webhook, kind, req.operation, outcome).inc()
    metrics.DURATION.labels(webhook).observe(elapsed)
    if ops:
        metrics.PATCH_OPS.labels(kind).inc(ops)
    admission_log.info(
        "admission",
        extra={
            "fields": {
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
                "warnings": len(resp.warnings),
                "ms": round(elapsed * 1000, 3),
            }
        },
    )
    return Response(out, 200, mimetype="application/json")


def state_of() -> State:
    from flask import current_app

    return current_app.extensions["karta"].state


def _meta_name(obj: Any) -> str:
    meta = obj.get("metadata") if isinstance(obj, Mapping) else None
    if not isinstance(meta, Mapping):
        return ""
    return str(meta.get("name") or meta.get("generateName") or "")


def _is_karta(gvk: GVK | None) -> bool:
    return gvk is not None and is_karta(gvk)


def _kind_label(snap: Snapshot, gvk: GVK | None) -> str:
    """A bounded ``kind`` label: Kinds with a definition, Karta, else ``other``."""
    if gvk is None:
        return ""
    if _is_karta(gvk) or snap.registry.lookup(gvk) is not None:
        return gvk.kind
    return "other"


def _mutate(req: admission.Request, snap: Snapshot) -> tuple[admission.Response, str, int]:
    result = handlers.mutate(req, snap.registry, snap.policy)
    return result.response, result.outcome, result.ops


def _validate(
    hooks: _Webhooks, req: admission.Request, snap: Snapshot
) -> tuple[admission.Response, str, int]:
    resp = admission.Response(uid=req.uid)
    gvk = handlers.object_gvk(req)
    judged = (
        req.operation in ("CREATE", "UPDATE")
        and _is_karta(gvk)
        and gvk is not None
        and gvk.version == KARTA_VERSION
    )
    if not judged or _unchanged_or_leaving(req):
        return resp, "skipped", 0
    if not isinstance(req.object, Mapping):
        resp.allowed = False
        resp.code, resp.reason = 400, "BadRequest"
        resp.message = "request.object is not a Karta object"
        return resp, "denied", 0

    from webhook import kube, validation  # lazily: /mutate must not pay for them

    samples = hooks.samples()
    root = definitions.root_gvk(req.object)
    found = samples.for_gvk(root) if samples is not None and root is not None else []
    name = req.name or _meta_name(req.object)
    report = validation.check(
        req.object, found, source=f'Karta "{name}"', timeout=hooks.validate_timeout
    )
    resp.warnings.extend(f"karta-webhook: {w}" for w in report.warnings)
    conflict = kube.conflict(req.object)  # one Karta per root group/version/kind in the cluster
    if report.ok and not report.errors and conflict is None:
        return resp, "allowed", 0
    resp.allowed = False
    resp.code, resp.reason = 422, "Invalid"
    details = "; ".join([*(str(e) for e in report.errors), *([conflict] if conflict else [])])
    resp.message = f'Karta "{name}" is invalid: {details or "invalid definition"}'
    return resp, "denied", 0


def _unchanged_or_leaving(req: admission.Request) -> bool:
    """UPDATEs that must not be judged by today's rules: a Karta being deleted (removing its
    finalizers must never be blocked), a subresource, or one whose ``spec`` did not change
    (labels, annotations, status). Otherwise a definition admitted by an older release or
    before its samples changed could never be touched again."""
    if req.operation != "UPDATE":
        return False
    if req.sub_resource:
        return True
    obj, old = req.object, req.old_object
    if not isinstance(obj, Mapping) or not isinstance(old, Mapping):
        return False
    meta = obj.get("metadata")
    if isinstance(meta, Mapping) and meta.get("deletionTimestamp"):
        return True
    return "spec" in old and obj.get("spec") == old.get("spec")


# --------------------------------------------------------------------------------- TLS


class CertReloader:
    """A server TLS context (TLS >= 1.2) rebuilt when the certificate or key file changes.

    :meth:`context` is gunicorn's ``ssl_context`` hook (its gthread worker calls it for every
    new connection); the context's ``sni_callback`` swaps in the newest context too, so a server
    that built its context once still hands new connections the new certificate. A pair that
    does not load (the key written, the certificate not yet, or garbage) is retried on the next
    connection while the last good context stays in use.
    """

    def __init__(self, certfile: str | Path, keyfile: str | Path) -> None:
        self.certfile = str(certfile)
        self.keyfile = str(keyfile)
        self._lock = threading.Lock()
        self._stamp: tuple[Any, ...] | None = None
        self._failed: tuple[Any, ...] | None = None
        self._ctx: ssl.SSLContext | None = None
        self.context()  # fail now, not on the first connection, if the files are unusable

    def _stamps(self) -> tuple[Any, ...]:
        out = []
        for p in (self.certfile, self.keyfile):
            try:
                st = os.stat(p)
                out.append((st.st_mtime_ns, st.st_size, st.st_ino))
            except OSError:
                out.append(None)
        return tuple(out)

    def _build(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(self.certfile, self.keyfile)
        ctx.set_alpn_protocols(["http/1.1"])
        ctx.sni_callback = self._sni
        return ctx

    def context(self) -> ssl.SSLContext:
        stamp = self._stamps()
        ctx = self._ctx
        if ctx is not None and (stamp == self._stamp or stamp == self._failed):
            return ctx
        with self._lock:
            if self._ctx is not None and stamp in (self._stamp, self._failed):
                return self._ctx
            try:
                new = self._build()
            except (OSError, ssl.SSLError, ValueError) as e:
                if self._ctx is None:
                    raise
                if stamp != self._failed:
                    log.error(
                        "new TLS certificate not loaded; serving the previous one",
                        extra={"fields": {"cert": self.certfile, "error": str(e)}},
                    )
                self._failed = stamp
                return self._ctx
            if self._ctx is not None:
                log.info("TLS certificate reloaded", extra={"fields": {"cert": self.certfile}})
            self._ctx, self._stamp, self._failed = new, stamp, None
            return new

    def _sni(self, sock: ssl.SSLObject | ssl.SSLSocket, server_name: str | None, _ctx: Any) -> None:
        new = self.context()
        if sock.context is not new:
            sock.context = new


# --------------------------------------------------------------------------------- wiring


def dev_certificate(certs_dir: Path, port: int) -> tuple[Path, Path]:
    """The certificate and key for serving without ``--tls-cert``: a development CA and a
    certificate for localhost, made or reused in ``certs_dir`` (see
    :func:`~webhook.certs.ensure_dev_certs`). Logs which CA to trust and how to try it."""
    from webhook.certs import ensure_dev_certs

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


def cluster_start(kubeconfig: str | None, certfile: Path) -> WorkerStart:
    """The per-worker start of the cluster sync and webhook keeper (:func:`webhook.kube.start`).

    The ``ca.crt`` beside the serving certificate, when there is one (the mounted Secret, or
    ``karta-webhook certs`` output), is what the keeper publishes as ``caBundle``.
    """
    from webhook import kube
    from webhook.certs import CA_CERT_FILE

    ca_file = Path(certfile).parent / CA_CERT_FILE
    return functools.partial(
        kube.start, kubeconfig=kubeconfig, ca_file=ca_file if ca_file.is_file() else None
    )


# --------------------------------------------------------------------------------- gunicorn

try:  # newer gthread workers (27.x) park connections without data in their poller (_DEFER)
    from gunicorn import http as _ghttp
    from gunicorn import sock as _gsock
    from gunicorn.workers import gthread as _gthread

    _DEFER = getattr(_gthread, "_DEFER", None)
    _BaseThreadWorker: Any = _gthread.ThreadWorker
except ImportError:  # pragma: no cover - gunicorn is a dependency
    _gthread = None
    _DEFER = None
    _BaseThreadWorker = object

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


def _worker_class() -> str:
    return "webhook.server.ThreadWorker" if _DEFER is not None else "gthread"


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
    validate_timeout: float = 2.0,
    keepalive: int = 30,
    graceful_timeout: int = 20,
    worker_start: Sequence[WorkerStart] = (),
) -> int:
    """Serve ``create_app(state)`` with gunicorn until a signal stops it.

    ``state`` is loaded here, in the master, before the workers fork (so a bad catalog or policy
    fails before serving). Each worker then runs, in order: warm the jq sandbox, start the file
    reload thread, and every callable of ``worker_start`` with the worker's ``State`` (e.g. a
    cluster watch calling ``state.set_cluster(...)``: threads do not survive ``fork``, so
    per-process work belongs there).
    """
    from gunicorn.app.base import BaseApplication

    try:  # unusable files fail here, before forking, as an input error (exit 2)
        cert = CertReloader(certfile, keyfile)
    except (OSError, ValueError) as e:
        why = (e.strerror if isinstance(e, OSError) else None) or e
        raise CertError(
            f"cannot load TLS certificate {certfile} with key {keyfile}: {why}"
        ) from None
    app = create_app(state, samples=samples, validate_timeout=validate_timeout)
    hooks: _Webhooks = app.extensions["karta"]
    # The master never serves: drop the gauge it just set, or its stale value would outlive
    # the workers' reloads ("livemax" counts every live process).
    metrics.mark_process_dead(os.getpid())
    bind = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"

    def ssl_context(conf: Any, default_factory: Any) -> ssl.SSLContext:
        return cert.context()

    def post_fork(server: Any, worker: Any) -> None:
        from webhook import jqexpr

        try:
            jqexpr.warm()
        except Exception:
            log.exception("warming the jq sandbox failed")
        metrics.DEFINITIONS.set(len(state.snapshot.registry))
        hooks.reloader.start()
        for start in worker_start:
            try:
                start(state)
            except Exception:  # logged; /readyz tells whether what it should do got done
                log.exception("worker start hook failed", extra={"fields": {"hook": repr(start)}})

    def child_exit(server: Any, worker: Any) -> None:
        metrics.mark_process_dead(worker.pid)

    def when_ready(server: Any) -> None:
        log.info(
            "serving",
            extra={
                "fields": {
                    "bind": bind,
                    "workers": workers,
                    "threads": threads,
                    "definitions": len(state.snapshot.registry),
                    "cert": str(certfile),
                }
            },
        )

    options: dict[str, Any] = {
        "bind": [bind],
        "workers": max(1, workers),
        "worker_class": _worker_class(),
        "threads": max(1, threads),
        "keepalive": keepalive,
        "timeout": 30,
        "graceful_timeout": graceful_timeout,
        "certfile": str(certfile),
        "keyfile": str(keyfile),
        "ssl_context": ssl_context,
        "preload_app": True,
        "post_fork": post_fork,
        "child_exit": child_exit,
        "when_ready": when_ready,
        "accesslog": None,
        "errorlog": "-",
        "loglevel": "info",
        "proc_name": "karta-webhook",
        # Headers only; bodies are capped by the app (MAX_BODY). Generous for long tokens.
        "limit_request_line": 8190,
        "limit_request_field_size": 16380,
        # gunicorn >= 24 opens a control socket in ~/.gunicorn by default; one server per
        # machine could own it, and the webhook has no use for it.
        "control_socket_disable": True,
    }
    if os.path.isdir("/dev/shm"):
        options["worker_tmp_dir"] = "/dev/shm"

    class _Server(BaseApplication):  # type: ignore[misc]
        def load_config(self) -> None:
            for key, value in options.items():
                if key in self.cfg.settings:  # settings differ between gunicorn versions
                    self.cfg.set(key, value)

        def load(self) -> Flask:
            return app

    _Server().run()
    return 0
