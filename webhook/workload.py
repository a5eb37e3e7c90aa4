"""Resolve a definition against one object: components → instances → pod-template locations.

This is where a Karta definition meets a real workload. Every jq expression of the definition
that the caller needs is evaluated in one :func:`webhook.jqexpr.evaluate` batch, so the object
reaches libjq at most once. The result is plain data: where each instance's labels,
annotations and ``schedulerName`` live (as locations, never as copies of the template), how
many replicas and GPUs it has, and the workload's status category.

Rules (see DESIGN.md, "Create parents, skip absentees"):

* a template, pod spec or metadata location whose value is null or absent is skipped — a
  PyTorchJob without a Master has no master instance, it does not get one;
* a path that iterates over an absent list or map has no locations (not an error);
* fragmented fields are written only where their parent object exists.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from webhook import jqexpr
from webhook.definitions import GVK, STATUS_ORDER, UNDEFINED, Component, Karta, StatusDefinition
from webhook.jqexpr import Outcome, Path_

GPU = "nvidia.com/gpu"


@dataclass(frozen=True)
class Slot:
    """A place a value is written: ``path`` is its location; the first ``base`` tokens must
    already hold an object (the template, pod spec or fragment parent), deeper missing objects
    (``metadata``, ``labels``) are created."""

    path: Path_
    base: int
    #: the object at ``path[:base]`` as resolved, so writers need not walk from the root
    anchor: Any = field(default=None, compare=False, repr=False)


@dataclass(frozen=True)
class Instance:
    id: str
    location: Path_ | None  # the template / pod spec / first fragment location, for display
    replicas: int
    min_replicas: int | None = None
    max_replicas: int | None = None
    gpus_per_pod: int = 0
    labels: Slot | None = None
    annotations: Slot | None = None
    scheduler_name: Slot | None = None

    @property
    def gpus(self) -> int:
        return self.replicas * self.gpus_per_pod


@dataclass(frozen=True)
class ComponentView:
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

    @property
    def gpus(self) -> int:
        return sum(i.gpus for c in self.components for i in c.instances)

    @property
    def instances(self) -> list[tuple[ComponentView, Instance]]:
        return [(c, i) for c in self.components for i in c.instances]


# --------------------------------------------------------------------------- resolution


class _Batch:
    """Collects (expression, mode) requests, evaluates them in one go, hands out outcomes."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, jqexpr.Mode]] = []
        self.index: dict[tuple[str, str], int] = {}
        self.outcomes: list[Outcome] = []

    def want(self, expr: str | None, mode: jqexpr.Mode) -> None:
        if expr and (expr, mode) not in self.index:
            self.index[(expr, mode)] = len(self.requests)
            self.requests.append((expr, mode))

    def run(self, obj: Any, timeout: float) -> None:
        self.outcomes = jqexpr.evaluate(self.requests, obj, timeout=timeout)

    def get(self, expr: str | None, mode: jqexpr.Mode) -> Outcome | None:
        """The outcome of a requested expression; None when it was not requested."""
        i = self.index.get((expr, mode)) if expr else None
        return self.outcomes[i] if i is not None else None


def _write_exprs(c: Component) -> list[str]:
    s = c.spec
    if s is None:
        return []
    if s.pod_template_spec_path:
        return [s.pod_template_spec_path]
    if s.pod_spec_path:
        return [e for e in (s.pod_spec_path, s.metadata_path) if e]
    return [e for name, e in (s.fragmented or {}).items() if name in WRITE_FRAGMENTS]


#: Fragmented fields the mutation writes through; the others are read-only (and may be
#: computed, like upstream's ``resourcesPath: {requests: .spec.resources}``).
WRITE_FRAGMENTS = ("labelsPath", "annotationsPath", "schedulerNamePath")
#: Read-only fragments that tell a pod's GPUs, most precise first.
GPU_FRAGMENTS = ("containersPath", "containerPath", "resourcesPath")


