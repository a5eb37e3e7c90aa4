"""``describe KIND/NAME``: a live workload as its definition sees it, with its pods.

The kind is found through API discovery as kubectl takes it (kind, plural, singular or short
name, ``NAME.GROUP``); its definition comes from the bundled catalog (and ``--catalog``
directories) with the cluster's Karta objects on top, as in the server. The object is read, its
pods are those of its namespace whose owner references lead to it (through Jobs, ReplicaSets
or any other owner, read by GET), and each pod is placed under a component instance: by the
definition's pod selector (``componentTypeSelector``, ``componentInstanceSelector``) when it has
one, else by the labels of the instance's pod template (all of them on the pod), else under the
root. Only ``get`` and ``list`` requests are sent.

:func:`describe_one` and :func:`describe_all` return plain data (the ``-o json|yaml`` shapes,
documented in README.md); :func:`as_text` and :func:`list_text` render them for people.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from webhook.admission.manifests import KARTA_RESOURCE
from webhook.admission.registry import Registry
from webhook.base.gvk import GVK
from webhook.cluster.kartasync import load_cluster_karta
from webhook.cluster.reads import Cluster, ClusterError, NotFound, Resource
from webhook.jq.engine import Engine, getpath
from webhook.karta.fields import Role
from webhook.karta.model import API_VERSION, GROUP, KIND, VERSION, Component, Karta
from webhook.karta.statusmodel import STATUS_ORDER, UNDEFINED
from webhook.workload import phase as status
from webhook.workload.resolve import Instance, Workload, resolve

#: How deep an owner-reference chain is followed from a pod.
MAX_OWNER_DEPTH = 8


# --------------------------------------------------------------------------- definitions


def cluster_registry(
    cluster: Cluster, base: Registry, engine: Engine, warnings: list[str]
) -> Registry:
    """``base`` with the cluster's usable Kartas on top (the oldest wins for one kind, as in
    the server). A cluster without the Karta CRD, or where Kartas cannot be listed, leaves
    ``base`` (with a warning for the latter)."""
    path = f"/apis/{GROUP}/{VERSION}/{KARTA_RESOURCE}"
    try:
        objs = list(cluster.items(path))
    except NotFound:
        return base
    except ClusterError as e:
        if "cannot reach" in str(e):
            raise
        warnings.append(f"cluster Kartas not read ({e}); using the catalog only")
        return base

    def age_key(o: Mapping[str, Any]) -> tuple[str, str]:
        meta = o.get("metadata") or {}
        return str(meta.get("creationTimestamp") or ""), str(meta.get("name") or "")

    loaded: list[Karta] = []
    for obj in sorted(objs, key=age_key, reverse=True):  # later wins: the oldest goes last
        karta, errors = load_cluster_karta({**obj, "apiVersion": API_VERSION, "kind": KIND}, engine)
        if karta is not None:
            loaded.append(karta)
        else:
            name = (obj.get("metadata") or {}).get("name")
            warnings.append(f"cluster Karta {name} not used: {'; '.join(errors[:2])}")
    return base.merged(loaded)


def origin(karta: Karta) -> str:
    return "cluster" if karta.source.startswith("cluster:") else "catalog"


def gvk_of(r: Resource) -> GVK:
    return GVK(r.group, r.version, r.kind)


def choose(cluster: Cluster, token: str, registry: Registry) -> tuple[Resource, Karta | None]:
    """The resource ``token`` names and its definition: among the matches, one with a
    definition first, then the group's preferred version, then discovery order."""
    found = cluster.find(token)
    if not found:
        raise ClusterError(f'the server doesn\'t have a resource type "{token}"')
    ranked: list[tuple[int, Resource]] = sorted(
        enumerate(found),
        key=lambda p: (registry.lookup(gvk_of(p[1])) is None, not p[1].preferred, p[0]),
    )
    r = ranked[0][1]
    return r, registry.lookup(gvk_of(r))


def no_definition(r: Resource) -> str:
    return f"no definition for {gvk_of(r)} (no Karta in the catalog or the cluster)"


