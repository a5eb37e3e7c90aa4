"""``describe KIND/NAME``: which pods are a workload's (their owner chains) and under which
component instance each goes (the definition's pod selector, else the instance's pod template
labels, else the root)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from webhook.base.jsonpointer import getpath
from webhook.cluster.reads import Cluster, ClusterError, NotFound
from webhook.jq.engine import Engine
from webhook.karta.fields import Role
from webhook.karta.model import Component, Karta
from webhook.workload.model import Instance, Workload

#: How deep an owner-reference chain is followed from a pod.
MAX_OWNER_DEPTH = 8


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


def template(i: Instance, obj: Any) -> tuple[dict[str, Any], Any]:
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
            tlabels, _ = template(inst, obj)
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
