"""The Pod webhook of the native gang (``POST /gang``): a pod joins its group at creation.

Only pods the workload's own mutation labelled reach it (the webhook's ``objectSelector`` on
:data:`~webhook.workload.gang.GANG_LABEL`, which a rule with ``gang`` stamps into the pod
templates). For such a pod on CREATE: walk its controller owners up (``owners``, the cluster
side's reader: cached by UID, bounded, a deadline on every call) to the topmost one whose kind
has a definition, find the pod's group there (:func:`webhook.workload.gang.pod_group`) and add
``spec.schedulingGroup.podGroupName``. Never changed: a pod that already has a group (an
operator or a Job that manages its own), a pod for another scheduler (KAI gangs on its own).
Trouble reading the owners follows the policy's ``failureMode``: ``open`` admits the pod
without a group (a warning says so; it schedules alone), ``closed`` denies it, so that its
controller creates it again later.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any, Protocol

from webhook.admission.handlers import Result
from webhook.admission.registry import Registry
from webhook.admission.review import Request, Response
from webhook.base.errors import KartaError
from webhook.base.gvk import GVK
from webhook.base.limits import WEBHOOK_TIMEOUT_SECONDS
from webhook.jq.engine import Engine
from webhook.karta.model import Karta
from webhook.mutation.policy import Policy
from webhook.workload.gang import DEFAULT_SCHEDULER, GANG_LABEL, MODES, pod_group
from webhook.workload.locator import resolve
from webhook.workload.model import Workload

#: owner references followed from a pod (a JobSet's pod: Job, JobSet)
MAX_OWNER_DEPTH = 8
#: what the whole owner walk may take: well within the API server's call of the webhook
OWNER_BUDGET = WEBHOOK_TIMEOUT_SECONDS * 0.5


class OwnerError(KartaError):
    """An owner that could not be read (an API error, a deadline passed)."""


class Owners(Protocol):
    """Reads the object an owner reference names, in ``namespace``, by ``deadline`` (a
    ``time.monotonic()`` value): the object, or None when it is gone or another object (UID)
    holds its name. Raises :class:`OwnerError`."""

    def __call__(
        self, namespace: str, ref: Mapping[str, Any], deadline: float
    ) -> Mapping[str, Any] | None: ...


def _meta(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, Mapping) else {}


def _controller(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    refs = _meta(obj).get("ownerReferences")
    for ref in refs if isinstance(refs, list) else ():
        if isinstance(ref, Mapping) and ref.get("controller") is True:
            return ref
    return None


def top_workload(
    pod: Mapping[str, Any], namespace: str, registry: Registry, owners: Owners, deadline: float
) -> tuple[Karta, Mapping[str, Any]] | None:
    """The topmost controller owner of ``pod`` whose kind has a definition, with it; None
    when no owner has one."""
    found: tuple[Karta, Mapping[str, Any]] | None = None
    at: Mapping[str, Any] = pod
    seen: set[str] = set()
    for _ in range(MAX_OWNER_DEPTH):
        ref = _controller(at)
        if ref is None or str(ref.get("uid") or "") in seen:
            break
        seen.add(str(ref.get("uid") or ""))
        if time.monotonic() > deadline:
            raise OwnerError(f"owner walk past its {OWNER_BUDGET:.1f} s budget")
        obj = owners(namespace, ref, deadline)
        if obj is None:
            break
        karta = registry.lookup(GVK.of(obj))
        if karta is not None:
            found = (karta, obj)
        at = obj
    return found


#: workloads resolved, by (definition, UID, resourceVersion): a workload's pods arrive together
_RESOLVED: dict[tuple[int, str, str], tuple[Karta, Workload]] = {}
MAX_RESOLVED = 512


def _resolved(karta: Karta, obj: Mapping[str, Any], uid: str, engine: Engine) -> Workload:
    rv = str(_meta(obj).get("resourceVersion") or "")
    key = (id(karta), uid, rv)
    got = _RESOLVED.get(key) if uid and rv else None
    if got is not None and got[0] is karta:
        return got[1]
    w = resolve(karta, obj, engine)
    if uid and rv:
        if len(_RESOLVED) >= MAX_RESOLVED:
            _RESOLVED.clear()
        _RESOLVED[key] = (karta, w)
    return w


def mutate_pod(
    req: Request,
    registry: Registry,
    policy: Policy,
    engine: Engine,
    owners: Owners | None,
) -> Result:
    """The answer to a Pod CREATE at ``/gang``."""
    resp = Response(uid=req.uid)
    pod = req.object
    gvk = req.object_kind
    if (
        req.operation != "CREATE"
        or gvk is None
        or (gvk.group, gvk.kind) != ("", "Pod")
        or not isinstance(pod, Mapping)
        or not policy.gang
        or owners is None
    ):
        return Result(resp, "Pod", "skipped")
    labels = _meta(pod).get("labels")
    mode = labels.get(GANG_LABEL) if isinstance(labels, Mapping) else None
    spec = pod.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    if mode not in MODES or spec.get("schedulingGroup"):
        return Result(resp, "Pod", "unchanged")  # not ours to group, or grouped already
    if spec.get("schedulerName") not in (None, "", DEFAULT_SCHEDULER):
        return Result(resp, "Pod", "unchanged")  # another scheduler gangs on its own
    namespace = str(_meta(pod).get("namespace") or req.namespace or "")
    try:
        deadline = time.monotonic() + OWNER_BUDGET
        top = top_workload(pod, namespace, registry, owners, deadline)
        if top is None:
            return Result(resp, "Pod", "unchanged")
        karta, obj = top
        uid = str(_meta(obj).get("uid") or "")
        w = _resolved(karta, obj, uid, engine)
        group = pod_group(karta, w, obj, pod, uid, engine, str(mode))
    except Exception as e:  # an owner we could not read, a definition meeting an odd object
        return _not_grouped(resp, req, policy, f"{type(e).__name__}: {e}")
    if group is None:
        return Result(resp, "Pod", "unchanged")
    resp.patch = [
        {"op": "add", "path": "/spec/schedulingGroup", "value": {"podGroupName": group.name}}
    ]
    resp.audit["pod-group"] = group.name
    return Result(resp, "Pod", "patched", 1)


def _not_grouped(resp: Response, req: Request, policy: Policy, why: str) -> Result:
    name = str(_meta(req.object).get("name") or req.name or "")
    what = f"Pod {req.namespace}/{name}".rstrip("/")
    if policy.failure_mode == "closed":
        resp.allowed = False
        resp.code, resp.reason = 503, "ServiceUnavailable"
        resp.message = (
            f"karta-webhook: {what} denied: its gang could not be found ({why}); the "
            "policy's failureMode is closed"
        )
        return Result(resp, "Pod", "denied", failure="gang")
    resp.warnings.append(f"karta-webhook: {what} joins no gang ({why}); it is scheduled alone")
    resp.audit["mutation-failure"] = "gang"
    return Result(resp, "Pod", "error", failure="gang")
