"""What the fast lane (:func:`webhook.mutation.stamp.plan`) writes on each template, decided
once per policy (:func:`run_plans`, when a request first meets it) for each of its runs of
rules (:class:`~webhook.mutation.policy.Run`):

* :class:`RunPlan`: the run's match, whether it narrows to some instances, whether the
  general path must plan it, and its settings grouped by the place they write;
* :class:`Group`: consecutive settings of one place, a map (``labels``) or a single field
  (``schedulerName``), found (or created) once per template for all of them;
* :func:`write`: a run's groups written on one template.

A value is written unless what is there stays: it stays unless it is absent, or differs and
the rule overwrites or it counts as unset (the rule of :meth:`webhook.mutation.plan._Patch.set`).
Each rule's ops go to a list of its own (``outs``, by the rule's index in the run), joined in
rule order, so the patch is the one the rules make one after the other.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from webhook.base.pointers import pointer
from webhook.karta.fields import INJECTABLES, Injectable
from webhook.mutation.policy import Match, Policy, Run, Setting
from webhook.mutation.templates import join


class _Place(NamedTuple):
    """Where an injectable lives below a template: ``parent`` (``metadata``, ``spec``) and
    ``name`` (the map, or the field itself), with the JSON Pointer of each."""

    parent: str
    name: str
    parent_pointer: str
    pointer: str


def _place(inj: Injectable) -> _Place | None:
    """The injectable's place, when it has the shape this path handles: a map whose parent
    may be created (``metadata``) or must exist (``spec``), or a single field of a parent
    that must exist. Lists (tolerations) are the general path's."""
    steps = inj.in_template
    if len(steps) != 2 or inj.is_list or not (inj.is_map or inj.template_base == 1):
        return None
    return _Place(steps[0], steps[1], pointer(steps[:1]), pointer(steps))


#: each injectable's place, by key, for those this path writes; a rule that sets another is
#: planned by the general path
PLACES: dict[str, _Place] = {inj.key: p for inj in INJECTABLES if (p := _place(inj)) is not None}
#: the parents this path may create (``metadata``): a template without ``spec`` is the
#: general path's, which warns
_CREATED = {pointer(inj.in_template[:1]) for inj in INJECTABLES if inj.template_base == 0}

#: An op in the making, and where a template's ops go: one list per rule of the run.
Op = dict[str, Any]
Outs = list[list[Op]]
#: One template as :func:`~webhook.mutation.stamp.plan` writes it: its JSON Pointer, the
#: objects our ops create in it by pointer below the template (keys set later go into the op's
#: value, as in :class:`webhook.mutation.plan._Patch`), and the values set on what it had.
State = tuple[str, dict[str, dict[str, Any]], dict[str, str]]
#: One setting of a group: the index of its rule in the run, the map's key (a single field's
#: name: a key of its parent), the constant value (None: rendered), the setting, and the JSON
#: Pointer of the value below the template (the place's with the key's
#: :attr:`~webhook.mutation.policy.Setting.tail`).
Entry = tuple[int, str, str | None, Setting, str]
Check = Callable[[str], list[str]] | None


def _value(s: Setting, check: Check, values: Any, rendered: dict[int, str]) -> str | None:
    """The value of a setting with variables for the instance of ``values`` (the workload's
    variables, the instance's set in place); one without per-instance variables is kept in
    ``rendered`` (by id of the setting), where :func:`write` finds it for the workload's other
    templates: rendered and checked once. None when ``check`` rejects it (the general path
    warns)."""
    value = join(s.pieces, values)
    if check is not None and check(value):
        return None
    if not s.per_instance:
        rendered[id(s)] = value
    return value


@dataclass(frozen=True, slots=True)
class Group:
    """Consecutive settings of one place: keys of one map (``labels``), whose parent may be
    created (``metadata``) or must exist (``spec``), or one single field (``schedulerName``),
    of a parent that must exist. A field's settings are keys of its parent, so both are
    written alike on what the template has."""

    parent_key: str
    place_key: str
    parent_at: str
    place_at: str
    is_map: bool
    #: whether the parent may be created (``metadata``; a template without ``spec`` is the
    #: general path's, which warns)
    creates: bool
    check: Check
    unset: tuple[str, ...]
    entries: tuple[Entry, ...]

    def create(self, template: dict[str, Any], at: str, made: dict[str, dict[str, Any]],
               outs: Outs) -> dict[str, Any] | None:  # fmt: skip
        """The map an op of ours creates for the keys, the template having none (its op, if
        it needs one, goes to the first key's rule); None when the general path must plan the
        object (a field without its parent, a value in the way)."""
        if not self.is_map:
            return None
        top = made.get(self.parent_at) if made else None
        if top is not None:  # its parent is ours, without the map
            box = top[self.place_key] = made[self.place_at] = {}
            return box
        first = outs[self.entries[0][0]]
        parent = template.get(self.parent_key)
        if parent is None and self.creates:  # no metadata: one op adds it with the map
            box = made[self.place_at] = {}
            top = made[self.parent_at] = {self.place_key: box}
            first.append({"op": "add", "path": at + self.parent_at, "value": top})
            return box
        if not isinstance(parent, dict) or parent.get(self.place_key) is not None:
            return None  # no spec, or a value in the way: the general path judges
        box = made[self.place_at] = {}  # no map: one op adds it
        first.append({"op": "add", "path": at + self.place_at, "value": box})
        return box


