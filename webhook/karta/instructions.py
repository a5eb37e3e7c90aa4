"""``spec.optimizationInstructions``: gang scheduling, typed.

Two formats exist upstream: the deprecated ``podGroups`` list (each group's members name a
component and carry pod-side jq: ``groupByKeyPaths`` and ``filters``) and ``podGroup``
(subgroups per component, topology constraints; it wins when both are set, as KAI does). Both
are parsed here into frozen dataclasses, so every jq expression inside them is listed by
:meth:`Instructions.jq` and thereby screened and compiled like any other; other instruction
keys are kept in ``raw``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from webhook.base.errors import join_path
from webhook.base.reader import Reader
from webhook.karta.fields import Role


@dataclass(frozen=True)
class Member:
    """A member of an alpha-format pod group."""

    component: str
    field_path: str
    group_by_key_paths: tuple[str, ...] = ()
    filters: tuple[str, ...] = ()


@dataclass(frozen=True)
class PodGroups:
    """One entry of the deprecated ``podGroups`` list."""

    name: str
    field_path: str
    members: tuple[Member, ...] = ()


@dataclass(frozen=True)
class Topology:
    topology_name: str | None = None
    preferred_level: str | None = None
    required_level: str | None = None


@dataclass(frozen=True)
class SubGroup:
    component: str
    field_path: str
    topology: Topology | None = None


@dataclass(frozen=True)
class PodGroup:
    """``podGroup``: one group with a subgroup per component."""

    name: str
    field_path: str
    sub_groups: tuple[SubGroup, ...] = ()
    topology: Topology | None = None


@dataclass(frozen=True)
class GangScheduling:
    pod_groups: tuple[PodGroups, ...] = ()
    pod_group: PodGroup | None = None


@dataclass(frozen=True)
class Instructions:
    gang: GangScheduling | None = None
    raw: Mapping[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def components(self) -> Iterator[tuple[str, str]]:
        """``(field path, component name)`` of every member and subgroup."""
        if self.gang is None:
            return
        for g in self.gang.pod_groups:
            for m in g.members:
                yield join_path(m.field_path, "componentName"), m.component
        if self.gang.pod_group is not None:
            for s in self.gang.pod_group.sub_groups:
                yield join_path(s.field_path, "componentName"), s.component

    def jq(self) -> Iterator[tuple[str, str, str | None, Role]]:
        """``(field path, expression, component, role)`` of every jq expression (pod-side)."""
        if self.gang is None:
            return
        for g in self.gang.pod_groups:
            for m in g.members:
                for role, exprs in (
                    (Role.GROUP_BY_KEY, m.group_by_key_paths),
                    (Role.FILTER, m.filters),
                ):
                    for i, expr in enumerate(exprs):
                        if expr:
                            yield (
                                f"{m.field_path}.{role.value}[{i}]",
                                expr,
                                m.component or None,
                                role,
                            )


def _strings(r: Reader, value: Any, path: str) -> tuple[str, ...]:
    out = []
    for i, v in enumerate(r.items(value, path)):
        s = r.string(v, join_path(path, i))
        if s is not None:
            out.append(s)
    return tuple(out)


def _topology(r: Reader, value: Any, path: str) -> Topology | None:
    d = r.obj(value, path)
    if d is None:
        return None
    return Topology(
        r.string(d.get("topologyName"), join_path(path, "topologyName")),
        r.string(d.get("preferredTopologyLevel"), join_path(path, "preferredTopologyLevel")),
        r.string(d.get("requiredTopologyLevel"), join_path(path, "requiredTopologyLevel")),
    )


def _component_name(r: Reader, d: Mapping[str, Any], path: str) -> str:
    return r.string(d.get("componentName"), join_path(path, "componentName"), required=True) or ""


def _members(r: Reader, value: Any, path: str) -> tuple[Member, ...]:
    out = []
    for i, m in enumerate(r.items(value, path)):
        mp = join_path(path, i)
        md = r.obj(m, mp)
        if md is None:
            continue
        out.append(
            Member(
                _component_name(r, md, mp),
                mp,
                _strings(r, md.get("groupByKeyPaths"), join_path(mp, "groupByKeyPaths")),
                _strings(r, md.get("filters"), join_path(mp, "filters")),
            )
        )
    return tuple(out)


def _pod_group(r: Reader, value: Any, path: str) -> PodGroup | None:
    d = r.obj(value, path)
    if d is None:
        return None
    subs = []
    spath = join_path(path, "subGroups")
    for i, s in enumerate(r.items(d.get("subGroups"), spath)):
        ip = join_path(spath, i)
        sd = r.obj(s, ip)
        if sd is not None:
            subs.append(
                SubGroup(
                    _component_name(r, sd, ip),
                    ip,
                    _topology(r, sd.get("topology"), join_path(ip, "topology")),
                )
            )
    return PodGroup(
        r.string(d.get("name"), join_path(path, "name")) or "",
        path,
        tuple(subs),
        _topology(r, d.get("topology"), join_path(path, "topology")),
    )


def parse_instructions(r: Reader, value: Any, path: str) -> Instructions:
    d = r.obj(value, path) or {}
    gpath = join_path(path, "gangScheduling")
    gd = r.obj(d.get("gangScheduling"), gpath)
    if gd is None:
        return Instructions(None, d)
    groups = []
    ppath = join_path(gpath, "podGroups")
    for i, g in enumerate(r.items(gd.get("podGroups"), ppath)):
        ip = join_path(ppath, i)
        g_d = r.obj(g, ip)
        if g_d is not None:
            groups.append(
                PodGroups(
                    r.string(g_d.get("name"), join_path(ip, "name")) or "",
                    ip,
                    _members(r, g_d.get("members"), join_path(ip, "members")),
                )
            )
    gang = GangScheduling(
        tuple(groups), _pod_group(r, gd.get("podGroup"), join_path(gpath, "podGroup"))
    )
    return Instructions(gang, d)