def resolve(
    karta: Karta,
    obj: Mapping[str, Any],
    *,
    full: bool = True,
    timeout: float = jqexpr.DEFAULT_TIMEOUT,
) -> Workload:
    """The workload tree of ``obj`` under ``karta``.

    With ``full=False`` only what mutation needs is evaluated (locations and instance ids),
    which keeps the hot path to the definition's write paths.
    """
    batch = _Batch()
    for c in karta.components:
        for e in _write_exprs(c):
            batch.want(e, "paths")
        batch.want(c.instance_id_path, "values")
        if full and c.spec and c.spec.fragmented:
            for name in GPU_FRAGMENTS:
                batch.want(c.spec.fragmented.get(name), "values")
        if full and c.scale:
            for e in (c.scale.replicas_path, c.scale.min_replicas_path, c.scale.max_replicas_path):
                batch.want(e, "values")
    status_def = karta.root.status
    if full and status_def:
        batch.want(status_def.phase_path, "values")
        batch.want(status_def.conditions_path, "values")
        for matchers in status_def.mappings.values():
            for m in matchers:
                batch.want(_tostring(m.by_expression), "values")
    batch.run(obj, timeout)

    warnings: list[str] = []
    components = tuple(_component(c, obj, batch, full, warnings) for c in karta.components)
    status = _status(status_def, batch, warnings) if full and status_def else UNDEFINED
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    gvk = GVK.of(obj) or (karta.gvk or GVK("", "", ""))
    return Workload(
        gvk=gvk,
        name=str(meta.get("name") or meta.get("generateName") or ""),
        namespace=str(meta.get("namespace") or ""),
        definition=karta.name,
        components=components,
        status=status,
        warnings=tuple(warnings),
    )


def _tostring(expr: str | None) -> str | None:
    return f"({expr}\n) | tostring" if expr else None


def _locs(
    batch: _Batch, expr: str | None, what: str, warnings: list[str]
) -> list[tuple[Path_, Any]]:
    out = batch.get(expr, "paths")
    if out is None:
        return []
    if out.error:
        warnings.append(f"{what} {expr!r}: {out.error}")
    return list(out.items)


def _is_obj(v: Any) -> bool:
    return isinstance(v, dict)


def parent_object(obj: Any, loc: Path_) -> dict[str, Any] | None:
    """The object holding the last step of ``loc`` (where a missing ``labels`` or
    ``schedulerName`` is created), or None: the root has no parent, and a key cannot be added
    to a list, a scalar or nothing. Validation counts a location as found by the same rule."""
    if not loc:
        return None
    parent = jqexpr.getpath(obj, loc[:-1])
    return parent if isinstance(parent, dict) else None


@dataclass
class _Row:
    """One location a component's pod-spec definition found, before instance ids and replica
    counts are paired with it (by position). ``present`` is false for a null or absent
    template, which is no instance."""

    loc: Path_ | None
    present: bool
    labels: Slot | None = None
    annotations: Slot | None = None
    scheduler: Slot | None = None
    gpus: int = 0


def _component(
    c: Component, obj: Mapping[str, Any], batch: _Batch, full: bool, warnings: list[str]
) -> ComponentView:
    s = c.spec
    rows: list[_Row] = []
    if s and s.pod_template_spec_path:
        rows = _template_rows(c, s.pod_template_spec_path, batch, full, warnings)
    elif s and s.pod_spec_path:
        rows = _pod_spec_rows(c, obj, batch, full, warnings)
    elif s and s.fragmented is not None:
        rows = _fragment_rows(c, obj, batch, warnings)

    n = len(rows)
    ids = _instance_ids(c, rows, batch, warnings)
    replicas, mins, maxs = (
        _scale_values(c, attr, n, batch, warnings) if full else [None] * n for attr in _SCALE_FIELDS
    )
    instances = tuple(
        Instance(
            id=ids[i],
            location=row.loc,
            replicas=replicas[i] if replicas[i] is not None else 1,
            min_replicas=mins[i],
            max_replicas=maxs[i],
            gpus_per_pod=row.gpus,
            labels=row.labels,
            annotations=row.annotations,
            scheduler_name=row.scheduler,
        )
        for i, row in enumerate(rows)
        if row.present
    )
    return ComponentView(c.name, c.kind, c.owner_ref, instances)


