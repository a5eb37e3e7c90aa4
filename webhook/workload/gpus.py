"""How many GPUs a pod asks for, counted the way the scheduler counts them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

GPU = "nvidia.com/gpu"


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


def resources_gpus(res: Any) -> int:
    """GPUs of a container's ``resources``: limits, else requests."""
    if not isinstance(res, dict):
        return 0
    for key in ("limits", "requests"):
        q = res.get(key)
        if isinstance(q, dict) and GPU in q:
            return _quantity(q[GPU])
    return 0


def container_gpus(c: Any) -> int:
    if not isinstance(c, dict):
        return 0
    return resources_gpus(c.get("resources"))


def pod_gpus(spec: Mapping[str, Any]) -> int:
    """GPUs one pod needs, the way the scheduler counts them: app containers plus restartable
    (sidecar) init containers run together; a plain init container runs alone beside the
    sidecars started before it; the pod needs the larger of the two."""
    containers = spec.get("containers")
    app = sum(container_gpus(c) for c in containers) if isinstance(containers, list) else 0
    sidecars = init_peak = 0
    inits = spec.get("initContainers")
    for c in inits if isinstance(inits, list) else []:
        g = container_gpus(c)
        if isinstance(c, dict) and c.get("restartPolicy") == "Always":
            sidecars += g
        else:
            init_peak = max(init_peak, g + sidecars)
    return max(app + sidecars, init_peak)


def fragment_gpus(containers: Any, container: Any, resources: Any) -> int:
    """GPUs from a fragmented definition's read fields, most precise first."""
    if isinstance(containers, list):
        return sum(container_gpus(c) for c in containers)
    if isinstance(container, dict):
        return container_gpus(container)
    return resources_gpus(resources)
