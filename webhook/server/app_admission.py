"""The admission path over HTTP: :func:`admit` takes one AdmissionReview body through its
handler (decode, handle, encode, count, log; a handler that fails allows a workload and denies
a Karta), and :class:`AdmissionRoutes`, the WSGI middleware in front of Flask, answers
``POST /mutate`` and ``POST /validate`` with it, reading the body under its cap. The app
around them is :mod:`webhook.server.app`.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from typing import Any

from webhook.admission import handlers
from webhook.admission import review as admission
from webhook.admission.state import FileReloader, Snapshot, State
from webhook.base import waits
from webhook.base.gvk import GVK
from webhook.base.limits import DRAIN_LIMIT, MAX_BODY, SOURCES_WAIT
from webhook.karta.model import is_karta_kind
from webhook.server import logs, metrics

__all__ = ["AdmissionRoutes", "Handler", "admit"]


admission_log = logging.getLogger("karta_webhook.admission")

#: A webhook's handler: the answer, its outcome (a metric label) and its patch's length.
Handler = Callable[[admission.Request, Snapshot], handlers.Result]


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


def admit(state: State, webhook: str, handle: Handler, body: bytes) -> tuple[int, bytes]:
    """One admission request: decode, handle, encode, count and log. The HTTP status (200,
    or 400 for a body that is no AdmissionReview, with a one-line reason) and the body."""
    start, cpu = time.perf_counter(), time.thread_time()
    try:
        req = admission.decode(body)
    except admission.BadReview as e:
        metrics.count_admission(
            webhook, "", "", "bad_request", time.perf_counter() - start,
            cpu=time.thread_time() - cpu,
        )  # fmt: skip
        admission_log.warning(
            "bad admission request",
            extra={"fields": {"webhook": webhook, "outcome": "bad_request", "reason": str(e)}},
        )
        return 400, (str(e) + "\n").encode()
    gvk = req.object_kind
    waiting = []
    # the gang's Pod webhook too: before the policy is read a pod would miss its group for good
    if webhook in ("mutate", "gang") and not state.ready and not is_karta_kind(gvk):
        waiting = _sources_read(state)
    snap = state.snapshot  # once per request: one consistent registry and policy
    kind = _kind_label(snap, gvk)
    failure: str | None = None
    try:
        if waiting:
            result = handlers.Result(_not_ready(req, waiting), kind, "denied", failure="not_ready")
        else:
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
    # counted after the log line, so that the thread's CPU holds it too
    metrics.count_admission(
        webhook, kind, req.operation, outcome, elapsed, ops, failure, time.thread_time() - cpu
    )
    return 200, out


def _sources_read(state: State, wait: float = SOURCES_WAIT) -> list[str]:
    """Wait up to ``wait`` seconds for ``state`` to have read every source of policy (in
    this process: a worker that has just started); the sources still unread, if any."""
    waits.may_wait("the sources of policy, not read yet")  # on the poller: a request thread
    deadline = time.monotonic() + wait
    while not state.ready and time.monotonic() < deadline:
        time.sleep(0.02)
    return [] if state.ready else state.waiting_for() or ["definitions"]


def _not_ready(req: admission.Request, waiting: list[str]) -> admission.Response:
    """A workload that came before the policy: denied (503, so a client may retry), never
    admitted without the rules in force."""
    admission_log.warning(
        "mutation before the policy's sources were read: denied",
        extra={"fields": {"uid": req.uid, "waitingFor": waiting}},
    )
    message = (
        "karta-webhook: not ready: the policy's sources are not read yet in this server "
        f"process ({', '.join(waiting)}); try again"
    )
    return admission.Response(
        uid=req.uid, allowed=False, code=503, reason="ServiceUnavailable", message=message
    )


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
