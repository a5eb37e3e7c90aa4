"""``describe KIND/NAME`` and ``describe KIND`` as text for people, from the plain data of
:mod:`webhook.cli.livedescribe`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from webhook.cli.livedescribe_gang import gang_text
from webhook.karta.statusmodel import UNDEFINED


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


#: Pods listed one a line under their instance; past this many, a count of the rest.
MAX_POD_LINES = 20


def _pod_lines(p: Mapping[str, Any] | None, indent: str) -> list[str]:
    """One line a pod: its name, the node it is bound to (or not bound) and whether Ready."""
    listed = list((p or {}).get("list") or [])
    lines = [
        f"{indent}{e['name']}: "
        + (f"node {e['node']}, " if e.get("node") else "not bound, ")
        + ("ready" if e.get("ready") else "not ready")
        for e in listed[:MAX_POD_LINES]
    ]
    if len(listed) > MAX_POD_LINES:
        lines.append(f"{indent}... and {len(listed) - MAX_POD_LINES} more pods")
    return lines


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
            lines.extend(_pod_lines(c.get("pods"), indent + "  "))
            for i in c["instances"]:
                alone = i["id"] == c["name"] and len(c["instances"]) == 1
                label = "(pods)" if alone else i["id"]
                lines.append(
                    f"{indent}  {label}: replicas {i['replicas']}, {_pods_text(i['pods'])}, "
                    f"{i['gpus']} GPUs"
                )
                lines.extend(_pod_lines(i["pods"], indent + "    "))
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
    lines += gang_text(v.get("gangs") or ())
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
