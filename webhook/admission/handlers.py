"""Admission handlers: :class:`~webhook.admission.review.Request` in, a result with its
:class:`~webhook.admission.review.Response` out.

The HTTP server and the CLI both call these and hold no admission logic of their own: which
requests are judged, which samples a definition is checked against, how a finding becomes a
denial. Handlers never raise on bad objects: the mutating webhook must not block a workload
because it could not read it, so trouble becomes a warning on an allowed, unchanged request.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from webhook.admission.registry import Registry
from webhook.admission.review import Request, Response
from webhook.admission.rulebook import ROOT_KIND, conflicting_karta, of_kind, schema_for
from webhook.base import pointers
from webhook.base.errors import FieldError
from webhook.base.gvk import GVK
from webhook.base.limits import EVAL_TIMEOUT
from webhook.base.names import label_value_errors
from webhook.jq.engine import Engine
from webhook.karta import model as definitions
from webhook.karta.model import Karta, is_karta_kind
from webhook.karta.samples import Sample, SampleIndex
from webhook.mutation import stamp
from webhook.mutation.plan import Plan, plan
from webhook.mutation.podadmission import fit_pod
from webhook.mutation.policy import Policy
from webhook.mutation.policyfile import PolicyError
from webhook.mutation.policyindex import applicable
from webhook.mutation.policyobject import (
    NAMESPACED_KIND,
    cluster_conflicts,
    cluster_part,
    has_objects,
    is_policy_kind,
    object_namespace,
    parse_namespace_policy_object,
    parse_policy_object,
)
from webhook.mutation.scope import Namespaces, Narrowed, contextual, narrow
from webhook.schema.crds import SchemaIndex
from webhook.validation.check import Report, check
from webhook.workload.instances import identity
from webhook.workload.locator import locator
from webhook.workload.model import Workload

INDEX_LABELS = ("run.ai/karta-group", "run.ai/karta-version", "run.ai/karta-kind")


@dataclass(slots=True)
class Result:
    """What a handler answered, and what the server counts and logs about it (not to be
    changed once made; not frozen, as :class:`webhook.mutation.plan.Plan`)."""

    response: Response
    kind: str  # the object's Kind, or "" when unknown
    outcome: str  # "patched" | "unchanged" | "skipped" | "error" | "allowed" | "denied"
    ops: int = 0
    report: Report | None = None  # /validate: the check's report, when one ran
    #: /mutate: why the policy could not be applied in full (a bounded metric label), if so
    failure: str | None = None


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
    where = "/".join(p for p in (req.namespace, _name(req)) if p)
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


# --------------------------------------------------------------------------- validate


def _name(req: Request) -> str:
    meta = req.object.get("metadata") if isinstance(req.object, Mapping) else None
    return req.name or (str(meta.get("name") or "") if isinstance(meta, Mapping) else "")


def unchanged_or_leaving(req: Request) -> bool:
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


def validate_policy(req: Request, policy: Policy | None = None) -> Result:
    """Judge a KartaPolicy or a KartaNamespacePolicy on CREATE and on an UPDATE that changes
    its spec: denied (422, every error at its field path, the policy file's messages) when the
    server could not use it, or when a namespaced one sets a key that a rule of the cluster's
    policies (``policy``, the one in force: the file's and the KartaPolicies') sets."""
    resp = Response(uid=req.uid)
    gvk = req.object_kind
    kind = gvk.kind if gvk else ""
    if req.operation not in ("CREATE", "UPDATE") or not is_policy_kind(gvk):
        return Result(resp, kind, "skipped")
    if unchanged_or_leaving(req):
        return Result(resp, kind, "skipped")
    namespaced = gvk is not None and gvk.kind == NAMESPACED_KIND
    name = _name(req)
    errors: list[FieldError] = []
    try:
        if namespaced:
            namespace = object_namespace(req.object) or req.namespace
            obj = req.object
            if not object_namespace(obj) and namespace:  # the request says it on CREATE
                obj = {**obj, "metadata": {**obj.get("metadata", {}), "namespace": namespace}}
            team = parse_namespace_policy_object(obj)
            if policy is not None:
                errors = cluster_conflicts(team, cluster_part(policy), namespace)
            name = f"{namespace}/{name}"
        else:
            parse_policy_object(req.object)
    except PolicyError as e:
        errors = e.errors
    if errors:
        resp.allowed = False
        resp.code, resp.reason = 422, "Invalid"
        what = NAMESPACED_KIND if namespaced else "KartaPolicy"
        resp.message = f'{what} "{name}" is invalid: ' + "; ".join(map(str, errors))
        return Result(resp, kind, "denied")
    return Result(resp, kind, "allowed")


def validate(
    req: Request,
    samples: SampleIndex,
    conflicts: Sequence[Mapping[str, Any]],
    engine: Engine,
    *,
    timeout: float = EVAL_TIMEOUT,
    budget: float | None = None,
    require_samples: bool = False,
    source: str | None = None,
    schemas: SchemaIndex | None = None,
    live_samples: Sequence[Sample] = (),
    crd_required: bool = False,
) -> Result:
    """Judge a Karta on CREATE and on an UPDATE that changes its spec: the check against the
    samples of its root kind, plus one Karta per root group/version/kind among ``conflicts``
    (the other Kartas the cluster has), within ``budget`` seconds in all (``timeout`` for each
    evaluation). Anything else is ``skipped`` (allowed); with
    ``require_samples`` a definition no real sample was checked against is denied. ``source``
    names the definition in the report (default: ``Karta "<name>"``).

    ``schemas`` are the CRD schemas known (``--crd`` files, or the cluster's CRDs; None: none);
    the root kind's, or a built-in kind's, is what the paths are judged against and samples
    defaulted from (and one synthesised from when no sample exists). ``live_samples`` are
    objects of the root kind read from the cluster, checked like the bundled samples (an
    object without ``apiVersion``/``kind``, as LIST items come, is taken as of the root kind).
    With ``crd_required`` (in a cluster), a root kind that no CRD serves and that is not
    built in is admitted with a warning saying so; without it (offline), a CRD given for the
    group and kind that does not serve the version is an error at the root kind's version."""
    resp = Response(uid=req.uid)
    gvk = req.object_kind
    kind = gvk.kind if gvk else ""
    if req.operation not in ("CREATE", "UPDATE") or not is_karta_kind(gvk):
        return Result(resp, kind, "skipped")
    if unchanged_or_leaving(req):
        return Result(resp, kind, "skipped")
    if not isinstance(req.object, Mapping):
        resp.allowed = False
        resp.code, resp.reason = 400, "BadRequest"
        resp.message = "request.object is not a Karta object"
        return Result(resp, kind, "denied")
    name = _name(req)
    gvk_root = definitions.root_gvk(req.object)
    found = schema_for(gvk_root, schemas, crd_required=crd_required)
    report = check(
        req.object,
        [*samples.for_definition(req.object), *of_kind(live_samples, gvk_root)],
        engine,
        source=source or f'Karta "{name}"',
        timeout=timeout,
        budget=budget,
        schema=found.schema,
    )
    report = replace(
        report,
        warnings=[*found.warnings, *report.warnings],
        notes=[*found.notes, *report.notes],
    )
    extra: list[FieldError] = list(found.errors)
    if require_samples and report.samples == 0:
        where = ", ".join(samples.sources)
        extra.append(
            FieldError(
                ROOT_KIND,
                f"no sample of {report.gvk or 'this kind'} found under {where} (--require-samples)",
            )
        )
    conflict = conflicting_karta(req.object, conflicts)
    if conflict:
        extra.append(FieldError("", conflict))
    if extra:
        report = replace(report, errors=[*report.errors, *extra])
    resp.warnings.extend(f"karta-webhook: {w}" for w in report.warnings)
    if report.ok:
        return Result(resp, kind, "allowed", report=report)
    resp.allowed = False
    resp.code, resp.reason = 422, "Invalid"
    resp.message = report.denial(name)
    return Result(resp, kind, "denied", report=report)
