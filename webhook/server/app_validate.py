"""The server's side of ``/validate``: a Karta is checked in one of the process's validation
slots (answered busy when none frees up in time, so Kartas never hold the threads ``/mutate``
needs), with what the cluster adds (its CRDs' schemas, live objects of the root kind).

The check itself is :func:`webhook.admission.handlers.validate`; the app that routes to this
is :func:`webhook.server.app.create_app`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from webhook.admission import handlers
from webhook.admission import review as admission
from webhook.admission.state import Snapshot, State
from webhook.base.limits import LIVE_SAMPLES_TIMEOUT, VALIDATE_BUDGET, WEBHOOK_TIMEOUT_SECONDS
from webhook.karta import model as definitions
from webhook.karta.model import is_karta_kind
from webhook.mutation.policyobject import is_policy_kind

if TYPE_CHECKING:
    from webhook.server.app import Webhooks

log = logging.getLogger("karta_webhook")


def validate(
    req: admission.Request, snap: Snapshot, state: State, hooks: Webhooks
) -> handlers.Result:
    """``/validate``: a policy object checked at once; a Karta checked in one of the
    process's validation slots, or answered busy when none frees up in time."""
    if is_policy_kind(req.object_kind):  # a policy object: checked at once, no samples
        return handlers.validate_policy(req, snap.policy)
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
