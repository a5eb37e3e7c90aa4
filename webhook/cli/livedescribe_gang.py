"""``describe KIND/NAME``: the workload's native gangs (docs/policy.md, "Gang scheduling"):
each group its definition gives (in the mode its pods were labelled with, else ``native``),
the ``minCount`` the definition says, and the cluster's PodGroup of that name: its
``minCount`` and its ``PodGroupInitiallyScheduled`` condition."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from webhook.cluster.reads import Cluster, ClusterError, NotFound
from webhook.jq.engine import Engine
from webhook.karta.model import Karta
from webhook.workload.gang import GANG_LABEL, MODES, groups
from webhook.workload.locator import resolve

CONDITION = "PodGroupInitiallyScheduled"


def _condition(pg: Mapping[str, Any]) -> dict[str, str] | None:
    for c in (pg.get("status") or {}).get("conditions") or []:
        if isinstance(c, Mapping) and c.get("type") == CONDITION:
            return {k: str(c.get(k) or "") for k in ("status", "reason", "message")}
    return None


def gang_view(
    cluster: Cluster,
    karta: Karta,
    obj: Mapping[str, Any],
    pods: Sequence[Mapping[str, Any]],
    engine: Engine,
) -> list[dict[str, Any]]:
    """One entry per group: ``name``, ``key``, ``minCount`` (the definition's), and
    ``podGroup`` (None: not there, or the API is not served): its ``minCount`` and
    ``initiallyScheduled`` condition."""
    modes = {str(((p.get("metadata") or {}).get("labels") or {}).get(GANG_LABEL)) for p in pods}
    mode = "native-workload" if "native-workload" in modes else MODES[0]
    meta = obj.get("metadata") or {}
    uid, namespace = str(meta.get("uid") or ""), str(meta.get("namespace") or "")
    out = []
    for g in groups(karta, resolve(karta, obj, engine), uid, mode):
        pg: Any = None
        try:
            pg = cluster.get(
                f"/apis/scheduling.k8s.io/v1beta1/namespaces/{namespace}/podgroups/{g.name}"
            )
        except (NotFound, ClusterError):
            pg = None
        got = None
        if isinstance(pg, Mapping):
            gang = ((pg.get("spec") or {}).get("schedulingPolicy") or {}).get("gang") or {}
            got = {"minCount": gang.get("minCount"), "initiallyScheduled": _condition(pg)}
        out.append({"name": g.name, "key": g.key, "minCount": g.min_count, "podGroup": got})
    return out


def gang_text(gangs: Sequence[Mapping[str, Any]]) -> list[str]:
    """The ``Gangs:`` lines of the text view ([] without groups)."""
    if not gangs:
        return []
    lines = ["", "Gangs:"]
    for g in gangs:
        pg = g["podGroup"]
        if pg is None:
            state = "no PodGroup"
        else:
            c = pg["initiallyScheduled"]
            cond = f"{CONDITION}={c['status']}" + (f" ({c['reason']})" if c["reason"] else "")
            state = f"PodGroup minCount {pg['minCount']}, " + (cond if c else f"no {CONDITION} yet")
        lines.append(f"  {g['key']}: {g['name']}, minCount {g['minCount']}; {state}")
    return lines
