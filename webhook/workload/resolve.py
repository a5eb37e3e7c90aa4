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
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, NamedTuple

from webhook.base.gvk import GVK
from webhook.base.reader import type_name
from webhook.jq.engine import (
    Engine,
    Outcome,
    Path_,
    Prepared,
    getpath,
    key_chain,
    pointer,
    prepare,
)
from webhook.jq.paths import follow
from webhook.karta.carry import declined
from webhook.karta.fields import (
    COMPONENT_FIELDS,
    FRAGMENT_INJECTABLES,
    FRAGMENTED,
    GPU_FRAGMENTS,
    INJECTABLES,
    POD_SPEC,
    TEMPLATE,
    WRITE_FRAGMENTS,
    Mode,
    Need,
    Role,
)
from webhook.karta.locations import as_count, creatable, parent_object
from webhook.karta.model import Component, Karta
from webhook.karta.statusmodel import UNDEFINED
from webhook.workload import gpus
from webhook.workload import phase as status


class Slot(NamedTuple):
    """A place a value is written: ``path`` is its location (the map of a map injectable, the
    field of a single one); the first ``base`` tokens must already hold an object (the
    template, pod spec or fragment parent), deeper missing objects (``metadata``, ``labels``)
    are created. (A named tuple: there are several per instance on every request.)"""

    path: Path_
    base: int
    #: the object at ``path[:base]`` as resolved, so writers need not walk from the root
    anchor: Any
    #: the JSON Pointer of ``path``, built from the location's pointer and a fixed suffix
    pointer: str


class Instance(NamedTuple):
    """One pod template (or pod spec, or set of fragments) of a component. Named tuples, as
    :class:`Slot`: several are made on every request, and they cost a third of a frozen
    dataclass to build."""

    id: str
    location: Path_ | None  # the template / pod spec / first fragment location, for display
    replicas: int
    min_replicas: int | None = None
    max_replicas: int | None = None
    gpus_per_pod: int = 0
    #: where each injectable goes, by :attr:`Injectable.key`; absent: the definition gives none
    slots: Mapping[str, Slot] = MappingProxyType({})

    @property
    def gpus(self) -> int:
        return self.replicas * self.gpus_per_pod


class ComponentView(NamedTuple):
    name: str
    kind: GVK | None
    owner: str | None
    instances: tuple[Instance, ...]


@dataclass(frozen=True)
class Workload:
    gvk: GVK
    name: str
    namespace: str
    definition: str
    components: tuple[ComponentView, ...]
    status: str
    warnings: tuple[str, ...] = field(default=())
    #: write paths that failed to evaluate (not absent: failed), so their templates are unknown
    failures: tuple[str, ...] = field(default=())
    #: policy fields the definition says its kind refuses (:func:`webhook.karta.fields.declined`)
    declined: frozenset[str] = field(default=frozenset())

    @property
    def gpus(self) -> int:
        return sum(i.gpus for c in self.components for i in c.instances)

    @property
    def instances(self) -> list[tuple[ComponentView, Instance]]:
        return [(c, i) for c in self.components for i in c.instances]


# --------------------------------------------------------------------------- resolution


@dataclass(frozen=True)
class _Requests:
    """What resolution at one :class:`Need` evaluates for a definition: every (expression,
    mode) once, prepared for the engine, and where each one's outcome is. Derived once per
    definition (definitions are immutable; this is on every request's path)."""

    prepared: Prepared
    index: Mapping[tuple[str, Mode], int]
    #: a mutation's requests that only components resolved by :func:`_by_parent` make (plain
    #: key paths, walked in process): evaluated only when one of them is resolved in full
    deferred: Prepared
    deferred_index: Mapping[tuple[str, Mode], int]


def _wanted(c: Component, need: Need, root: bool) -> list[tuple[Role, str, Mode]]:
    """The component's fields that resolution at ``need`` evaluates: those of the spec pattern
    it follows, its instance ids and scale, and (the root's only) its status (derived once)."""
    return c.derive(("wanted", need, root), _wanted_fields, c, need, root)