def _template_rows(
    c: Component, expr: str, batch: _Batch, full: bool, warnings: list[str]
) -> list[_Row]:
    """``podTemplateSpecPath``: labels and annotations go under the template's ``metadata``,
    ``schedulerName`` into its ``spec``; each slot is anchored at the resolved template."""
    rows = []
    for loc, val in _locs(batch, expr, f"component {c.name!r}: podTemplateSpecPath", warnings):
        if not _is_obj(val):
            rows.append(_Row(loc, present=False))
            continue
        spec = val.get("spec")
        rows.append(
            _Row(
                loc,
                present=True,
                labels=Slot((*loc, "metadata", "labels"), len(loc), val),
                annotations=Slot((*loc, "metadata", "annotations"), len(loc), val),
                scheduler=Slot((*loc, "spec", "schedulerName"), len(loc) + 1, spec)
                if _is_obj(spec)
                else None,
                gpus=_pod_gpus(spec) if full and _is_obj(spec) else 0,
            )
        )
    return rows


def _pod_spec_rows(
    c: Component, obj: Mapping[str, Any], batch: _Batch, full: bool, warnings: list[str]
) -> list[_Row]:
    """``podSpecPath`` with an optional ``metadataPath``, paired by position: without a
    metadata location per pod spec there is nowhere to put labels and annotations."""
    assert c.spec is not None
    where = f"component {c.name!r}:"
    specs = _locs(batch, c.spec.pod_spec_path, f"{where} podSpecPath", warnings)
    metas = _locs(batch, c.spec.metadata_path, f"{where} metadataPath", warnings)
    if c.spec.metadata_path and len(metas) != len(specs):
        warnings.append(
            f"{where} metadataPath found {len(metas)} location(s) but podSpecPath {len(specs)}; labels and annotations not written"
        )
        metas = []
    rows = []
    for i, (loc, val) in enumerate(specs):
        meta_loc, meta = metas[i] if metas else ((), None)
        rows.append(
            _Row(
                loc,
                present=_is_obj(val),
                labels=_metadata_slot(obj, meta_loc, meta, "labels") if metas else None,
                annotations=_metadata_slot(obj, meta_loc, meta, "annotations") if metas else None,
                scheduler=Slot((*loc, "schedulerName"), len(loc), val),
                gpus=_pod_gpus(val) if full and _is_obj(val) else 0,
            )
        )
    return rows


def _metadata_slot(obj: Any, loc: Path_, meta: Any, key: str) -> Slot | None:
    """``key`` (labels, annotations) of the metadata object at ``loc``: written inside it when
    it exists, created with it in its parent when it is null or absent."""
    if _is_obj(meta):
        return Slot((*loc, key), len(loc), meta)
    parent = parent_object(obj, loc) if meta is None else None
    return Slot((*loc, key), len(loc) - 1, parent) if parent is not None else None


