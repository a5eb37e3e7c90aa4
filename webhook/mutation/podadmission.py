"""A bare Pod is not a template: the API server has already admitted part of it when a mutating
webhook sees it, and it judges the patched Pod by rules a template never meets. This module
makes a plan on a Pod fit those rules, so that a policy that loads never yields a Pod the API
server refuses.

* **Priority follows its class (CREATE).** The ``Priority`` admission plugin runs before the
  webhooks: it fills ``spec.priority`` (and ``spec.preemptionPolicy``) from the Pod's class,
  or from none (priority 0). When the plan sets ``priorityClassName``, those values belong to
  the old class, and the plugin, run again on the patched Pod, refuses it ("the integer value
  of priority (0) must not be provided in pod spec"). The plan removes both, so the plugin
  computes them from the class the policy set.
* **A Pod's spec is immutable (UPDATE).** A Pod's ``schedulerName``, ``priorityClassName`` and
  ``nodeSelector`` cannot change once it exists, and its tolerations can only be added to
  (``ValidatePodUpdate``). On UPDATE, a write the API server would refuse is left out with a
  warning: a denial could not change the Pod, only block whoever updates it (a controller
  removing its finalizer). Labels, annotations and added tolerations are still written.

Templates (Deployments, Jobs, every workload kind) are not Pods: their plans are unchanged.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.karta.fields import INJECTABLES
from webhook.mutation.plan import Plan

#: ``/spec/<field>`` of each field an admission plugin derives others from, and those
#: (:attr:`webhook.karta.fields.Injectable.derives`): priority from ``priorityClassName``, ...
DERIVED: Mapping[str, tuple[str, ...]] = {
    f"/spec/{i.in_pod_spec[0]}": i.derives[1]
    for i in INJECTABLES
    if i.derives is not None and i.in_pod_spec is not None
}


def is_pod(obj: Mapping[str, Any]) -> bool:
    """A core/v1 Pod (``apiVersion: v1``, ``kind: Pod``)."""
    return obj.get("kind") == "Pod" and obj.get("apiVersion") == "v1"


def fit_pod(obj: Mapping[str, Any], result: Plan, operation: str) -> Plan:
    """``result`` (a plan on ``obj``) made to fit what the API server does to a Pod on
    ``operation``; unchanged for anything but a Pod with ops to make."""
    if not result.ops or not is_pod(obj):
        return result
    spec = obj.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    if operation == "UPDATE":
        return _on_update(obj, result)
    written = [DERIVED[op["path"]] for op in result.ops if op["path"] in DERIVED]
    if written:
        gone = [
            {"op": "remove", "path": f"/spec/{k}"}
            for fields in written
            for k in fields
            if spec.get(k) is not None
        ]
        if gone:
            return Plan(
                [*result.ops, *gone],
                result.warnings,
                result.templates_mutated,
                result.templates_matched,
                result.failures,
            )
    return result


def _on_update(obj: Mapping[str, Any], result: Plan) -> Plan:
    kept: list[dict[str, Any]] = []
    left: list[str] = []
    for op in result.ops:
        path = op["path"]
        if not path.startswith("/spec/") or _adds_tolerations(op):
            kept.append(op)
        else:
            field = path[len("/spec/") :].split("/", 1)[0]
            if field not in left:
                left.append(field)
    if not left:
        return result
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    said = (
        f"Pod {name or '(unnamed)'}: spec.{', spec.'.join(left)} cannot change on an existing "
        "Pod (UPDATE); not written"
    )
    return Plan(
        kept,
        [*result.warnings, said],
        result.templates_mutated if kept else 0,
        result.templates_matched,
        result.failures,
    )


def _adds_tolerations(op: Mapping[str, Any]) -> bool:
    """An op that adds tolerations (a new list, or an entry appended): allowed on UPDATE;
    replacing one is not."""
    return op["op"] == "add" and op["path"] in ("/spec/tolerations", "/spec/tolerations/-")