# --------------------------------------------------------------------------- pods


class Owners:
    """Which objects each pod's owner chain reaches (uids), reading owners by GET, cached."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self._owners: dict[tuple[str, str, str, str], list[Mapping[str, Any]] | None] = {}

    def _refs_of(self, namespace: str, ref: Mapping[str, Any]) -> list[Mapping[str, Any]] | None:
        key = (
            namespace,
            str(ref.get("apiVersion") or ""),
            str(ref.get("kind") or ""),
            str(ref.get("name") or ""),
        )
        if key in self._owners:
            return self._owners[key]
        refs: list[Mapping[str, Any]] | None = None
        try:
            r = self.cluster.resource_for(key[1], key[2])
            if r is not None:
                obj = self.cluster.get(f"{r.collection(namespace)}/{key[3]}")
                meta = (obj or {}).get("metadata") or {}
                if meta.get("uid") == ref.get("uid"):
                    refs = list(meta.get("ownerReferences") or [])
        except (NotFound, ClusterError):
            refs = None  # an owner we cannot read ends the chain
        self._owners[key] = refs
        return refs

    def reaches(self, pod: Mapping[str, Any], uid: str) -> bool:
        meta = pod.get("metadata") or {}
        namespace = str(meta.get("namespace") or "")
        frontier: list[Mapping[str, Any]] = list(meta.get("ownerReferences") or [])
        seen: set[str] = set()
        for _ in range(MAX_OWNER_DEPTH):
            if not frontier:
                return False
            if any(ref.get("uid") == uid for ref in frontier):
                return True
            nxt: list[Mapping[str, Any]] = []
            for ref in frontier:
                ref_uid = str(ref.get("uid") or "")
                if ref_uid in seen:
                    continue
                seen.add(ref_uid)
                nxt.extend(self._refs_of(namespace, ref) or [])
            frontier = nxt
        return False


def pod_ready(pod: Mapping[str, Any]) -> bool:
    for c in (pod.get("status") or {}).get("conditions") or []:
        if isinstance(c, Mapping) and c.get("type") == "Ready":
            return c.get("status") == "True"
    return False


def _first(engine: Engine, expr: str, obj: Any) -> Any:
    out = engine.values(expr, obj)
    return out.items[0] if out.ok and out.items else None


def _template(i: Instance, obj: Any) -> tuple[dict[str, Any], Any]:
    """The instance's pod template labels and pod spec (either may be empty)."""
    if i.location is None:
        return {}, None
    value = getpath(obj, i.location)
    if not isinstance(value, Mapping):
        return {}, None
    if isinstance(value.get("containers"), list):  # a pod spec
        return {}, value
    labels = (value.get("metadata") or {}).get("labels")
    spec = value.get("spec")
    return (dict(labels) if isinstance(labels, Mapping) else {}), spec


def type_selected(comp: Component, labels: Mapping[str, Any], first: Callable[[str], Any]) -> bool:
    """Whether a pod with ``labels`` is of ``comp``'s type by its ``componentTypeSelector``:
    every condition given holds (upstream ANDs them): ``keyPath`` (``first`` evaluates it on
    the pod) yields ``value``, or anything non-null without one; each ``matchLabels`` entry
    is one of the pod's labels. A component without a selector selects nothing this way."""
    key, want = comp.expr(Role.TYPE_KEY), comp.type_labels
    if not key and want is None:
        return False
    if want is not None and not all(labels.get(k) == v for k, v in want.items()):
        return False
    if key:
        got = first(key)
        return got is not None if comp.type_value is None else got == comp.type_value
    return True


