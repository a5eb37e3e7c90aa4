"""A workload's gangs as Kubernetes' own scheduler takes them (``scheduling.k8s.io/v1beta1``
PodGroup, ``gang.minCount``; a pod joins by ``spec.schedulingGroup.podGroupName``), from its
definition's ``optimizationInstructions.gangScheduling``, read as KAI's Karta grouper reads it:

* ``podGroup`` (it wins over ``podGroups``): one group, key its ``name``; with ``subGroups``
  it holds the pods of those components and their descendants, else every pod.
* ``podGroups`` (alpha): one group per entry, holding its members' pods (the member's
  component or a descendant, every ``filters`` expression ``true`` on the pod); a member with
  ``groupByKeyPaths`` makes one group per instance of its component (the paths' values on the
  pod name the instance: the group key is ``<name>-<value>``).
* none, when the rule asks for ``native-workload``: one group, key ``workload``, every pod.

``minCount`` is the group's pods by the replica paths: each instance's ``minReplicasPath``
where the kind is elastic, else its ``replicasPath``. Names are DNS-1123 labels made from the
workload's name, its UID and the group key (:func:`group_name`): the same on every replica of
the webhook, and a new workload of the same name never meets its predecessor's groups.
Pure: the definition, the resolved workload, its object and the pod in; groups out.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from webhook.jq.engine import Engine
from webhook.karta.model import Karta
from webhook.workload.model import Workload
from webhook.workload.podplace import place

#: The label the workload's own mutation stamps into its pod templates when a rule turns the
#: gang on (its value the mode); the Pod webhook is scoped to pods carrying it.
GANG_LABEL = "karta-webhook.run.ai/gang"
#: ``native``: groups from the definition's gang instructions; ``native-workload``: the same,
#: and one group of every pod for a kind whose definition has none.
MODES = ("native", "native-workload")
WHOLE = "workload"
#: the scheduler whose ``GangScheduling`` plugin reads PodGroups
DEFAULT_SCHEDULER = "default-scheduler"
_NAME_MAX = 63
_HASH = 10
_UNSAFE = re.compile(r"[^a-z0-9-]+")


@dataclass(frozen=True)
class Group:
    """One gang of a workload: its key (what the definition calls it), its PodGroup's name,
    the pods it waits for, and which components' pods join it (None: every pod)."""

    key: str
    name: str
    min_count: int
    components: frozenset[str] | None = None
    #: a replicated group's instance (the value its pods' key paths give), else None
    instance: str | None = None


def group_name(workload: str, uid: str, key: str) -> str:
    """``<workload>-<key>-<hash>``: a DNS-1123 label (at most 63 characters, lower case,
    alphanumerics and ``-``), the hash (of UID and key) keeping names of long or look-alike
    keys apart."""
    digest = hashlib.sha256(f"{uid}/{key}".encode()).hexdigest()[:_HASH]
    stem = _UNSAFE.sub("-", f"{workload}-{key}".lower()).strip("-")
    stem = re.sub(r"-{2,}", "-", stem)[: _NAME_MAX - _HASH - 1].strip("-")
    return f"{stem}-{digest}" if stem else f"pg-{digest}"


def _descendants(karta: Karta, names: frozenset[str]) -> frozenset[str]:
    """``names`` and every component whose owner chain reaches one of them."""
    owner = {c.name: c.owner_ref for c in karta.components}
    out = set(names)
    for c in karta.components:
        seen: set[str] = set()
        at: str | None = c.name
        while at is not None and at not in seen:
            if at in names:
                out.add(c.name)
                break
            seen.add(at)
            at = owner.get(at)
    return frozenset(out)


def _scale(w: Workload, components: frozenset[str] | None, instance: str | None = None) -> int:
    """Pods of ``components`` (None: all), of instance ``instance`` only when given: min
    replicas where the instance has them (elastic), else replicas."""
    total = 0
    for c in w.components:
        if components is not None and c.name not in components:
            continue
        for i in c.instances:
            if instance is not None and i.id != instance:
                continue
            total += i.min_replicas if i.min_replicas is not None else i.replicas
    return total


def has_instructions(karta: Karta) -> bool:
    g = karta.instructions.gang
    return g is not None and (g.pod_group is not None or bool(g.pod_groups))


def groups(karta: Karta, w: Workload, uid: str, mode: str = "native") -> tuple[Group, ...]:
    """The workload's gangs (none when its definition has no gang instructions and ``mode`` is
    ``native``); a group of no pods is left out (nothing to wait for)."""
    gang = karta.instructions.gang
    out: list[Group] = []
    if gang is not None and gang.pod_group is not None:
        pg = gang.pod_group
        subs = frozenset(s.component for s in pg.sub_groups)
        comps = _descendants(karta, subs) if subs else None
        key = pg.name or karta.root.name
        out.append(Group(key, group_name(w.name, uid, key), _scale(w, comps), comps))
    elif gang is not None and gang.pod_groups:
        for entry in gang.pod_groups:
            comps = _descendants(karta, frozenset(m.component for m in entry.members))
            if any(m.group_by_key_paths for m in entry.members):
                ids = sorted({i.id for c in w.components if c.name in comps for i in c.instances})
                for iid in ids:
                    key = f"{entry.name}-{iid}"
                    n = _scale(w, comps, iid)
                    out.append(Group(key, group_name(w.name, uid, key), n, comps, iid))
            else:
                out.append(
                    Group(entry.name, group_name(w.name, uid, entry.name), _scale(w, comps), comps)
                )
    elif mode == "native-workload":
        out.append(Group(WHOLE, group_name(w.name, uid, WHOLE), _scale(w, None)))
    return tuple(g for g in out if g.min_count > 0)


def _all_true(engine: Engine, exprs: tuple[str, ...], pod: Mapping[str, Any]) -> bool:
    for expr in exprs:
        out = engine.values(expr, pod)
        if not out.ok or out.items != [True]:
            return False
    return True


def _key_value(engine: Engine, exprs: tuple[str, ...], pod: Mapping[str, Any]) -> str | None:
    """The pod's values of ``groupByKeyPaths`` joined by ``-``: each must give one non-empty
    value (None otherwise: the pod is in no group of this member)."""
    parts = []
    for expr in exprs:
        out = engine.values(expr, pod)
        if not out.ok or len(out.items) != 1 or out.items[0] in (None, ""):
            return None
        v = out.items[0]
        parts.append(v if isinstance(v, str) else str(v))
    return "-".join(parts)


def pod_group(
    karta: Karta,
    w: Workload,
    obj: Mapping[str, Any],
    pod: Mapping[str, Any],
    uid: str,
    engine: Engine,
    mode: str = "native",
) -> Group | None:
    """The gang ``pod`` (a pod of workload ``w``, object ``obj``) joins, or None."""
    found = groups(karta, w, uid, mode)
    if not found:
        return None
    component, _ = place(pod, karta, w, obj, engine)
    gang = karta.instructions.gang
    if gang is not None and gang.pod_group is None and gang.pod_groups:
        for entry in gang.pod_groups:
            for m in entry.members:
                if component not in _descendants(karta, frozenset((m.component,))):
                    continue
                if not _all_true(engine, m.filters, pod):
                    continue
                key = entry.name
                if m.group_by_key_paths:
                    value = _key_value(engine, m.group_by_key_paths, pod)
                    if value is None:
                        continue
                    key = f"{entry.name}-{value}"
                for g in found:
                    if g.key == key:
                        return g
        return None
    g = found[0]
    return g if g.components is None or component in g.components else None
