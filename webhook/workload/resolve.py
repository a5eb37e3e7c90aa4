"""Resolve a definition against one object: components → instances → pod-template locations.

This is where a Karta definition meets a real workload. Every jq expression of the definition
that the caller needs (:data:`webhook.karta.fields.COMPONENT_FIELDS` says which: a mutation needs
fewer than a describe) is evaluated in one :meth:`webhook.jq.engine.Engine.evaluate` batch, so the
object reaches libjq at most once. The result is plain data: where each instance's injectable
pod fields live (:data:`webhook.karta.fields.INJECTABLES`; as locations, never as copies of the
template), how many replicas and GPUs it has, and the workload's status category.

Rules (docs/runtime.md, "Locations, not rewrites"):

* a template, pod spec or metadata location whose value is null or absent is skipped — a
  PyTorchJob without a Master has no master instance, it does not get one;
* a path that iterates over an absent list or map has no locations (not an error);
* fragmented fields are written only where their parent object exists — except the root
  component's: the root is the object itself, always there, so its fragment locations that are
  plain keys (``.spec.components.podLabels`` of a Milvus) are created with their missing parent
  objects (a Milvus with no ``spec.components`` gets one).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from webhook.base.gvk import GVK
from webhook.base.reader import type_name
from webhook.jq.engine import Engine, Outcome, Path_
from webhook.jq.paths import follow
from webhook.karta.carry import declined
from webhook.karta.fields import FRAGMENTED, POD_SPEC, TEMPLATE, Need, Role
from webhook.karta.locations import as_count
from webhook.karta.model import Component, Karta
from webhook.karta.statusmodel import UNDEFINED
from webhook.workload import phase as status
from webhook.workload.batch import Batch, requests_for, shared_fields, write_locations
from webhook.workload.model import ComponentView, Instance, Slot, Workload
from webhook.workload.slots import (
    Row,
    fragment_rows,
    pod_spec_rows,
    template_rows,
    template_slots,
)


def resolve(
    karta: Karta,
    obj: Mapping[str, Any],
    engine: Engine,
    *,
    full: bool = True,
    evaluated: list[Outcome] | None = None,
) -> Workload:
    """The workload tree of ``obj`` under ``karta``.

    With ``full=False`` only what mutation needs is evaluated (locations and instance ids),
    which keeps the hot path to the definition's write paths. ``evaluated``, with
    ``full=False``, are the outcomes of :func:`~webhook.workload.batch.mutation_requests` on
    ``obj`` when the caller has them already (nothing is evaluated twice).
    """
    need = Need.DESCRIBE if full else Need.MUTATE
    requests = requests_for(karta, need, full)
    if evaluated is None or full:
        evaluated = engine.evaluate(requests.prepared, obj)
    batch = Batch(requests, engine, obj, evaluated)
    root_status = karta.root.status

    warnings: list[str] = []
    components = tuple(
        _component(c, obj, batch, full, warnings, c is karta.root) for c in karta.components
    )
    category = UNDEFINED
    if full and root_status:
        category = status.category(
            root_status,
            batch.get(karta.root.expr(Role.PHASE), "values"),
            batch.get(karta.root.expr(Role.CONDITIONS), "values"),
            lambda e: batch.get(e, "values"),
            warnings,
        )
    gvk, name, namespace = identity(karta, obj)
    return Workload(
        gvk=gvk,
        name=name,
        namespace=namespace,
        definition=karta.name,
        components=components,
        status=category,
        warnings=tuple(warnings),
        failures=tuple(batch.failures),
        declined=declined(karta),
    )


def identity(karta: Karta, obj: Mapping[str, Any]) -> tuple[GVK, str, str]:
    """The workload's kind (the definition's when the object names none), name (or
    ``generateName``) and namespace."""
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    gvk = GVK.of(obj) or (karta.gvk or GVK("", "", ""))
    name = str(meta.get("name") or meta.get("generateName") or "")
    return gvk, name, str(meta.get("namespace") or "")


def _component(
    c: Component,
    obj: Mapping[str, Any],
    batch: Batch,
    full: bool,
    warnings: list[str],
    root: bool,
) -> ComponentView:
    if not full:
        if c.pattern == TEMPLATE:
            return _template_view(c, batch, warnings)
        if (known := _by_parent(c, obj, root)) is not None:
            return known
    rows: list[Row] = []
    if c.pattern == TEMPLATE:
        rows = template_rows(c, batch, full, warnings)
    elif c.pattern == POD_SPEC:
        rows = pod_spec_rows(c, obj, batch, full, warnings)
    elif c.pattern == FRAGMENTED:
        rows = fragment_rows(c, obj, batch, warnings, root)

    n = len(rows)
    ids = instance_ids(c, [r.loc for r in rows], _ids(c, batch), warnings)
    if full:
        replicas, mins, maxs = (_scale_values(c, role, n, batch, warnings) for role in _SCALE)
    else:
        replicas = mins = maxs = [None] * n
    instances = tuple(
        Instance(
            id=ids[i],
            location=row.loc,
            replicas=r if (r := replicas[i]) is not None else 1,
            min_replicas=mins[i],
            max_replicas=maxs[i],
            gpus_per_pod=row.gpus,
            slots=row.slots,
        )
        for i, row in enumerate(rows)
        if row.present
    )
    return ComponentView(c.name, c.kind, c.owner_ref, instances)


def _template_view(c: Component, batch: Batch, warnings: list[str]) -> ComponentView:
    """A ``podTemplateSpecPath`` component as a mutation needs it: the rules of
    :func:`~webhook.workload.slots.template_rows` and :func:`instance_ids`, without replicas
    and GPUs."""
    found = write_locations(batch, c.expr(Role.POD_TEMPLATE_SPEC), c, TEMPLATE, warnings)
    ids = instance_ids(c, [loc for loc, _ in found], _ids(c, batch), warnings)
    instances = tuple(
        Instance(ids[i], loc, 1, slots=template_slots(loc, val))
        for i, (loc, val) in enumerate(found)
        if isinstance(val, dict)
    )
    return ComponentView(c.name, c.kind, c.owner_ref, instances)


def _by_parent(c: Component, obj: Mapping[str, Any], root: bool = False) -> ComponentView | None:
    """A component resolved without the general rules, when its write fields are object
    keys under one parent (``.spec.components.proxy.podLabels`` and its siblings: a Milvus
    component) and it has no ``instanceIdPath``, and that parent is reached through objects
    only. Resolution in full would give the same: absent or null, one location per field
    without a parent object, so no instance and no warning; an object, one instance whose
    fields all live in it. Anything else (a value in the way that is not an object) is left
    to resolution, which reports it: None. The root's fields are created where their parent
    is missing (see :func:`~webhook.karta.locations.creatable`), so for the root only an
    object is taken here. Mutation only; a describe resolves in full."""
    shared = shared_fields(c)
    if shared is None:
        return None
    ok, cur = follow(obj, shared.parent)
    if not ok:
        return None
    if cur is None and not root:
        return ComponentView(c.name, c.kind, c.owner_ref, ())
    if type(cur) is not dict:
        return None
    slots = {key: Slot(loc, shared.base, cur, at) for key, loc, at in shared.fields}
    instance = Instance(c.name, shared.fields[0][1], 1, slots=slots)
    return ComponentView(c.name, c.kind, c.owner_ref, (instance,))


def _ids(c: Component, batch: Batch) -> Outcome | None:
    """What the component's ``instanceIdPath`` gave, if it has one."""
    return batch.get(c.expr(Role.INSTANCE_ID), "values")


