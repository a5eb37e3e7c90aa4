"""The slots of a component's instances, by the spec pattern its definition follows: pod
templates (``podTemplateSpecPath``), pod specs with their metadata (``podSpecPath``,
``metadataPath``) and fragments (``fragmentedPodSpecDefinition``), one :class:`Row` per location
found, before instance ids and replica counts are paired with it
(:meth:`webhook.workload.locator.Locator.locate`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from webhook.base.pointers import Path_, getpath, pointer
from webhook.karta.fields import (
    FRAGMENT_INJECTABLES,
    GPU_FRAGMENTS,
    INJECTABLES,
    TEMPLATE,
    WRITE_FRAGMENTS,
    Role,
)
from webhook.karta.locations import creatable, instance_depths, parent_object
from webhook.karta.model import Component
from webhook.karta.podspec import implied_fields, implied_pod_spec, role_key
from webhook.workload import gpus
from webhook.workload.batch import Batch, write_locations
from webhook.workload.model import Slot

#: where each of a component's requested fields' outcomes is in its locator's batch
Places = Mapping[Role, int]


@dataclass(slots=True)
class Row:
    """One location a component's pod-spec definition found, before instance ids and replica
    counts are paired with it (by position). ``present`` is false for a null or absent
    template, which is no instance."""

    loc: Path_ | None
    present: bool
    slots: dict[str, Slot] = field(default_factory=dict)
    gpus: int = 0


#: each injectable's steps below a template, and their JSON Pointer suffix
_IN_TEMPLATE = tuple(
    (i.key, i.in_template, i.template_base, pointer(i.in_template)) for i in INJECTABLES
)


def template_slots(loc: Path_, template: dict[str, Any]) -> dict[str, Slot]:
    """Where each injectable goes below the template at ``loc``: its leading
    ``template_base`` steps (a template's ``spec``) must exist, the rest is created."""
    at = pointer(loc)
    base = len(loc)
    slots = {}
    for key, steps, own, suffix in _IN_TEMPLATE:
        anchor: Any = template
        for tok in steps[:own]:
            anchor = anchor.get(tok) if isinstance(anchor, dict) else None
        if isinstance(anchor, dict):
            slots[key] = Slot((*loc, *steps), base + own, anchor, at + suffix)
    return slots


def template_rows(
    c: Component, at: Places, batch: Batch, full: bool, warnings: list[str]
) -> list[Row]:
    """``podTemplateSpecPath``: every injectable at its place below the template, anchored at
    the resolved template."""
    rows = []
    role = Role.POD_TEMPLATE_SPEC
    for loc, val in write_locations(batch, at.get(role), c, role, TEMPLATE, warnings):
        if not isinstance(val, dict):
            rows.append(Row(loc, present=False))
            continue
        slots = template_slots(loc, val)
        spec = val.get("spec")
        pod = gpus.pod_gpus(spec) if full and isinstance(spec, dict) else 0
        rows.append(Row(loc, True, slots, pod))
    return rows


def pod_spec_rows(
    c: Component,
    at: Places,
    obj: Mapping[str, Any],
    batch: Batch,
    full: bool,
    warnings: list[str],
) -> list[Row]:
    """``podSpecPath`` with an optional ``metadataPath``, paired by position: without a
    metadata location per pod spec there is nowhere to put labels and annotations."""
    where = f"component {c.name!r}:"
    meta_at = at.get(Role.METADATA)
    specs = write_locations(batch, at.get(Role.POD_SPEC), c, Role.POD_SPEC, "podSpecPath", warnings)
    metas = write_locations(batch, meta_at, c, Role.METADATA, "metadataPath", warnings)
    if meta_at is not None and len(metas) != len(specs):
        warnings.append(
            f"{where} metadataPath found {len(metas)} location(s) but podSpecPath {len(specs)}; labels and annotations not written"
        )
        metas = []
    rows = []
    for i, (loc, val) in enumerate(specs):
        slots: dict[str, Slot] = {}
        here = pointer(loc)
        for inj in INJECTABLES:
            if inj.in_pod_spec is not None:
                steps = inj.in_pod_spec
                slots[inj.key] = Slot((*loc, *steps), len(loc), val, here + pointer(steps))
            elif inj.in_metadata is not None and metas:
                meta_loc, meta = metas[i]
                if (s := _metadata_slot(obj, meta_loc, meta, inj.in_metadata)) is not None:
                    slots[inj.key] = s
        present = isinstance(val, dict)
        rows.append(Row(loc, present, slots, gpus.pod_gpus(val) if full and present else 0))
    return rows


def _metadata_slot(obj: Any, loc: Path_, meta: Any, steps: tuple[str, ...]) -> Slot | None:
    """``steps`` (labels, annotations) of the metadata object at ``loc``: written inside it
    when it exists, created with it in its parent when it is null or absent."""
    path = (*loc, *steps)
    if isinstance(meta, dict):
        return Slot(path, len(loc), meta, pointer(path))
    parent = parent_object(obj, loc) if meta is None else None
    return Slot(path, len(loc) - 1, parent, pointer(path)) if parent is not None else None


@dataclass(frozen=True)
class _Fragments:
    """A fragmented component's fields as resolution uses them, the same for every component:
    each injectable's write field (key, role, field name), then the read-only GPU fields."""

    writes: tuple[tuple[str, Role, str], ...]
    reads: tuple[Role, ...]


_FRAGMENTS = _Fragments(
    tuple(
        (i.key, i.fragment, f"fragmentedPodSpecDefinition.{i.fragment.value}")
        for i in FRAGMENT_INJECTABLES
        if i.fragment is not None
    ),
    tuple(GPU_FRAGMENTS),
)


def fragment_rows(
    c: Component,
    at: Places,
    obj: Mapping[str, Any],
    batch: Batch,
    warnings: list[str],
    root: bool,
) -> list[Row]:
    """Fragmented definitions: each field has its own locations (write fields) or values
    (read-only fields), aligned by position. An instance is present when one of its write
    fragments has an existing parent object — or one that can be created inside the instance's
    own object (the common prefix of its fragments' locations; the workload itself for the
    root: see :func:`creatable`) — or, with no write fields, a read value is set. The pod-spec
    fields no fragment locates go to the pod spec the paths imply (:func:`implied_slots`)."""
    plan = _FRAGMENTS
    found: list[list[tuple[Path_, Any]]] = []  # per injectable, in table order
    n = 0
    for _, role, name in plan.writes:
        locs = write_locations(batch, at.get(role), c, role, name, warnings)
        found.append(locs)
        if len(locs) > n:
            n = len(locs)
    reads: list[list[Any]] = []  # per GPU field (not requested when mutating)
    for role in plan.reads:
        out = batch.at(at.get(role))
        items: list[Any] = []
        if out is not None:
            if out.error:
                warnings.append(f"{_fragment(c, role)}: {out.error}")
            else:
                items = out.items
        reads.append(items)
        if len(items) > n:
            n = len(items)
    if n == 0:
        return []
    for roles, table in ((WRITE_FRAGMENTS, found), (GPU_FRAGMENTS, reads)):
        for k, got in enumerate(table):
            if got and len(got) != n:
                warnings.append(
                    f"{_fragment(c, roles[k])} found {len(got)} result(s), expected {n}; not used"
                )
                table[k] = []
    has_writes = any(found)
    has_reads = any(reads)
    parents: dict[Path_, Any] = {}  # a component's fragments usually share their parent
    depths: list[int] | None = None  # each instance's own object, when a parent is missing

    rows = []
    for i in range(n):
        slots: dict[str, Slot] = {}
        anchor: Path_ | None = None
        for (key, _, _), locs in zip(plan.writes, found, strict=True):
            if i >= len(locs):
                continue
            loc = locs[i][0]
            if anchor is None:
                anchor = loc
            if not loc:
                continue
            up = loc[:-1]
            parent = parents.get(up, parents)  # the dict itself marks "not looked up yet"
            if parent is parents:
                parent = parents[up] = getpath(obj, up)
            if isinstance(parent, dict):
                slots[key] = Slot(loc, len(loc) - 1, parent, pointer(loc))
                continue
            # A missing holder: created inside the instance's own object when that exists
            # (the root's is the workload), never the instance itself.
            if root:
                within = 0
            else:
                if depths is None:
                    depths = instance_depths([[p for p, _ in locs] for locs in found])
                within = depths[i] if i < len(depths) else 0
                if within == 0:
                    continue
            if (made := creatable(obj, loc, within)) is not None:
                slots[key] = Slot(loc, made[0], made[1], pointer(loc))
        implied_slots(c, slots)
        if has_reads:
            values = [got[i] if i < len(got) else None for got in reads]
            gpu = gpus.fragment_gpus(*values)
            present = bool(slots) if has_writes else any(v is not None for v in values)
        else:
            gpu, present = 0, bool(slots)
        rows.append(Row(anchor, present, slots, gpu))
    return rows


def implied_slots(c: Component, slots: dict[str, Slot]) -> None:
    """Add the pod-spec fields ``c`` has no fragmented path for (``nodeSelector``,
    ``tolerations``, a missing ``priorityClassNamePath``'s) at the pod spec the definition's
    fragment paths imply (:func:`webhook.karta.podspec.implied_pod_spec`), beside the written
    field that ends in it: where that one is written (its parent exists or is created), they
    are too, by the same rule."""
    anchors, fields = c.derive("implied-slots", _implied_plan, c)
    if not fields:
        return
    for key in anchors:
        s = slots.get(key)
        if s is None:
            continue
        spec = s.path[:-1]
        here = s.pointer[: s.pointer.rindex("/")]  # the anchor's last token is one key
        for name, steps, suffix in fields:
            slots[name] = Slot((*spec, *steps), s.base, s.anchor, here + suffix)
        return


def _implied_plan(
    c: Component,
) -> tuple[tuple[str, ...], tuple[tuple[str, tuple[str, ...], str], ...]]:
    """The keys of the written fields to place the implied ones by, and each implied field's
    key, steps below the pod spec and their JSON Pointer (derived once per component)."""
    anchors = tuple(role_key(r) for r in implied_pod_spec(c).anchors)
    fields = tuple(
        (i.key, i.in_pod_spec, pointer(i.in_pod_spec))
        for i in implied_fields(c)
        if i.in_pod_spec is not None
    )
    return anchors, fields


def _fragment(c: Component, role: Role) -> str:
    """A fragmented field in messages."""
    return f"component {c.name!r}: fragmentedPodSpecDefinition.{role.value}"
