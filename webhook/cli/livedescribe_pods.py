"""``describe KIND/NAME``: which pods are a workload's (their owner chains); under which
component instance each goes is :func:`webhook.workload.podplace.place`'s."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.cluster.reads import Cluster, ClusterError, NotFound
from webhook.workload.podplace import place, template, type_selected

__all__ = ["MAX_OWNER_DEPTH", "Owners", "place", "pod_ready", "template", "type_selected"]

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
