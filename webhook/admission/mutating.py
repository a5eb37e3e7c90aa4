"""The mutating webhook's handlers: a workload's patch under its definition and the policy,
and the index labels a Karta object is stamped with.

A workload is never blocked because it could not be read: trouble becomes a warning on an
allowed, unchanged request, or a denial only under the policy's ``failureMode: closed``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.admission.registry import Registry
from webhook.admission.result import Result, object_name
from webhook.admission.review import Request, Response
from webhook.base import pointers
from webhook.base.gvk import GVK
from webhook.base.names import label_value_errors
from webhook.jq.engine import Engine
from webhook.karta import model as definitions
from webhook.karta.model import Karta, is_karta_kind
from webhook.mutation import stamp
from webhook.mutation.plan import Plan, plan
from webhook.mutation.podadmission import fit_pod
from webhook.mutation.policy import Policy
from webhook.mutation.policyindex import applicable
from webhook.mutation.policyobject import has_objects
from webhook.mutation.scope import Namespaces, Narrowed, contextual, narrow
from webhook.workload.instances import identity
from webhook.workload.locator import locator
from webhook.workload.model import Workload

INDEX_LABELS = ("run.ai/karta-group", "run.ai/karta-version", "run.ai/karta-kind")


def nothing_found(w: Workload, karta: Karta) -> list[str]:
    """A warning when the definition found no pod template at all on this object (it may not
    fit the object). Absent optional parts (a PyTorchJob without a Master, the Milvus
    components nobody listed) are no reason to warn: that is the definition working."""
    if any(view.instances for view in w.components):
        return []
    if not any(comp.patterns for comp in karta.components):
        return []  # a definition that writes nothing (NIMCache, TrainJob): nothing to find
    return [f"definition {karta.name!r} found no pod template on this object; nothing written"]


def mutate_with(
    karta: Karta,
    policy: Policy,
    obj: Mapping[str, Any],
    engine: Engine,
    operation: str = "CREATE",
    namespaces: Namespaces | None = None,
) -> Plan:
    """Plan the patch of one object under its definition, with every warning, for an
    admission of ``operation``. The object goes down once, to the definition's locator; what
    it finds is planned straight away when :func:`webhook.mutation.stamp.plan` can, else the
    workload is located from it. A bare Pod's plan is then fitted to what the API server does
    to Pods (:func:`webhook.mutation.podadmission.fit_pod`).

    A policy with label selectors or values from metadata is first decided for this object
    (:func:`webhook.mutation.scope.narrow`) with ``namespaces``, the namespaces known (None:
    none); what it could not decide joins the plan's failures. Only the rules that can apply
    to the object's kind, namespace and components are considered
    (:func:`webhook.mutation.policyindex.applicable`)."""
    policy = _applicable(karta, policy, obj)
    if not contextual(policy):
        return _plan(karta, policy, obj, engine, operation)
    return _plan_decided(karta, _narrowed(karta, policy, obj, namespaces), obj, engine, operation)


def _plan_decided(
    karta: Karta, decided: Narrowed, obj: Mapping[str, Any], engine: Engine, operation: str
) -> Plan:
    got = _plan(karta, decided.policy, obj, engine, operation)
    if decided.failures:
        got.warnings[:0] = decided.warnings
        got.failures[:0] = decided.failures
    return got


#: the policies' names whose rules match a kind in a namespace, by (policy, kind, namespace)
_APPLIED: dict[tuple[int, GVK, str], tuple[Policy, str]] = {}


def policies_applied(policy: Policy, gvk: GVK, namespace: str) -> str:
    """The names of the policies (a KartaPolicy's name, ``file`` for the policy file) with a
    rule that matches ``gvk`` in ``namespace`` (``policy`` already decided for the object's
    selectors), comma-separated in order: the audit annotation ``policies``. Kept per policy,
    kind and namespace."""
    key = (id(policy), gvk, namespace)
    got = _APPLIED.get(key)
    if got is not None and got[0] is policy:
        return got[1]
    names: dict[str, None] = {}
    for rule in policy.rules:
        if rule.match.workload(gvk, namespace):
            owner, slash, _ = rule.name.rpartition("/")
            names[owner if slash else "file"] = None
    value = ",".join(names)
    if len(_APPLIED) >= 4096:
        _APPLIED.clear()
    _APPLIED[key] = (policy, value)
    return value


def _plan(
    karta: Karta, policy: Policy, obj: Mapping[str, Any], engine: Engine, operation: str
) -> Plan:
    where = locator(karta)
    found = where.find(obj, engine)
    if not found.failed and type(obj) is dict and (lane := stamp.lane(karta)) is not None:
        fast = stamp.plan(karta, lane, policy, obj, found.items)
        if fast is not None:
            return fit_pod(obj, fast, operation)
    workload = where.locate(obj, engine, found)
    result = plan(workload, policy, obj)
    result.warnings[:0] = [*workload.warnings, *nothing_found(workload, karta)]
    return fit_pod(obj, result, operation)


def _narrowed(
    karta: Karta,
    policy: Policy,
    obj: Mapping[str, Any],
    namespaces: Namespaces | None,
    old: Any = None,
) -> Narrowed:
    meta = obj.get("metadata")
    namespace = meta.get("namespace") if isinstance(meta, Mapping) else None
    gvk = GVK.of(obj) or karta.gvk
    ns = namespace if isinstance(namespace, str) else ""
    return narrow(policy, obj, gvk, ns, namespaces, old if isinstance(old, Mapping) else None)


def _applicable(karta: Karta, policy: Policy, obj: Mapping[str, Any]) -> Policy:
    """The rules of ``policy`` that can apply to ``obj`` (the kind and namespace the planners
    match rules against: :func:`webhook.workload.instances.identity`'s)."""
    gvk, _, namespace = identity(karta, obj)
    return applicable(policy, gvk, namespace, karta)


def mutate_object(
    registry: Registry,
    policy: Policy,
    obj: Mapping[str, Any],
    engine: Engine,
    operation: str = "CREATE",
    namespaces: Namespaces | None = None,
) -> Plan | None:
    """Resolve and plan one object; None when its kind has no definition."""
    karta = registry.lookup(GVK.of(obj))
    if karta is None:
        return None
    return mutate_with(karta, policy, obj, engine, operation, namespaces)


def mutate(
    req: Request,
    registry: Registry,
    policy: Policy,
    engine: Engine,
    namespaces: Namespaces | None = None,
) -> Result:
    """The mutating webhook's answer to ``req``; ``namespaces`` are the namespaces known (their
    labels and annotations, for the policy's selectors and values)."""
    resp = Response(uid=req.uid)
    gvk = req.object_kind
    kind = gvk.kind if gvk else ""
    obj = req.object
    if req.operation not in ("CREATE", "UPDATE") or not (
        type(obj) is dict or isinstance(obj, Mapping)
    ):
        return Result(resp, kind, "skipped")
    if is_karta_kind(gvk):
        ops, warnings = stamp_index_labels(obj)
        resp.patch = ops or None
        resp.warnings.extend(f"karta-webhook: {w}" for w in warnings)
        return Result(resp, kind, "patched" if ops else "unchanged", len(ops))
    karta = registry.lookup(gvk)
    if karta is None or req.operation not in policy.operations:
        return Result(resp, kind, "skipped")
    if _being_deleted(obj):
        # An UPDATE of an object being deleted (a controller removing its finalizer) is left
        # alone: its pods are going, and a patch could only stand in the way of the delete.
        return Result(resp, kind, "skipped")
    try:
        here = _applicable(karta, policy, obj)
        old = req.old_object if req.operation == "UPDATE" else None
        decided = _narrowed(karta, here, obj, namespaces, old) if contextual(here) else None
        if decided is None:
            m = _plan(karta, here, obj, engine, req.operation)
        else:
            m = _plan_decided(karta, decided, obj, engine, req.operation)
    except Exception as e:  # a definition meeting an object it cannot read
        why = f"{type(e).__name__}: {e}"
        return _not_mutated(resp, req, karta, policy, "error", why)
    if m.failures:
        reason, why = m.failures[0]
        more = f" (and {len(m.failures) - 1} more)" if len(m.failures) > 1 else ""
        if policy.failure_mode == "closed":
            return _not_mutated(resp, req, karta, policy, reason, why + more)
        resp.audit["mutation-failure"] = reason
    if m.warnings:
        resp.warnings.extend(f"karta-webhook: {w}" for w in m.warnings)
    resp.patch = m.ops or None
    resp.audit["mutated-templates"] = str(m.templates_mutated)
    if has_objects(policy):  # which policies: said once policy objects are in force
        namespace = req.namespace or ""
        applied = policies_applied(
            decided.policy if decided else here, gvk or GVK("", "", ""), namespace
        )
        if applied:
            resp.audit["policies"] = applied
    outcome = "patched" if m.ops else "unchanged"
    failure = m.failures[0][0] if m.failures else None
    return Result(resp, kind, outcome, len(m.ops), failure=failure)


def _being_deleted(obj: Mapping[str, Any]) -> bool:
    meta = obj.get("metadata")
    return isinstance(meta, Mapping) and bool(meta.get("deletionTimestamp"))


def _not_mutated(
    resp: Response, req: Request, karta: Karta, policy: Policy, reason: str, why: str
) -> Result:
    """A workload the policy could not be applied to: denied under ``failureMode: closed``,
    otherwise allowed unchanged with a warning that says why."""
    gvk = req.object_kind
    kind = gvk.kind if gvk else ""
    where = "/".join(p for p in (req.namespace, object_name(req)) if p)
    what = f"{kind} {where}".strip()
    if policy.failure_mode == "closed":
        resp.allowed = False
        resp.code, resp.reason = 403, "Forbidden"
        resp.message = (
            f"karta-webhook: {what} denied: the policy could not be applied under definition "
            f"{karta.name} ({why}); the policy's failureMode is closed"
        )
        return Result(resp, kind, "denied", failure=reason)
    resp.warnings.append(f"karta-webhook: {what} not mutated under definition {karta.name}: {why}")
    resp.audit["mutation-failure"] = reason
    return Result(resp, kind, "error", failure=reason)


def stamp_index_labels(karta_obj: Mapping[str, Any]) -> tuple[list[dict[str, Any]], list[str]]:
    """Ops that set ``run.ai/karta-{group,version,kind}`` from the root component's kind (KAI
    Scheduler finds definitions by them), and warnings. Other labels are kept; no root kind, no
    ops. A value the API server would reject as a label value (a group longer than 63
    characters) is not stamped, with a warning: the whole Karta would be refused otherwise."""
    gvk = definitions.root_gvk(karta_obj)
    if gvk is None:
        return [], []
    wanted: dict[str, str] = {}
    warnings = []
    for key, value in zip(INDEX_LABELS, (gvk.group, gvk.version, gvk.kind), strict=True):
        if label_value_errors(value):
            warnings.append(
                f"label {key} not set: {value!r} is not a valid label value (at most 63 "
                "characters); KAI Scheduler will not find this definition by its labels"
            )
        else:
            wanted[key] = value
    if not wanted:
        return [], warnings
    meta = karta_obj.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    if not isinstance(meta, Mapping):
        return [{"op": "add", "path": "/metadata", "value": {"labels": wanted}}], warnings
    if not isinstance(labels, Mapping):
        return [{"op": "add", "path": "/metadata/labels", "value": wanted}], warnings
    ops = [
        {"op": "add", "path": pointers.pointer(("metadata", "labels", k)), "value": v}
        for k, v in wanted.items()
        if labels.get(k) != v
    ]
    return ops, warnings
