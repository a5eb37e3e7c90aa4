"""``describe KIND/NAME``: one workload's view (the ``-o json`` shape): its tree with the pods
placed, phases, age, and the CPU and memory its pod templates request (Kubernetes
quantities)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from decimal import Decimal, InvalidOperation
from typing import Any

from webhook.cli.livedescribe_pods import place, pod_ready, template
from webhook.cluster.reads import Resource
from webhook.jq.engine import Engine
from webhook.karta.fields import Role
from webhook.karta.model import Karta
from webhook.karta.statusmodel import STATUS_ORDER, UNDEFINED
from webhook.workload import phase as status
from webhook.workload.locator import resolve

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


def origin(karta: Karta) -> str:
    return "cluster" if karta.source.startswith("cluster:") else "catalog"


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
            "list": sorted(
                (
                    {
                        "name": str((p.get("metadata") or {}).get("name") or ""),
                        "node": (p.get("spec") or {}).get("nodeName") or None,
                        "ready": pod_ready(p),
                    }
                    for p in ps
                ),
                key=lambda e: str(e["name"]),
            ),
        }

    rows: list[dict[str, Any]] = []
    total_replicas = total_gpus = 0
    total_cpu = total_memory = Decimal(0)
    components = []
    for c in w.components:
        instances = []
        for i in c.instances:
            _, spec = template(i, obj)
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