def _fragment_rows(
    c: Component, obj: Mapping[str, Any], batch: _Batch, warnings: list[str]
) -> list[_Row]:
    """Fragmented definitions: each field has its own locations (write fields) or values
    (read-only fields), aligned by position. An instance is present when one of its write
    fragments has an existing parent object (or, with no write fields, a read value is set)."""
    assert c.spec is not None and c.spec.fragmented is not None
    frag = c.spec.fragmented
    where = f"component {c.name!r}: fragmentedPodSpecDefinition"
    found = {
        name: _locs(batch, frag.get(name), f"{where}.{name}", warnings) for name in WRITE_FRAGMENTS
    }
    reads: dict[str, list[Any]] = {}
    for name in GPU_FRAGMENTS:
        out = batch.get(frag.get(name), "values") if name in frag else None
        if out is not None and out.error:
            warnings.append(f"{where}.{name}: {out.error}")
        reads[name] = list(out.items) if out is not None and out.ok else []
    n = max((len(v) for v in (*found.values(), *reads.values())), default=0)
    for table in (found, reads):
        for name, items in table.items():
            if items and len(items) != n:
                warnings.append(
                    f"{where}.{name} found {len(items)} result(s), expected {n}; not used"
                )
                table[name] = []
    has_writes = any(found.values())

    def slot(name: str, i: int) -> Slot | None:
        locs = found[name]
        loc = locs[i][0] if i < len(locs) else ()
        parent = parent_object(obj, loc)
        return Slot(loc, len(loc) - 1, parent) if parent is not None else None

    def read(name: str, i: int) -> Any:
        return reads[name][i] if i < len(reads[name]) else None

    rows = []
    for i in range(n):
        slots = {name: slot(name, i) for name in WRITE_FRAGMENTS}
        anchors = [found[name][i][0] for name in WRITE_FRAGMENTS if i < len(found[name])]
        if has_writes:
            present = any(v is not None for v in slots.values())
        else:
            present = any(read(name, i) is not None for name in GPU_FRAGMENTS)
        rows.append(
            _Row(
                anchors[0] if anchors else None,
                present=present,
                labels=slots["labelsPath"],
                annotations=slots["annotationsPath"],
                scheduler=slots["schedulerNamePath"],
                gpus=_fragment_gpus(
                    read("containersPath", i), read("containerPath", i), read("resourcesPath", i)
                ),
            )
        )
    return rows


def _instance_ids(c: Component, rows: list[_Row], batch: _Batch, warnings: list[str]) -> list[str]:
    """Ids from ``instanceIdPath`` when it agrees with the locations in count; otherwise the
    key or index that tells the locations apart (never ``keys`` paired with ``.[]``: libjq
    iterates objects in insertion order, so the location is the truth)."""
    n = len(rows)
    out = batch.get(c.instance_id_path, "values")
    if out is not None:
        ids = out.items
        if out.error:
            warnings.append(f"component {c.name!r}: instanceIdPath: {out.error}")
        elif len(ids) == n and all(isinstance(i, str) and i for i in ids):
            return list(ids)
        elif n:
            warnings.append(
                f"component {c.name!r}: instanceIdPath gave {len(ids)} id(s) for {n} location(s); ids taken from the locations"
            )
    if n <= 1:
        return [c.name] * n
    return _ids_from_locations([r.loc or () for r in rows])


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


