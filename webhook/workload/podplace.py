"""Which component and instance of a workload a pod belongs to: the definition's pod
selector (``componentTypeSelector``, ``componentInstanceSelector``) evaluated on the pod, else
the instance whose pod template labels the pod carries, else the root. Pure: the pod, the
definition, the resolved workload and its object in; names out (``describe`` and the gang's
Pod path share it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from webhook.base.pointers import getpath
from webhook.jq.engine import Engine
from webhook.karta.fields import Role
from webhook.karta.model import Component, Karta
from webhook.workload.model import Instance, Workload


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
