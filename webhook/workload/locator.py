"""A definition compiled for finding where its objects keep their pods: the :class:`Locator`.

A locator is made once per definition and :class:`~webhook.karta.fields.Need` (:func:`locator`;
the mutation's at load, by :class:`webhook.admission.registry.Registry`). It holds every jq
expression as one prepared batch (:class:`~webhook.workload.batch.Requests`; which ones a need
takes, :data:`webhook.karta.fields.COMPONENT_FIELDS` says) and, per component, its spec pattern
and each field's place in that batch (:class:`Part`). Each request hands it the object once:

* :meth:`Locator.find` evaluates the batch, the object's one trip to :mod:`webhook.jq`
  (:mod:`webhook.mutation.stamp`, a mutation's fast lane, plans from what it found);
* :meth:`Locator.locate` builds the workload from that: where each instance's injectable pod
  fields live (:data:`webhook.karta.fields.INJECTABLES`; locations, never copies of the
  template), its id, replicas and GPUs, and the workload's status category.

Rules (docs/runtime.md, "Locations, not rewrites"):

* a null or absent template, pod spec or metadata location is skipped: a PyTorchJob without a
  Master gets no master instance;
* a path that iterates over an absent list or map has no locations (not an error);
* fragmented fields go where their parent object exists, or with missing holders inside the
  instance's own object (:func:`~webhook.workload.slots.fragment_rows`), never the instance
  itself. At the root (always there), plain-key locations get their missing parents too;
* ``nodeSelector`` and ``tolerations`` go to the pod spec a fragmented definition's paths imply
  (:mod:`webhook.karta.podspec`), beside its written pod-spec field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from webhook.jq.engine import Engine, walked
from webhook.karta.carry import declined
from webhook.karta.fields import FRAGMENTED, POD_SPEC, TEMPLATE, Need, Role
from webhook.karta.model import Component, Karta
from webhook.karta.statusmodel import UNDEFINED
from webhook.workload import phase as status
from webhook.workload.batch import (
    Batch,
    Found,
    Requests,
    Shared,
    requests_of,
    shared_fields,
    wanted,
    write_locations,
)
from webhook.workload.instances import SCALE, identity, instance_ids, scale_values
from webhook.workload.model import ComponentView, Instance, Slot, Workload
from webhook.workload.slots import (
    Places,
    Row,
    fragment_rows,
    implied_slots,
    pod_spec_rows,
    template_rows,
    template_slots,
)


class Part(NamedTuple):
    """One component as its locator resolves it: the place of each requested field's outcome
    in the batch and, when it is resolved by the parent object of its write fields alone (a
    mutation's Milvus component), that parent and the place of its value."""

    component: Component
    root: bool
    at: Places
    shared: Shared | None
    parent_at: int | None


@dataclass(frozen=True)
class Locator:
    """A definition compiled for resolution at one need (``full``: a describe's, else a
    mutation's). Made once per definition (:func:`locator`); immutable."""

    karta: Karta
    full: bool
    requests: Requests
    parts: tuple[Part, ...]
    #: policy fields the definition says its kind refuses
    declined: frozenset[str]

    def find(self, obj: Any, engine: Engine) -> Found:
        """Evaluate the batch on ``obj``: its paths walked together when they can be (no
        :class:`~webhook.jq.engine.Outcome` made), else each by the engine."""
        prepared = self.requests.prepared
        if type(obj) is dict and (items := walked(prepared, obj)) is not None:
            return Found(items, None, False)
        outs = engine.evaluate(prepared, obj)
        return Found([o.items for o in outs], outs, any(o.error for o in outs))

    def locate(
        self, obj: Mapping[str, Any], engine: Engine, found: Found | None = None
    ) -> Workload:
        """The workload tree of ``obj``, from ``found`` (what :meth:`find` gave on ``obj``)
        when the caller has it; the engine evaluates the deferred requests, if any are needed."""
        if found is None:
            found = self.find(obj, engine)
        batch = Batch(self.requests, engine, obj, found)
        full = self.full
        warnings: list[str] = []
        components = tuple(_component(p, obj, batch, full, warnings) for p in self.parts)
        karta = self.karta
        root_status = karta.root.status
        category = UNDEFINED
        if full and root_status:
            at = self.parts[0].at
            category = status.category(
                root_status,
                batch.at(at.get(Role.PHASE)),
                batch.at(at.get(Role.CONDITIONS)),
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
            declined=self.declined,
        )


def locator(karta: Karta, *, full: bool = False) -> Locator:
    """``karta``'s locator for a mutation, or with ``full`` for a describe (compiled on first
    use, then kept with the definition: definitions are immutable)."""
    return karta.root.derive(("locator", full), _compile, karta, full)


def _compile(karta: Karta, full: bool) -> Locator:
    need = Need.DESCRIBE if full else Need.MUTATE
    requests = requests_of(karta, need, full)
    place = requests.index
    parts = []
    for c in karta.components:
        root = c is karta.root
        at = {role: place[(expr, mode)] for role, expr, mode in wanted(c, need, root)}
        shared = None if full else shared_fields(c)
        parent_at = place[(shared.expression, "values")] if shared is not None else None
        parts.append(Part(c, root, at, shared, parent_at))
    return Locator(karta, full, requests, tuple(parts), declined(karta))


def resolve(karta: Karta, obj: Mapping[str, Any], engine: Engine, *, full: bool = True) -> Workload:
    """The workload tree of ``obj`` under ``karta``: in full (a describe), or with
    ``full=False`` only what a mutation needs (locations and instance ids)."""
    return locator(karta, full=full).locate(obj, engine)


def _component(
    part: Part, obj: Mapping[str, Any], batch: Batch, full: bool, warnings: list[str]
) -> ComponentView:
    c = part.component
    if not full:
        if c.pattern == TEMPLATE:
            return _template_view(c, part.at, batch, warnings)
        if part.shared is not None and (known := _by_parent(part, batch)) is not None:
            return known
    at = part.at
    rows: list[Row] = []
    if c.pattern == TEMPLATE:
        rows = template_rows(c, at, batch, full, warnings)
    elif c.pattern == POD_SPEC:
        rows = pod_spec_rows(c, at, obj, batch, full, warnings)
    elif c.pattern == FRAGMENTED:
        rows = fragment_rows(c, at, obj, batch, warnings, part.root)

    n = len(rows)
    ids = instance_ids(c, [r.loc for r in rows], batch.at(at.get(Role.INSTANCE_ID)), warnings)
    if full:
        replicas, mins, maxs = (
            scale_values(c, role, n, batch.at(at.get(role)), warnings) for role in SCALE
        )
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


def _template_view(c: Component, at: Places, batch: Batch, warnings: list[str]) -> ComponentView:
    """A ``podTemplateSpecPath`` component as a mutation needs it: the rules of
    :func:`~webhook.workload.slots.template_rows` and :func:`instance_ids`, without replicas
    and GPUs."""
    role = Role.POD_TEMPLATE_SPEC
    found = write_locations(batch, at.get(role), c, role, TEMPLATE, warnings)
    ids = instance_ids(c, [loc for loc, _ in found], batch.at(at.get(Role.INSTANCE_ID)), warnings)
    instances = tuple(
        Instance(ids[i], loc, 1, slots=template_slots(loc, val))
        for i, (loc, val) in enumerate(found)
        if isinstance(val, dict)
    )
    return ComponentView(c.name, c.kind, c.owner_ref, instances)


def _by_parent(part: Part, batch: Batch) -> ComponentView | None:
    """A component resolved without the general rules, when its write fields are object
    keys under one parent (``.spec.components.proxy.podLabels`` and its siblings, or all of
    them behind ``.spec.components.proxy // empty |``: a Milvus component; see
    :func:`~webhook.workload.batch.shared_fields`), and that parent (its value in the batch) is
    reached through objects only. Resolution in full would give the same: absent or null, one
    location per field without a parent object (or none: guarded), so no instance and no
    warning; an object, one instance whose fields all live in it, with the id its
    ``instanceIdPath`` gives (:attr:`Shared.id`). Anything else (a parent that is false or
    not an object, a value in the way that is not an object: the parent's evaluation failed)
    is left to resolution, which reports it: None.
    The root's fields are created where their parent is missing (see
    :func:`~webhook.karta.locations.creatable`), so for the root only an object is taken here.
    Mutation only; a describe resolves in full."""
    out = batch.at(part.parent_at)
    shared = part.shared
    if out is None or shared is None or out.error or len(out.items) != 1:
        return None
    c = part.component
    cur = out.items[0]
    if cur is None and not part.root:
        return ComponentView(c.name, c.kind, c.owner_ref, ())
    if type(cur) is not dict:
        return None
    slots = {key: Slot(loc, shared.base, cur, at) for key, loc, at in shared.fields}
    implied_slots(c, slots)
    instance = Instance(shared.id, shared.fields[0][1], 1, slots=slots)
    return ComponentView(c.name, c.kind, c.owner_ref, (instance,))