def _wanted_fields(c: Component, need: Need, root: bool) -> list[tuple[Role, str, Mode]]:
    out = []
    for f in COMPONENT_FIELDS:
        expr = c.exprs.get(f.role)
        if not expr or f.need > need or (f.root_only and not root):
            continue
        if f.pattern is not None and f.pattern != c.pattern:
            continue
        out.append((f.role, expr, f.mode))
    return out


def _requests(karta: Karta, need: Need, full: bool) -> _Requests:
    return karta.root.derive(("requests", need, full), _requests_of, karta, need, full)


def _requests_of(karta: Karta, need: Need, full: bool) -> _Requests:
    now: list[tuple[str, Mode]] = []
    later: list[tuple[str, Mode]] = []
    for c in karta.components:
        defer = not full and c is not karta.root and _shared(c) is not None
        wanted = _wanted(c, need, c is karta.root)
        (later if defer else now).extend((expr, mode) for _, expr, mode in wanted)
    root_status = karta.root.status
    if full and root_status:
        for matchers in root_status.mappings.values():
            now.extend(
                (status.tostring(m.by_expression), "values") for m in matchers if m.by_expression
            )
    index = _positions(now)
    later_index = _positions(r for r in later if r not in index)
    return _Requests(prepare(list(index)), index, prepare(list(later_index)), later_index)


def _positions(requests: Iterable[tuple[str, Mode]]) -> dict[tuple[str, Mode], int]:
    """Each distinct request and its place, in first-seen order (the dict's order)."""
    return {r: i for i, r in enumerate(dict.fromkeys(requests))}


class _Batch:
    """The outcomes of one object's requests, handed out by expression and mode (the
    deferred ones evaluated when first asked for)."""

    def __init__(
        self, requests: _Requests, engine: Engine, obj: Any, outcomes: list[Outcome]
    ) -> None:
        self.requests = requests
        self.engine = engine
        self.obj = obj
        self.outcomes = outcomes
        self.later: list[Outcome] | None = None
        self.failures: list[str] = []  # write paths whose evaluation failed

    def get(self, expr: str | None, mode: Mode) -> Outcome | None:
        """The outcome of a requested expression; None when it was not requested."""
        if not expr:
            return None
        i = self.requests.index.get((expr, mode))
        if i is not None:
            return self.outcomes[i]
        i = self.requests.deferred_index.get((expr, mode))
        if i is None:
            return None
        if self.later is None:
            self.later = self.engine.evaluate(self.requests.deferred, self.obj)
        return self.later[i]