def write(groups: tuple[Group, ...], overwrite: bool, template: dict[str, Any], state: State,
          outs: Outs, values: Any, rendered: dict[int, str]) -> bool | None:  # fmt: skip
    """Writes ``groups`` on ``template``: whether an op was added; None when the general path
    must plan the object. Runs for every run and template of every request."""
    at, made, assigned = state
    changed = False
    for g in groups:
        box = made.get(g.place_at) if made else None
        if box is None:
            parent = template.get(g.parent_key)
            cur = parent.get(g.place_key) if g.is_map and isinstance(parent, dict) else parent
            if isinstance(cur, dict):  # what the template has: an op for each value set
                for k, key, value, s, value_at in g.entries:
                    if (
                        value is None
                        and (value := rendered.get(id(s))) is None
                        and (value := _value(s, g.check, values, rendered)) is None
                    ):
                        return None
                    old = assigned.get(value_at, cur.get(key))
                    if old is None or (old != value and (overwrite or old in g.unset)):
                        assigned[value_at] = value
                        outs[k].append({"op": "add", "path": at + value_at, "value": value})
                        changed = True
                continue
            if cur is None and cur is not parent:  # a map absent from its parent: one op adds it
                box = made[g.place_at] = {}
                outs[g.entries[0][0]].append({"op": "add", "path": at + g.place_at, "value": box})
            elif (box := g.create(template, at, made, outs)) is None:
                return None
            changed = True
        for _, key, value, s, _ in g.entries:  # a map an op of ours creates: keys go in it
            if (
                value is None
                and (value := rendered.get(id(s))) is None
                and (value := _value(s, g.check, values, rendered)) is None
            ):
                return None
            old = box.get(key)
            if old is None or (old != value and (overwrite or old in g.unset)):
                box[key] = value
    return changed


@dataclass(frozen=True, slots=True)
class RunPlan:
    """What :func:`~webhook.mutation.stamp.plan` does for a run on each template it matches."""

    match: Match
    #: whether the match takes every workload (no kinds, no namespaces)
    everywhere: bool
    overwrite: bool
    #: the run's rules
    rules: int
    #: whether a value names ``$(component)`` or ``$(instance)``
    per_instance: bool
    #: the general path must plan any template the run matches: a constant fails its check,
    #: or a rule sets a field this path does not write (tolerations)
    declined: bool
    groups: tuple[Group, ...]


def run_plans(policy: Policy) -> tuple[RunPlan, ...]:
    """The :class:`RunPlan` of each run of ``policy``, in order."""
    return tuple(_run_plan(run) for run in policy.runs)


def _group(inj: Injectable, place: _Place, entries: list[Entry]) -> Group:
    creates = place.parent_pointer in _CREATED
    return Group(place.parent, place.name, place.parent_pointer, place.pointer, inj.is_map,
                 creates, inj.check_value, inj.unset, tuple(entries))  # fmt: skip


def _run_plan(run: Run) -> RunPlan:
    """The run's rules' settings in rule order, then table order, consecutive settings of one
    injectable in one group."""
    groups: list[Group] = []
    last: tuple[Injectable, _Place, list[Entry]] | None = None
    declined = per_instance = False
    for k, rule in enumerate(run.rules):
        for inj, settings in rule.settings:
            place = PLACES.get(inj.key)
            if place is None:
                declined = True
                continue
            if last is None or last[0] is not inj:
                if last is not None:
                    groups.append(_group(*last))
                last = (inj, place, [])
            for s in settings:
                key = place.name if s.key is None else s.key  # a field: a key of its parent
                last[2].append((k, key, s.constant, s, place.pointer + s.tail))
                declined = declined or s.invalid
                per_instance = per_instance or s.per_instance
    if last is not None:
        groups.append(_group(*last))
    m = run.match
    everywhere = not (m.kinds or m.namespaces)
    return RunPlan(m, everywhere, run.overwrite, len(run.rules), per_instance, declined,
                   tuple(groups))  # fmt: skip
