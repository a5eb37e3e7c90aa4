"""Admission handlers: :class:`~webhook.admission.review.Request` in, a result with its
:class:`~webhook.admission.review.Response` out.

The HTTP server and the CLI both call these and hold no admission logic of their own: which
requests are judged, which samples a definition is checked against, how a finding becomes a
denial. Handlers never raise on bad objects: the mutating webhook must not block a workload
because it could not read it, so trouble becomes a warning on an allowed, unchanged request.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from webhook.admission.registry import Registry
from webhook.admission.review import Request, Response
from webhook.base.errors import FieldError
from webhook.base.gvk import GVK
from webhook.base.limits import EVAL_TIMEOUT
from webhook.base.names import label_value_errors
from webhook.jq import engine as jqexpr
from webhook.jq.engine import Engine, Outcome, walked
from webhook.karta import model as definitions
from webhook.karta.model import Karta, is_karta_kind
from webhook.karta.samples import Sample, SampleIndex
from webhook.mutation import stamp
from webhook.mutation.plan import Plan, plan
from webhook.mutation.policy import Policy
from webhook.schema.builtin import builtin_schema
from webhook.schema.crds import SchemaIndex
from webhook.schema.nodes import Schema
from webhook.validation.check import Report, check
from webhook.workload.resolve import Workload, mutation_requests, resolve

INDEX_LABELS = ("run.ai/karta-group", "run.ai/karta-version", "run.ai/karta-kind")
_ROOT_KIND = "spec.structureDefinition.rootComponent.kind"
_ROOT_VERSION = _ROOT_KIND + ".version"


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


def mutate_with(karta: Karta, policy: Policy, obj: Mapping[str, Any], engine: Engine) -> Plan:
    """Plan the patch of one object under its definition, with every warning: from its
    outcomes straight away when :func:`webhook.mutation.stamp.plan` can, else by resolving the workload
    from the same outcomes."""
    if type(obj) is dict and (lane := stamp.lane(karta)) is not None:
        items = walked(lane.prepared, obj)  # paths walked as one batch: no Outcome made
        if items is not None:
            fast = stamp.plan(karta, lane, policy, obj, items)
            if fast is not None:
                return fast
            outcomes = list(map(Outcome, items))
        else:
            outcomes = engine.evaluate(lane.prepared, obj)
            if not any(out.error for out in outcomes):
                fast = stamp.plan(karta, lane, policy, obj, [out.items for out in outcomes])
                if fast is not None:
                    return fast
    else:
        outcomes = engine.evaluate(mutation_requests(karta).prepared, obj)
    workload = resolve(karta, obj, engine, full=False, evaluated=outcomes)
    result = plan(workload, policy, obj)
    result.warnings[:0] = [*workload.warnings, *nothing_found(workload, karta)]
    return result


def mutate_object(
    registry: Registry, policy: Policy, obj: Mapping[str, Any], engine: Engine
) -> Plan | None:
    """Resolve and plan one object; None when its kind has no definition."""
    karta = registry.lookup(GVK.of(obj))
    return mutate_with(karta, policy, obj, engine) if karta is not None else None


def mutate(req: Request, registry: Registry, policy: Policy, engine: Engine) -> Result:
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
        m = mutate_with(karta, policy, obj, engine)
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
        {"op": "add", "path": jqexpr.pointer(("metadata", "labels", k)), "value": v}
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
        [*samples.for_definition(req.object), *_of_kind(live_samples, gvk_root)],
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
                _ROOT_KIND,
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


@dataclass(frozen=True)
class SchemaLookup:
    """The schema a definition's root kind is judged by, and what to say about it."""

    schema: Schema | None = None
    notes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    errors: tuple[FieldError, ...] = ()