def instance_ids(
    c: Component, locs: list[Path_ | None], out: Outcome | None, warnings: list[str]
) -> list[str]:
    """Ids for the locations a component's definition found (instances or not): from
    ``instanceIdPath`` (``out``, what it gave) when it agrees with them in count; otherwise
    the key or index that tells them apart (never ``keys`` paired with ``.[]``: libjq
    iterates objects in insertion order, so the location is the truth)."""
    n = len(locs)
    if out is not None:
        ids = out.items
        if out.error:
            warnings.append(f"component {c.name!r}: instanceIdPath: {out.error}")
        elif len(ids) != n:
            if n:
                warnings.append(
                    f"component {c.name!r}: instanceIdPath gave {len(ids)} id(s) for {n} location(s); ids taken from the locations"
                )
        elif all(isinstance(i, str) and i for i in ids):
            return list(ids)
        else:
            bad = next(i for i in ids if not (isinstance(i, str) and i))
            what = '""' if bad == "" else type_name(bad)
            warnings.append(
                f"component {c.name!r}: instanceIdPath gave {what}, not a non-empty string; ids taken from the locations"
            )
    if n <= 1:
        return [c.name] * n
    return _ids_from_locations([loc or () for loc in locs])


def _ids_from_locations(locs: list[Path_]) -> list[str]:
    """Ids that tell ``locs`` apart: the key or index of the first step where they differ
    (``.spec.replicatedJobs[]`` → the job's index), or, when that step repeats (nested lists:
    two roles of group 0), every differing step joined with ``-``; positions as a last resort."""
    width = min(len(p) for p in locs)
    differing = [toks for d in range(width) if len(set(toks := [p[d] for p in locs])) > 1]
    for steps in (differing[:1], differing):
        ids = ["-".join(str(t) for t in toks) for toks in zip(*steps, strict=True)]
        if ids and len(set(ids)) == len(ids):
            return ids
    return [str(i) for i in range(len(locs))]


_SCALE = (Role.REPLICAS, Role.MIN_REPLICAS, Role.MAX_REPLICAS)


def _scale_values(
    c: Component, role: Role, n: int, batch: Batch, warnings: list[str]
) -> list[int | None]:
    out = batch.get(c.expr(role), "values")
    if out is None or n == 0:
        return [None] * n
    name = role.value
    if out.error:
        warnings.append(f"component {c.name!r}: {name}: {out.error}")
        return [None] * n
    vals = [as_count(v) if v is not None else None for v in out.items]
    bad = [v for v, conv in zip(out.items, vals, strict=True) if v is not None and conv is None]
    if bad:
        warnings.append(
            f"component {c.name!r}: {name} gave {json.dumps(bad[0])}, not a non-negative integer"
        )
    if len(vals) == n:
        return vals
    if len(vals) == 1:
        return vals * n  # one component-wide value
    if vals:
        warnings.append(
            f"component {c.name!r}: {name} gave {len(vals)} value(s) for {n} instance(s)"
        )
    return [None] * n
