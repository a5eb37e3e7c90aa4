"""The validating webhook's handlers: a Karta checked against the samples of its root kind and
the cluster's other Kartas, a KartaPolicy or KartaNamespacePolicy checked for use.

Only CREATEs and UPDATEs that change the spec are judged (:func:`unchanged_or_leaving`); a
denial lists every error at its field path.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any

from webhook.admission.result import Result, object_name
from webhook.admission.review import Request, Response
from webhook.admission.rulebook import ROOT_KIND, conflicting_karta, of_kind, schema_for
from webhook.base.errors import FieldError
from webhook.base.limits import EVAL_TIMEOUT
from webhook.jq.engine import Engine
from webhook.karta import model as definitions
from webhook.karta.model import is_karta_kind
from webhook.karta.samples import Sample, SampleIndex
from webhook.mutation.policy import Policy
from webhook.mutation.policyfile import PolicyError
from webhook.mutation.policyobject import (
    NAMESPACED_KIND,
    cluster_conflicts,
    cluster_part,
    is_policy_kind,
    object_namespace,
    parse_namespace_policy_object,
    parse_policy_object,
)
from webhook.schema.crds import SchemaIndex
from webhook.validation.check import check


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
    name = object_name(req)
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
    name = object_name(req)
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