def schema_for(
    gvk: GVK | None, schemas: SchemaIndex | None, *, crd_required: bool = False
) -> SchemaLookup:
    """The root kind's schema: its CRD's among ``schemas``, else a built-in kind's, else none
    (see :func:`validate` for what is said then)."""
    if gvk is None or not gvk.version:
        return SchemaLookup()
    entry = schemas.get(gvk) if schemas is not None else None
    if entry is not None:
        return SchemaLookup(
            entry.schema, (f"schema: CustomResourceDefinition {entry.crd} ({entry.source})",)
        )
    builtin = builtin_schema(gvk)
    if builtin is not None:
        return SchemaLookup(
            builtin, (f"schema: the built-in {gvk} (from the kubernetes client's models)",)
        )
    served = schemas.versions(gvk.group, gvk.kind) if schemas is not None else []
    if served:
        crd = next(e.crd for e in (schemas or ()) if e.group == gvk.group and e.kind == gvk.kind)
        message = (
            f"CustomResourceDefinition {crd} does not serve version {gvk.version!r} of "
            f"{gvk.kind} (it serves {', '.join(served)}): the definition's paths were not "
            "checked against a schema"
        )
        if crd_required:
            return SchemaLookup(warnings=(message,))
        return SchemaLookup(errors=(FieldError(_ROOT_VERSION, message),))
    if crd_required:
        return SchemaLookup(
            warnings=(
                f"no CustomResourceDefinition for {gvk} is installed: the definition's paths "
                "were not checked against a schema, and no object of the kind exists to "
                "mutate until one is",
            )
        )
    if schemas:
        return SchemaLookup(
            notes=(
                f"no CustomResourceDefinition given serves {gvk}: paths not checked against a schema",
            )
        )
    return SchemaLookup()


def _of_kind(objs: Sequence[Sample], gvk: GVK | None) -> list[Sample]:
    """Live objects as samples; LIST items without ``apiVersion``/``kind`` get the root's."""
    out: list[Sample] = []
    for label, obj in objs:
        if gvk is not None and isinstance(obj, Mapping) and GVK.of(obj) is None:
            obj = {**obj, "apiVersion": gvk.api_version, "kind": gvk.kind}
        out.append((label, obj))
    return out


def _meta_name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    return str(meta.get("name", "")) if isinstance(meta, Mapping) else ""


def conflicting_karta(obj: Mapping[str, Any], existing: Sequence[Mapping[str, Any]]) -> str | None:
    """The error for a Karta whose root group/version/kind another Karta (by name) already
    defines, else None. A Karta never collides with itself (an update), and the same group and
    kind at another version is a different definition. Best effort, as upstream's: two creates
    racing can both pass; the cluster sync then keeps the older one and logs the other."""
    gvk = definitions.root_gvk(obj)
    if gvk is None:
        return None
    name = _meta_name(obj)
    for other in existing:
        other_name = _meta_name(other)
        if other_name != name and definitions.root_gvk(other) == gvk:
            return (
                f"a Karta for group {gvk.group!r} version {gvk.version!r} kind {gvk.kind!r} already "
                f"exists ({other_name!r}); only one Karta per group/version/kind is allowed"
            ).replace("'", '"')
    return None


class DefinitionVet:
    """``/validate``'s checks for a definition that comes from a file or the cluster, before
    it is used (one rulebook for every source), as a :data:`~webhook.karta.loading.Vet`:
    :func:`webhook.validation.check.check` against ``samples`` of its root kind and its root kind's
    schema (``schemas()``: the cluster's CRDs when known; else a built-in kind's), the
    problems at their fields. What only ``/validate`` judges is left out: the
    one-Karta-per-kind rule (a later source wins for a kind) and ``--require-samples``.

    ``engine`` evaluates; without one, an engine of its own is made on first use and kept
    until :meth:`close` (the server's state closes it after each load, so that no sandbox
    child outlives a load in the master it forks workers from). One engine per load, not per
    definition: starting a sandbox child per definition made a 32-definition load 3 times
    slower."""

    def __init__(
        self,
        samples: SampleIndex,
        schemas: Callable[[], SchemaIndex | None] = lambda: None,
        engine: Engine | None = None,
        *,
        timeout: float = EVAL_TIMEOUT,
    ) -> None:
        self.samples = samples
        self.schemas = schemas
        self.timeout = timeout
        self._given = engine
        self._own: Engine | None = None

    def __call__(self, doc: Any, source: str) -> list[FieldError]:
        crds = self.schemas()
        found = schema_for(definitions.root_gvk(doc), crds, crd_required=crds is not None)
        engine = self._given
        if engine is None:
            engine = self._own = self._own or Engine()
        report = check(
            doc,
            self.samples.for_definition(doc),
            engine,
            source=source,
            timeout=self.timeout,
            schema=found.schema,
        )
        return [*found.errors, *report.errors]

    def close(self) -> None:
        """Stop the engine of its own, if one was made (a later call makes a new one)."""
        own, self._own = self._own, None
        if own is not None:
            own.close()


def definition_vet(
    samples: SampleIndex,
    schemas: Callable[[], SchemaIndex | None] = lambda: None,
    engine: Engine | None = None,
    *,
    timeout: float = EVAL_TIMEOUT,
) -> DefinitionVet:
    """A :class:`DefinitionVet` (the checks of ``/validate`` before a definition is used)."""
    return DefinitionVet(samples, schemas, engine, timeout=timeout)