def as_count(v: Any) -> int | None:
    """A replica count as upstream reads one: a non-negative integer, an integral float or a
    string of digits; None for anything else (booleans included). Validation uses the same
    rule to judge a definition's scale paths."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int) and v >= 0:
        return v
    if isinstance(v, float) and v >= 0 and v.is_integer():
        return int(v)
    if isinstance(v, str) and v.strip().isdigit():
        return int(v.strip())
    return None


_SCALE_FIELDS = {
    "replicas_path": "replicasPath",
    "min_replicas_path": "minReplicasPath",
    "max_replicas_path": "maxReplicasPath",
}


def _scale_values(
    c: Component, attr: str, n: int, batch: _Batch, warnings: list[str]
) -> list[int | None]:
    expr = getattr(c.scale, attr) if c.scale else None
    out = batch.get(expr, "values")
    if out is None or n == 0:
        return [None] * n
    name = _SCALE_FIELDS[attr]
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


# --------------------------------------------------------------------------- GPUs


def _quantity(v: Any) -> int:
    if isinstance(v, bool):
        return 0
    if isinstance(v, int | float):
        return int(v)
    if isinstance(v, str):
        try:
            return int(float(v))
        except ValueError:
            return 0
    return 0


def _container_gpus(c: Any) -> int:
    if not isinstance(c, dict):
        return 0
    return _resources_gpus(c.get("resources"))


def _resources_gpus(res: Any) -> int:
    if not isinstance(res, dict):
        return 0
    for key in ("limits", "requests"):
        q = res.get(key)
        if isinstance(q, dict) and GPU in q:
            return _quantity(q[GPU])
    return 0


def _pod_gpus(spec: Mapping[str, Any]) -> int:
    """GPUs one pod needs, the way the scheduler counts them: app containers plus restartable
    (sidecar) init containers run together; a plain init container runs alone beside the
    sidecars started before it; the pod needs the larger of the two."""
    containers = spec.get("containers")
    app = sum(_container_gpus(c) for c in containers) if isinstance(containers, list) else 0
    sidecars = init_peak = 0
    inits = spec.get("initContainers")
    for c in inits if isinstance(inits, list) else []:
        g = _container_gpus(c)
        if isinstance(c, dict) and c.get("restartPolicy") == "Always":
            sidecars += g
        else:
            init_peak = max(init_peak, g + sidecars)
    return max(app + sidecars, init_peak)


def _fragment_gpus(containers: Any, container: Any, resources: Any) -> int:
    if isinstance(containers, list):
        return sum(_container_gpus(c) for c in containers)
    if isinstance(container, dict):
        return _container_gpus(container)
    return _resources_gpus(resources)


# --------------------------------------------------------------------------- status


def _first(out: Outcome | None) -> Any:
    if out is None or out.error or not out.items:
        return None
    return out.items[0]


def _status(sd: StatusDefinition, batch: _Batch, warnings: list[str]) -> str:
    """The first status category (upstream order) whose matchers match; ``Undefined`` if none.

    Clauses of one matcher are ANDed, matchers of one category ORed, as upstream does."""
    phase_out = batch.get(sd.phase_path, "values")
    phase = _first(phase_out)
    conditions: dict[str, Mapping[str, Any]] = {}
    cond_out = batch.get(sd.conditions_path, "values")
    for out, what in ((phase_out, "phaseDefinition.path"), (cond_out, "conditionsDefinition.path")):
        if out is not None and out.error:
            warnings.append(f"status {what}: {out.error}")
    for item in cond_out.items if cond_out and not cond_out.error else []:
        for cond in item if isinstance(item, list) else [item]:
            if isinstance(cond, dict) and isinstance(cond.get(sd.type_field), str):
                conditions[cond[sd.type_field]] = cond  # a later duplicate type wins
    for key in STATUS_ORDER:
        for m in sd.mappings.get(key, ()):
            if m.by_phase is not None and m.by_phase != phase:
                continue
            if not all(
                _condition_holds(conditions, cm.type, cm.status, cm.reason, sd)
                for cm in m.by_conditions
            ):
                continue
            if m.by_expression is not None:
                got = _first(batch.get(_tostring(m.by_expression), "values"))
                if got is None or got != m.expected_result:
                    continue
            return key.capitalize()
    return UNDEFINED


def _condition_holds(
    conds: Mapping[str, Mapping[str, Any]],
    ctype: str,
    status: str | None,
    reason: str | None,
    sd: StatusDefinition,
) -> bool:
    cond = conds.get(ctype)
    if cond is None:
        return False
    if status is not None and cond.get(sd.status_field) != status:
        return False
    return not (reason is not None and cond.get(sd.reason_field) != reason)


def describe_json(w: Workload) -> dict[str, Any]:
    """The ``describe -o json`` shape: kind, name, namespace, status, gpus, components."""
    return {
        "apiVersion": w.gvk.api_version,
        "kind": w.gvk.kind,
        "name": w.name,
        "namespace": w.namespace,
        "definition": w.definition,
        "status": w.status,
        "gpus": w.gpus,
        "components": [
            {
                "name": c.name,
                "kind": str(c.kind) if c.kind and c.kind.kind else None,
                "owner": c.owner,
                "instances": [
                    {
                        "id": i.id,
                        "replicas": i.replicas,
                        **({"minReplicas": i.min_replicas} if i.min_replicas is not None else {}),
                        **({"maxReplicas": i.max_replicas} if i.max_replicas is not None else {}),
                        "gpusPerPod": i.gpus_per_pod,
                        "gpus": i.gpus,
                        "location": jqexpr.pointer(i.location) if i.location is not None else None,
                    }
                    for i in c.instances
                ],
            }
            for c in w.components
        ],
        "warnings": list(w.warnings),
    }