def place(
    pod: Mapping[str, Any],
    karta: Karta,
    w: Workload,
    obj: Any,
    engine: Engine,
) -> tuple[str, str | None]:
    """The component and instance id a pod belongs to (instance None: the component itself)."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    by_name = {c.name: c for c in w.components}
    typed: list[str] = []
    for comp in karta.components:
        if type_selected(comp, labels, lambda expr: _first(engine, expr, pod)):
            typed.append(comp.name)
    candidates = typed or [c.name for c in karta.components]
    for comp in karta.components:
        if comp.name not in candidates or comp.name not in by_name:
            continue
        sel = comp.expr(Role.INSTANCE_SELECTOR)
        if sel:
            got = _first(engine, sel, pod)
            ids = {i.id for i in by_name[comp.name].instances}
            if got is not None and str(got) in ids:
                return comp.name, str(got)
    best: tuple[int, str, str | None] | None = None
    for name in candidates:
        view = by_name.get(name)
        for inst in view.instances if view else ():
            tlabels, _ = _template(inst, obj)
            fits = tlabels and all(labels.get(k) == v for k, v in tlabels.items())
            if fits and (best is None or len(tlabels) > best[0]):
                best = (len(tlabels), name, inst.id)
    if best is not None:
        return best[1], best[2]
    if typed:
        view = by_name.get(typed[0])
        if view is not None and len(view.instances) == 1:
            return view.name, view.instances[0].id
        return typed[0], None
    root = karta.root.name
    view = by_name.get(root)
    if view is not None and len(view.instances) == 1:
        return root, view.instances[0].id
    return root, None


# --------------------------------------------------------------------------- quantities


_SUFFIX = {
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal(10**3),
    "M": Decimal(10**6),
    "G": Decimal(10**9),
    "T": Decimal(10**12),
    "P": Decimal(10**15),
    "E": Decimal(10**18),
    "Ki": Decimal(2**10),
    "Mi": Decimal(2**20),
    "Gi": Decimal(2**30),
    "Ti": Decimal(2**40),
    "Pi": Decimal(2**50),
    "Ei": Decimal(2**60),
}


def quantity(v: Any) -> Decimal:
    """A Kubernetes quantity (``500m``, ``4Gi``, ``1e9``, 2) as a number; 0 when unreadable."""
    if isinstance(v, bool):
        return Decimal(0)
    if isinstance(v, int | float):
        return Decimal(str(v))
    if not isinstance(v, str):
        return Decimal(0)
    s = v.strip()
    for suffix in sorted(_SUFFIX, key=len, reverse=True):
        if suffix and s.endswith(suffix):
            try:
                return Decimal(s[: -len(suffix)]) * _SUFFIX[suffix]
            except InvalidOperation:
                return Decimal(0)
    try:
        return Decimal(s)
    except InvalidOperation:
        return Decimal(0)


def _container_request(c: Any, name: str) -> Decimal:
    res = c.get("resources") if isinstance(c, Mapping) else None
    if not isinstance(res, Mapping):
        return Decimal(0)
    for key in ("requests", "limits"):  # a limit alone is also the request
        q = res.get(key)
        if isinstance(q, Mapping) and name in q:
            return quantity(q[name])
    return Decimal(0)


def pod_request(spec: Any, name: str) -> Decimal:
    """A pod's request of ``name`` as the scheduler counts it (the same rule as
    :func:`webhook.workload.gpus.pod_gpus`: app containers and sidecars, or the largest init step)."""
    if not isinstance(spec, Mapping):
        return Decimal(0)
    containers = spec.get("containers")
    listed = containers if isinstance(containers, list) else []
    app = sum((_container_request(c, name) for c in listed), Decimal(0))
    sidecars = init_peak = Decimal(0)
    inits = spec.get("initContainers")
    for c in inits if isinstance(inits, list) else []:
        q = _container_request(c, name)
        if isinstance(c, Mapping) and c.get("restartPolicy") == "Always":
            sidecars += q
        else:
            init_peak = max(init_peak, q + sidecars)
    return max(app + sidecars, init_peak)


def cpu_text(v: Decimal) -> str:
    if v == 0:
        return "0"
    if v == v.to_integral_value():
        return str(int(v))
    return f"{int((v * 1000).to_integral_value())}m"


def memory_text(v: Decimal) -> str:
    if v == 0:
        return "0"
    for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
        unit = _SUFFIX[suffix]
        if v >= unit:
            n = v / unit
            text = f"{n:.1f}".rstrip("0").rstrip(".")
            return f"{text}{suffix}"
    return str(int(v))


# --------------------------------------------------------------------------- the view


def age(created: str, now: datetime | None = None) -> str:
    """``creationTimestamp`` as kubectl prints an age (``45s``, ``12m``, ``3h``, ``5d``)."""
    try:
        t = datetime.fromisoformat(created.replace("Z", "+00:00"))
    except ValueError:
        return "<unknown>"
    secs = int(((now or datetime.now(UTC)) - t).total_seconds())
    secs = max(secs, 0)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if secs >= size * (2 if unit != "m" else 1):
            return f"{secs // size}{unit}"
    return f"{secs}s"


def phases(karta: Karta, obj: Any, engine: Engine, warnings: list[str]) -> list[str]:
    """Every status category whose mappings match (upstream order), not just the first."""
    sd = karta.root.status
    if sd is None:
        return []
    phase_expr = karta.root.expr(Role.PHASE)
    cond_expr = karta.root.expr(Role.CONDITIONS)
    phase_out = engine.values(phase_expr, obj) if phase_expr else None
    cond_out = engine.values(cond_expr, obj) if cond_expr else None
    out: list[str] = []
    for key in STATUS_ORDER:
        if key not in sd.mappings:
            continue
        one = dataclasses.replace(sd, mappings={key: sd.mappings[key]})
        got = status.category(
            one, phase_out, cond_out, lambda e: engine.values(e, obj), warnings if not out else []
        )
        if got != UNDEFINED:
            out.append(got)
    return out


def view(
    r: Resource,
    karta: Karta,
    obj: dict[str, Any],
    pods: Sequence[Mapping[str, Any]],
    engine: Engine,
    warnings: Sequence[str] = (),
) -> dict[str, Any]:
    """The describe view of ``obj`` (the ``-o json`` shape) with ``pods``, the pods that are
    its own."""
    obj = {**obj, "apiVersion": r.group_version, "kind": r.kind}
    w = resolve(karta, obj, engine)
    notes = list(warnings) + list(w.warnings)
    matched = phases(karta, obj, engine, notes)
    meta = obj.get("metadata") or {}
    placed: dict[tuple[str, str | None], list[Mapping[str, Any]]] = {}
    for pod in pods:
        placed.setdefault(place(pod, karta, w, obj, engine), []).append(pod)

    def pod_summary(ps: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        nodes = sorted({str((p.get("spec") or {}).get("nodeName")) for p in ps} - {"None", ""})
        return {
            "ready": sum(1 for p in ps if pod_ready(p)),
            "total": len(ps),
            "nodes": nodes,
            "names": sorted(str((p.get("metadata") or {}).get("name") or "") for p in ps),
        }

    rows: list[dict[str, Any]] = []
    total_replicas = total_gpus = 0
    total_cpu = total_memory = Decimal(0)
    components = []
    for c in w.components:
        instances = []
        for i in c.instances:
            _, spec = _template(i, obj)
            cpu = pod_request(spec, "cpu") * i.replicas
            mem = pod_request(spec, "memory") * i.replicas
            instances.append(
                {
                    "id": i.id,
                    "replicas": i.replicas,
                    "gpusPerPod": i.gpus_per_pod,
                    "gpus": i.gpus,
                    "cpu": cpu_text(cpu),
                    "memory": memory_text(mem),
                    "pods": pod_summary(placed.get((c.name, i.id), [])),
                }
            )
            rows.append(
                {
                    "component": c.name if c.name == i.id else f"{c.name}/{i.id}",
                    "replicas": i.replicas,
                    "gpus": i.gpus,
                    "cpu": cpu_text(cpu),
                    "memory": memory_text(mem),
                }
            )
            total_replicas += i.replicas
            total_gpus += i.gpus
            total_cpu += cpu
            total_memory += mem
        entry: dict[str, Any] = {
            "name": c.name,
            "kind": str(c.kind) if c.kind and c.kind.kind else None,
            "owner": c.owner,
            "instances": instances,
        }
        own = placed.get((c.name, None), [])
        if own:
            entry["pods"] = pod_summary(own)
        components.append(entry)
    return {
        "apiVersion": r.group_version,
        "kind": r.kind,
        "name": str(meta.get("name") or ""),
        "namespace": str(meta.get("namespace") or ""),
        "uid": str(meta.get("uid") or ""),
        "created": str(meta.get("creationTimestamp") or ""),
        "age": age(str(meta.get("creationTimestamp") or "")),
        "definition": {"name": karta.name, "origin": origin(karta), "source": karta.source},
        "phases": matched,
        "phase": matched[0] if matched else UNDEFINED,
        "pods": pod_summary(list(pods)),
        "gpus": w.gpus,
        "components": components,
        "resources": {
            "rows": rows,
            "total": {
                "replicas": total_replicas,
                "gpus": total_gpus,
                "cpu": cpu_text(total_cpu),
                "memory": memory_text(total_memory),
            },
        },
        "warnings": notes,
    }


# --------------------------------------------------------------------------- commands


def _namespace_pods(cluster: Cluster, namespace: str | None) -> list[dict[str, Any]]:
    path = f"/api/v1/namespaces/{namespace}/pods" if namespace else "/api/v1/pods"
    try:
        return list(cluster.items(path))
    except NotFound:
        return []


def pods_of(
    obj: Mapping[str, Any], pods: Sequence[dict[str, Any]], owners: Owners
) -> list[dict[str, Any]]:
    meta = obj.get("metadata") or {}
    uid = str(meta.get("uid") or "")
    namespace = meta.get("namespace")
    return [
        p
        for p in pods
        if uid
        and (p.get("metadata") or {}).get("namespace", namespace) == namespace
        and owners.reaches(p, uid)
    ]


def describe_one(
    cluster: Cluster,
    token: str,
    name: str,
    namespace: str,
    registry: Registry,
    engine: Engine,
) -> dict[str, Any]:
    """The view of one workload; :class:`ClusterError` (``finding`` set for a missing object
    or definition) when there is none to show."""
    warnings: list[str] = []
    registry = cluster_registry(cluster, registry, engine, warnings)
    r, karta = choose(cluster, token, registry)
    if karta is None:
        raise ClusterError(no_definition(r), finding=True)
    path = f"{r.collection(namespace)}/{name}"
    try:
        obj = cluster.get(path)
    except NotFound as e:
        where = f' in namespace "{namespace}"' if r.namespaced else ""
        raise ClusterError(
            f'{r.kind} "{name}" not found{where} ({r.plural}.{r.group or "core"})', finding=True
        ) from e
    if not isinstance(obj, dict):
        raise ClusterError(f"GET {path}: not an object")
    ns = str((obj.get("metadata") or {}).get("namespace") or "")
    pods = pods_of(obj, _namespace_pods(cluster, ns) if ns else [], Owners(cluster))
    return view(r, karta, obj, pods, engine, warnings)


def describe_all(
    cluster: Cluster,
    token: str,
    namespace: str | None,
    registry: Registry,
    engine: Engine,
) -> dict[str, Any]:
    """Every workload of a kind, in ``namespace`` (None: all namespaces): ``{items, count}``
    with one short row each."""
    warnings: list[str] = []
    registry = cluster_registry(cluster, registry, engine, warnings)
    r, karta = choose(cluster, token, registry)
    if karta is None:
        raise ClusterError(no_definition(r), finding=True)
    try:
        objs = list(cluster.items(r.collection(namespace)))
    except NotFound:
        objs = []  # the kind went away between discovery and the list
    all_pods = _namespace_pods(cluster, namespace) if objs and r.namespaced else []
    owners = Owners(cluster)
    items = []
    for obj in sorted(
        objs,
        key=lambda o: (
            str((o.get("metadata") or {}).get("namespace") or ""),
            str((o.get("metadata") or {}).get("name") or ""),
        ),
    ):
        v = view(r, karta, obj, pods_of(obj, all_pods, owners), engine)
        items.append(
            {
                "namespace": v["namespace"],
                "name": v["name"],
                "phase": v["phase"],
                "phases": v["phases"],
                "ready": v["pods"]["ready"],
                "pods": v["pods"]["total"],
                "replicas": v["resources"]["total"]["replicas"],
                "gpus": v["gpus"],
                "age": v["age"],
            }
        )
    return {
        "apiVersion": r.group_version,
        "kind": r.kind,
        "definition": {"name": karta.name, "origin": origin(karta), "source": karta.source},
        "items": items,
        "count": len(items),
        "warnings": warnings,
    }


# --------------------------------------------------------------------------- text


def _table(rows: Sequence[Sequence[str]], indent: str = "") -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [
        indent + "  ".join(cell.ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip()
        for r in rows
    ]


def _pods_text(p: Mapping[str, Any]) -> str:
    nodes = p.get("nodes") or []
    where = f", nodes {', '.join(nodes)}" if nodes else ""
    return f"{p['ready']}/{p['total']} ready{where}"


def as_text(v: Mapping[str, Any]) -> str:
    """The ``describe KIND/NAME`` text: header, tree, phase line, resources table."""
    d = v["definition"]
    lines = [
        f"{v['kind']}/{v['name']}",
        f"  Namespace:   {v['namespace'] or '(cluster)'}",
        f"  Definition:  {d['name']} ({d['origin']})",
        f"  Age:         {v['age']}",
        "",
        f"{v['kind']}/{v['name']}: {_pods_text(v['pods'])}, {v['gpus']} GPUs",
    ]
    children: dict[str | None, list[Mapping[str, Any]]] = {}
    for c in v["components"]:
        children.setdefault(c["owner"], []).append(c)
    listed: set[str] = set()

    def walk(owner: str | None, indent: str, seen: set[str]) -> None:
        for c in children.get(owner, []):
            if c["name"] in seen:
                continue
            listed.add(c["name"])
            kind = f" ({c['kind'].split()[-1]})" if c["kind"] else ""
            own = f": {_pods_text(c['pods'])}" if c.get("pods") else ""
            lines.append(f"{indent}{c['name']}{kind}{own}")
            for i in c["instances"]:
                alone = i["id"] == c["name"] and len(c["instances"]) == 1
                label = "(pods)" if alone else i["id"]
                lines.append(
                    f"{indent}  {label}: replicas {i['replicas']}, {_pods_text(i['pods'])}, "
                    f"{i['gpus']} GPUs"
                )
            walk(c["name"], indent + "  ", seen | {c["name"]})

    walk(None, "  ", set())
    for c in v["components"]:
        if c["name"] not in listed:
            lines.append(f"  {c['name']} (owner {c['owner']!r} not found)")
    lines += ["", f"Phase: {', '.join(v['phases']) if v['phases'] else UNDEFINED}", ""]
    table = [["COMPONENT", "REPLICAS", "GPU", "CPU", "MEMORY"]]
    for row in v["resources"]["rows"]:
        table.append(
            [row["component"], str(row["replicas"]), str(row["gpus"]), row["cpu"], row["memory"]]
        )
    t = v["resources"]["total"]
    table.append(["TOTAL", str(t["replicas"]), str(t["gpus"]), t["cpu"], t["memory"]])
    lines += _table(table)
    for w in v["warnings"]:
        lines.append(f"warning: {w}")
    return "\n".join(lines)


def list_text(v: Mapping[str, Any], all_namespaces: bool) -> str:
    """The ``describe KIND`` text: one line per workload."""
    head = ["NAME", "PHASE", "READY", "GPUS", "AGE"]
    rows: list[list[str]] = [(["NAMESPACE"] if all_namespaces else []) + head]
    for i in v["items"]:
        rows.append(
            ([i["namespace"]] if all_namespaces else [])
            + [
                i["name"],
                ",".join(i["phases"]) or UNDEFINED,
                f"{i['ready']}/{i['pods']}",
                str(i["gpus"]),
                i["age"],
            ]
        )
    return "\n".join(_table(rows))


__all__ = [
    "ClusterError",
    "as_text",
    "describe_all",
    "describe_one",
    "list_text",
]