def mutation_requests(karta: Karta) -> _Requests:
    """What a mutation of ``karta``'s objects evaluates (``resolve(..., full=False)``)."""
    return _requests(karta, Need.MUTATE, False)


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
    ``full=False``, are the outcomes of :func:`mutation_requests` on ``obj`` when the caller
    has them already (nothing is evaluated twice).
    """
    need = Need.DESCRIBE if full else Need.MUTATE
    requests = _requests(karta, need, full)
    if evaluated is None or full:
        evaluated = engine.evaluate(requests.prepared, obj)
    batch = _Batch(requests, engine, obj, evaluated)
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


def _locs(
    batch: _Batch, expr: str | None, c: Component, field: str, warnings: list[str]
) -> list[tuple[Path_, Any]]:
    """The locations a write field found; a failure is a warning and a mutation failure."""
    out = batch.get(expr, "paths")
    if out is None:
        return []
    if out.error:
        what = f"component {c.name!r}: {field}"
        warnings.append(f"{what} {expr!r}: {out.error}")
        batch.failures.append(f"{what}: {out.error}")
    return out.items


@dataclass(slots=True)
class _Row:
    """One location a component's pod-spec definition found, before instance ids and replica
    counts are paired with it (by position). ``present`` is false for a null or absent
    template, which is no instance."""

    loc: Path_ | None
    present: bool
    slots: dict[str, Slot] = field(default_factory=dict)
    gpus: int = 0


def _component(
    c: Component,
    obj: Mapping[str, Any],
    batch: _Batch,
    full: bool,
    warnings: list[str],
    root: bool,
) -> ComponentView:
    if not full:
        if c.pattern == TEMPLATE:
            return _template_view(c, batch, warnings)
        if (known := _by_parent(c, obj, root)) is not None:
            return known
    rows: list[_Row] = []
    if c.pattern == TEMPLATE:
        rows = _template_rows(c, batch, full, warnings)
    elif c.pattern == POD_SPEC:
        rows = _pod_spec_rows(c, obj, batch, full, warnings)
    elif c.pattern == FRAGMENTED:
        rows = _fragment_rows(c, obj, batch, warnings, root)

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


def _template_view(c: Component, batch: _Batch, warnings: list[str]) -> ComponentView:
    """A ``podTemplateSpecPath`` component as a mutation needs it: the rules of
    :func:`_template_rows` and :func:`instance_ids`, without replicas and GPUs."""
    found = _locs(batch, c.expr(Role.POD_TEMPLATE_SPEC), c, TEMPLATE, warnings)
    ids = instance_ids(c, [loc for loc, _ in found], _ids(c, batch), warnings)
    instances = tuple(
        Instance(ids[i], loc, 1, slots=_template_slots(loc, val))
        for i, (loc, val) in enumerate(found)
        if isinstance(val, dict)
    )
    return ComponentView(c.name, c.kind, c.owner_ref, instances)


#: each injectable's steps below a template, and their JSON Pointer suffix
_IN_TEMPLATE = tuple(
    (i.key, i.in_template, i.template_base, pointer(i.in_template)) for i in INJECTABLES
)


def _by_parent(c: Component, obj: Mapping[str, Any], root: bool = False) -> ComponentView | None:
    """A component resolved without the general rules, when its write fields are object
    keys under one parent (``.spec.components.proxy.podLabels`` and its siblings: a Milvus
    component) and it has no ``instanceIdPath``, and that parent is reached through objects
    only. Resolution in full would give the same: absent or null, one location per field
    without a parent object, so no instance and no warning; an object, one instance whose
    fields all live in it. Anything else (a value in the way that is not an object) is left
    to resolution, which reports it: None. The root's fields are created where their parent
    is missing (see :func:`creatable`), so for the root only an object is taken here. Mutation
    only; a describe resolves in full."""
    shared = _shared(c)
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


@dataclass(frozen=True)
class _Shared:
    """A component's write fields as keys of one parent object: the parent's keys, its
    length, and each field's injectable, location and JSON Pointer (in table order)."""

    parent: tuple[str, ...]
    base: int
    fields: tuple[tuple[str, tuple[str, ...], str], ...]


def _shared(c: Component) -> _Shared | None:
    """The component's write fields as keys of one parent object, or None (derived once)."""
    return c.derive("shared", _shared_parent, c)


def _shared_parent(c: Component) -> _Shared | None:
    if c.pattern != FRAGMENTED or c.exprs.get(Role.INSTANCE_ID):
        return None
    fields = []
    for inj in FRAGMENT_INJECTABLES:
        assert inj.fragment is not None
        expr = c.exprs.get(inj.fragment)
        if expr:
            keys = key_chain(expr)
            if not keys:
                return None
            fields.append((inj.key, keys, pointer(keys)))
    parents = {keys[:-1] for _, keys, _ in fields}
    if len(parents) != 1:
        return None
    (parent,) = parents
    if not parent:
        return None
    return _Shared(parent, len(parent), tuple(fields))


def _template_slots(loc: Path_, template: dict[str, Any]) -> dict[str, Slot]:
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


def _template_rows(c: Component, batch: _Batch, full: bool, warnings: list[str]) -> list[_Row]:
    """``podTemplateSpecPath``: every injectable at its place below the template, anchored at
    the resolved template."""
    rows = []
    for loc, val in _locs(batch, c.expr(Role.POD_TEMPLATE_SPEC), c, TEMPLATE, warnings):
        if not isinstance(val, dict):
            rows.append(_Row(loc, present=False))
            continue
        slots = _template_slots(loc, val)
        spec = val.get("spec")
        pod = gpus.pod_gpus(spec) if full and isinstance(spec, dict) else 0
        rows.append(_Row(loc, True, slots, pod))
    return rows


