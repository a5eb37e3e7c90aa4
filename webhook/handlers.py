"""Admission handlers: :class:`~webhook.admission.Request` in, :class:`~webhook.admission.Response` out.

The HTTP server and the CLI both call these; neither holds logic of its own. Handlers never
raise on bad objects: the mutating webhook must not block a workload because it could not read
it, so trouble becomes a warning on an allowed, unchanged request.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from webhook import definitions, jqexpr
from webhook.admission import Request, Response
from webhook.definitions import GVK
from webhook.mutation import Plan, plan
from webhook.policy import Policy
from webhook.registry import Registry
from webhook.workload import Workload, resolve

INDEX_LABELS = ("run.ai/karta-group", "run.ai/karta-version", "run.ai/karta-kind")


@dataclass(frozen=True)
class MutateResult:
    response: Response
    kind: str  # for logs and metrics: the object's Kind, or "" when unknown
    outcome: str  # "patched" | "unchanged" | "skipped" | "error"
    ops: int


def object_gvk(req: Request) -> GVK | None:
    obj = req.object
    gvk = GVK.of(obj) if isinstance(obj, Mapping) else None
    return gvk or req.kind


def mutate_object(
    registry: Registry, policy: Policy, obj: Mapping[str, Any]
) -> tuple[Workload | None, Plan | None]:
    """Resolve and plan one object; (None, None) when its kind has no definition."""
    karta = registry.lookup(GVK.of(obj))
    if karta is None:
        return None, None
    workload = resolve(karta, obj, full=False)
    return workload, plan(workload, policy, obj)


def nothing_found(w: Workload, karta: definitions.Karta) -> list[str]:
    """Warnings for components whose definition paths found no pod template on this object."""
    out = []
    for comp, view in zip(karta.components, w.components, strict=True):
        if comp.spec is not None and comp.spec.patterns() and not view.instances:
            out.append(f"component {comp.name!r}: no pod template found on this object")
    return out


def mutate(req: Request, registry: Registry, policy: Policy) -> MutateResult:
    resp = Response(uid=req.uid)
    gvk = object_gvk(req)
    kind = gvk.kind if gvk else ""
    if req.operation not in ("CREATE", "UPDATE") or not isinstance(req.object, Mapping):
        return MutateResult(resp, kind, "skipped", 0)
    if gvk is not None and gvk.group == definitions.GROUP and gvk.kind == definitions.KIND:
        ops = stamp_index_labels(req.object)
        resp.patch = ops or None
        return MutateResult(resp, kind, "patched" if ops else "unchanged", len(ops))
    karta = registry.lookup(gvk)
    if karta is None or req.operation not in policy.operations:
        return MutateResult(resp, kind, "skipped", 0)
    try:
        workload = resolve(karta, req.object, full=False)
        result = plan(workload, policy, req.object)
    except Exception as e:  # a definition meeting an object it cannot read must not block it
        resp.warnings.append(f"karta-webhook: {kind} not mutated: {type(e).__name__}: {e}")
        return MutateResult(resp, kind, "error", 0)
    resp.warnings.extend(
        f"karta-webhook: {w}"
        for w in (*workload.warnings, *nothing_found(workload, karta), *result.warnings)
    )
    resp.patch = result.ops or None
    resp.audit["mutated-templates"] = str(result.templates_mutated)
    return MutateResult(resp, kind, "patched" if result.ops else "unchanged", len(result.ops))


def stamp_index_labels(karta_obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Ops that set ``run.ai/karta-{group,version,kind}`` from the root component's kind (KAI
    Scheduler finds definitions by them). Other labels are kept; no root kind, no ops."""
    gvk = definitions.root_gvk(karta_obj)
    if gvk is None:
        return []
    values = [gvk.group, gvk.version, gvk.kind]
    wanted = dict(zip(INDEX_LABELS, values, strict=True))
    meta = karta_obj.get("metadata")
    labels = meta.get("labels") if isinstance(meta, Mapping) else None
    if not isinstance(meta, Mapping):
        return [{"op": "add", "path": "/metadata", "value": {"labels": wanted}}]
    if not isinstance(labels, Mapping):
        return [{"op": "add", "path": "/metadata/labels", "value": wanted}]
    return [
        {"op": "add", "path": jqexpr.pointer(("metadata", "labels", k)), "value": v}
        for k, v in wanted.items()
        if labels.get(k) != v
    ]
