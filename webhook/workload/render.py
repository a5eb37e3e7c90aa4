"""The workload tree as ``describe`` shows it: as text for people, as JSON for programs.

Both shapes are rendered from the same :class:`~webhook.workload.model.Workload`; a new output
format is one more function here (and its name in the CLI's choices).
"""

from __future__ import annotations

from typing import Any

from webhook.base.pointers import pointer
from webhook.workload.model import ComponentView, Workload


def as_json(w: Workload) -> dict[str, Any]:
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
                        "location": pointer(i.location) if i.location is not None else None,
                    }
                    for i in c.instances
                ],
            }
            for c in w.components
        ],
        "warnings": list(w.warnings),
    }


def as_text(w: Workload) -> str:
    """The ``describe`` text: the workload, then its component tree by owner, instances with
    replicas and GPUs, then warnings."""
    lines = [
        f"{w.gvk.kind} {w.namespace + '/' if w.namespace else ''}{w.name}",
        f"  definition: {w.definition}",
        f"  status:     {w.status}",
        f"  gpus:       {w.gpus}",
        "  components:",
    ]
    children: dict[str | None, list[ComponentView]] = {}
    for c in w.components:
        children.setdefault(c.owner, []).append(c)
    listed: set[str] = set()

    def walk(owner: str | None, indent: str, seen: set[str]) -> None:
        for c in children.get(owner, []):
            if c.name in seen:
                continue
            listed.add(c.name)
            kind = f" ({c.kind.kind})" if c.kind and c.kind.kind else ""
            lines.append(f"{indent}- {c.name}{kind}")
            for i in c.instances:
                extra = ""
                if i.min_replicas is not None or i.max_replicas is not None:
                    lo = i.min_replicas if i.min_replicas is not None else "-"
                    hi = i.max_replicas if i.max_replicas is not None else "-"
                    extra = f" (min {lo}, max {hi})"
                lines.append(
                    f"{indent}    instance {i.id}: replicas {i.replicas}{extra}, "
                    f"gpus {i.gpus} ({i.gpus_per_pod}/pod)"
                )
            walk(c.name, indent + "    ", seen | {c.name})

    walk(None, "    ", set())
    for c in w.components:  # components whose owner chain is broken still show up
        if c.name not in listed:
            lines.append(f"    - {c.name} (owner {c.owner!r} not found)")
    for warning in w.warnings:
        lines.append(f"  warning: {warning}")
    return "\n".join(lines)
