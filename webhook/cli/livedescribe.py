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
documented in README.md); :mod:`webhook.cli.livedescribe_text` renders them for people. The
pods and where they go: :mod:`webhook.cli.livedescribe_pods`; one workload's view:
:mod:`webhook.cli.livedescribe_view`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from webhook.admission.manifests import KARTA_RESOURCE
from webhook.admission.registry import Registry
from webhook.base.gvk import GVK
from webhook.cli.livedescribe_gang import gang_view
from webhook.cli.livedescribe_pods import Owners
from webhook.cli.livedescribe_view import origin, view
from webhook.cluster.kartasync import load_cluster_karta
from webhook.cluster.reads import Cluster, ClusterError, NotFound, Resource
from webhook.jq.engine import Engine
from webhook.karta.model import API_VERSION, GROUP, KIND, VERSION, Karta

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
    got = view(r, karta, obj, pods, engine, warnings)
    got["gangs"] = gang_view(cluster, karta, {**obj, "kind": r.kind}, pods, engine)
    return got


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


__all__ = [
    "ClusterError",
    "describe_all",
    "describe_one",
]