def _pod_spec_rows(
    c: Component, obj: Mapping[str, Any], batch: _Batch, full: bool, warnings: list[str]
) -> list[_Row]:
    """``podSpecPath`` with an optional ``metadataPath``, paired by position: without a
    metadata location per pod spec there is nowhere to put labels and annotations."""
    where = f"component {c.name!r}:"
    meta_expr = c.expr(Role.METADATA)
    specs = _locs(batch, c.expr(Role.POD_SPEC), c, "podSpecPath", warnings)
    metas = _locs(batch, meta_expr, c, "metadataPath", warnings)
    if meta_expr and len(metas) != len(specs):
        warnings.append(
            f"{where} metadataPath found {len(metas)} location(s) but podSpecPath {len(specs)}; labels and annotations not written"
        )
        metas = []
    rows = []
    for i, (loc, val) in enumerate(specs):
        slots: dict[str, Slot] = {}
        at = pointer(loc)
        for inj in INJECTABLES:
            if inj.in_pod_spec is not None:
                steps = inj.in_pod_spec
                slots[inj.key] = Slot((*loc, *steps), len(loc), val, at + pointer(steps))
            elif inj.in_metadata is not None and metas:
                meta_loc, meta = metas[i]
                if (s := _metadata_slot(obj, meta_loc, meta, inj.in_metadata)) is not None:
                    slots[inj.key] = s
        present = isinstance(val, dict)
        rows.append(_Row(loc, present, slots, gpus.pod_gpus(val) if full and present else 0))
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
    """A fragmented component's fields as resolution uses them, derived once per component:
    each injectable's write field (key, expression or None, field name), then the read-only
    GPU fields (expression or None) in :data:`GPU_FRAGMENTS` order."""

    writes: tuple[tuple[str, str | None, str], ...]
    reads: tuple[str | None, ...]


def _fragments(c: Component) -> _Fragments:
    return c.derive("fragments", _fragments_of, c)


def _fragments_of(c: Component) -> _Fragments:
    return _Fragments(
        tuple(
            (i.key, c.exprs.get(i.fragment), f"fragmentedPodSpecDefinition.{i.fragment.value}")
            for i in FRAGMENT_INJECTABLES
            if i.fragment is not None
        ),
        tuple(c.exprs.get(role) for role in GPU_FRAGMENTS),
    )


def _fragment_rows(
    c: Component, obj: Mapping[str, Any], batch: _Batch, warnings: list[str], root: bool
) -> list[_Row]:
    """Fragmented definitions: each field has its own locations (write fields) or values
    (read-only fields), aligned by position. An instance is present when one of its write
    fragments has an existing parent object — or, for the root, one that can be created (see
    :func:`creatable`) — or, with no write fields, a read value is set."""
    plan = _fragments(c)
    found: list[list[tuple[Path_, Any]]] = []  # per injectable, in table order
    n = 0
    for _, expr, name in plan.writes:
        locs = _locs(batch, expr, c, name, warnings) if expr else []
        found.append(locs)
        if len(locs) > n:
            n = len(locs)
    reads: list[list[Any]] = []  # per GPU field (not requested when mutating)
    for role, expr in zip(GPU_FRAGMENTS, plan.reads, strict=True):
        out = batch.get(expr, "values") if expr else None
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
            elif root and (made := creatable(obj, loc)) is not None:
                slots[key] = Slot(loc, made[0], made[1], pointer(loc))
        if has_reads:
            values = [got[i] if i < len(got) else None for got in reads]
            gpu = gpus.fragment_gpus(*values)
            present = bool(slots) if has_writes else any(v is not None for v in values)
        else:
            gpu, present = 0, bool(slots)
        rows.append(_Row(anchor, present, slots, gpu))
    return rows


def _fragment(c: Component, role: Role) -> str:
    """A fragmented field in messages."""
    return f"component {c.name!r}: fragmentedPodSpecDefinition.{role.value}"


def _ids(c: Component, batch: _Batch) -> Outcome | None:
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
    c: Component, role: Role, n: int, batch: _Batch, warnings: list[str]
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
