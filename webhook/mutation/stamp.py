"""A mutation planned straight from what the definition's expressions found, without the
workload tree, for definitions whose components keep whole pod templates
(``podTemplateSpecPath``): most of the catalog.

:func:`plan` gives what :func:`webhook.mutation.plan.plan` gives on the workload that
:meth:`webhook.workload.locator.Locator.locate` builds from what the same evaluation found, or None when the object needs
that general path: anything the general path would warn about or fail on (an expression that
failed, instance ids that do not fit, a value in the way that is not an object, a template
without a ``spec``, a value the API server would reject), templates that overlap, or no
template at all. The general path then resolves from the same outcomes, so nothing is
evaluated twice and every warning is written in one place. ``tests/mutation/test_stamp.py`` holds the
two to each other on every sample and on generated templates.

What makes it cheaper is what it leaves out: no slots, instances or components are built, and
with no template above or inside another (checked) each template's writes are its own, so the
bookkeeping of :class:`webhook.mutation.plan._Patch` shrinks to a pointer and two small maps per
template.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from webhook.base.pointers import Path_, pointer
from webhook.jq.engine import Outcome
from webhook.karta.fields import INJECTABLES, TEMPLATE, Injectable, Role
from webhook.karta.model import Component, Karta
from webhook.mutation.plan import Plan, variables
from webhook.mutation.policy import Policy, Rule, Run, Setting
from webhook.workload.instances import identity, instance_ids
from webhook.workload.locator import locator


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


@dataclass(frozen=True)
class _Layout:
    """Where, in what a definition's mutation locator finds, each template component's
    templates and instance ids are (derived once per definition)."""

    components: tuple[tuple[Component, int, int | None], ...]
    #: whether templates are apart by construction: one component, whose path is plain (each
    #: location has one token per step, and no two are the same)
    apart: bool


def lane(karta: Karta) -> _Layout | None:
    """The definition's layout when this path may plan its objects (from what its mutation
    :func:`~webhook.workload.locator.locator` finds, handed to :func:`plan`), else None."""
    return karta.root.derive("stamp", _layout_of, karta)


def _layout_of(karta: Karta) -> _Layout | None:
    """Template components only (one with no pod spec at all writes nothing: its outcomes
    can only make a warning, and any failed outcome sends the object to the general path).
    A definition whose kind refuses some policy fields is the general path's."""
    where = locator(karta)
    if where.declined or where.requests.deferred.forms:
        return None
    out = []
    for part in where.parts:
        c = part.component
        if c.pattern is None:
            continue
        if c.pattern != TEMPLATE:
            return None
        out.append((c, part.at[Role.POD_TEMPLATE_SPEC], part.at.get(Role.INSTANCE_ID)))
    forms = where.requests.prepared.forms
    return _Layout(tuple(out), len(out) == 1 and forms[out[0][1]][0] is not None)


#: One setting of a rule as :func:`plan` applies it to each template: the parent's key in the
#: template (``metadata``, ``spec``) and the place's own key in it (``labels``,
#: ``schedulerName``); the JSON Pointers below the template of the parent, of the place and of
#: the value written (the place's with the key's :attr:`~webhook.mutation.policy.Setting.tail`); the
#: map's key (None for a single field), the constant value (None: rendered), the setting, the
#: value check when it checks anything, and the values that count as unset.
_Action = tuple[
    str,
    str,
    str,
    str,
    str,
    str | None,
    str | None,
    Setting,
    Callable[[str], list[str]] | None,
    tuple[str, ...],
]


def actions(rule: Rule) -> tuple[tuple[_Action, ...], bool]:
    """What :func:`plan` does for ``rule`` on each template, setting by setting
    (:data:`_Action`); and whether the general path must plan it: a constant fails its
    check, or the rule sets a field this path does not write (tolerations)."""
    acts = []
    for inj, settings in rule.settings:
        place = PLACES.get(inj.key)
        if place is None:
            return (), True
        check = inj.check_value
        for s in settings:
            acts.append(
                (
                    place.parent,
                    place.name,
                    place.parent_pointer,
                    place.pointer,
                    place.pointer + s.tail,
                    s.key,
                    s.constant,
                    s,
                    check,
                    inj.unset,
                )
            )
    return tuple(acts), any(s.invalid for _, settings in rule.settings for s in settings)


def run_actions(run: Run) -> tuple[tuple[tuple[int, *_Action], ...], bool]:
    """What :func:`plan` does for the rules of ``run`` on each template: each rule's
    :func:`actions` in rule order, each with the index of its rule in the run; and whether the
    general path must plan any of them."""
    acts: list[tuple[int, *_Action]] = []
    invalid = False
    for k, rule in enumerate(run.rules):
        got, bad = actions(rule)
        acts.extend((k, *a) for a in got)
        invalid = invalid or bad
    return tuple(acts), invalid


def _apart(locs: list[Path_]) -> bool:
    """No two templates at one place, none inside another."""
    known = set(locs)
    if len(known) != len(locs):
        return False
    if len({len(loc) for loc in locs}) == 1:
        return True
    return not any(loc[:n] in known for loc in locs for n in range(len(loc)))


def plan(
    karta: Karta,
    layout: _Layout,
    policy: Policy,
    obj: dict[str, Any],
    results: Sequence[list[Any]],
) -> Plan | None:
    """The patch ``policy`` makes on ``obj``, from what each request of ``karta``'s mutation
    locator gave (:attr:`~webhook.workload.batch.Found.items`, none failed; ``layout`` is
    ``karta``'s :func:`lane`); None when the general path must plan it."""
    found: list[tuple[str, str, Path_, dict[str, Any]]] = []
    for c, at_paths, at_ids in layout.components:
        items = results[at_paths]
        ids = results[at_ids] if at_ids is not None else None
        if ids is not None and len(ids) == len(items):
            for i in ids:  # the ids the definition gives, when they fit (as instance_ids says)
                if type(i) is not str or not i:
                    ids = None
                    break
        else:
            ids = None
        if ids is None:
            warnings: list[str] = []
            locs: list[Path_ | None] = [loc for loc, _ in items]
            given = Outcome(results[at_ids]) if at_ids is not None else None
            ids = instance_ids(c, locs, given, warnings)
            if warnings:
                return None
        for i, (loc, val) in enumerate(items):
            if isinstance(val, dict):
                found.append((c.name, ids[i], loc, val))
    if not found or not (layout.apart or _apart([loc for _, _, loc, _ in found])):
        return None
    gvk, name, namespace = identity(karta, obj)
    w_values = variables(name, namespace, gvk.kind) if policy.variable else None
    rendered: dict[int, str] = {}  # values the same for every template, by id of the setting
    ops: list[dict[str, Any]] = []
    # Each template a rule matched, by its index in ``found``: its JSON Pointer, the objects
    # our ops create in it by pointer below the template (keys set later go into the op's
    # value, as in :class:`webhook.mutation.plan._Patch`), and the values set on what it had.
    states: dict[int, tuple[str, dict[str, dict[str, Any]], dict[str, str]]] = {}
    mutated: set[int] = set()  # a template changes only with an op of its own
    # Below, a value is written unless what is there stays: it stays unless it is absent, or
    # differs and the rule overwrites or it counts as unset (the rule of
    # :meth:`webhook.mutation.plan._Patch.set`). This loop runs for every setting of every template
    # of every request, so it is written out in one function. Rules come in runs of one match
    # and overwrite (:class:`~webhook.mutation.policy.Run`): each template is taken once per
    # run, whatever the number of its rules, and each rule's ops go to a list of its own,
    # joined in rule order, so the patch is the one the rules make one after the other.
    added = 0  # ops made so far
    for run in policy.runs:
        match = run.match
        if not match.workload(gvk, namespace):
            continue
        narrowed = bool(match.components or match.instances)
        values = w_values if run.variable else None  # the instance's set in place, below
        acts, invalid = run.derive("stamp", run_actions, run)
        overwrite = run.overwrite
        outs: list[list[dict[str, Any]]] = [ops] if len(run.rules) == 1 else [[] for _ in run.rules]
        for n, (component, iid, loc, template) in enumerate(found):
            if narrowed and not match.instance(component, iid):
                continue
            if invalid:  # a constant the injectable rejects (the general path warns), or a
                return None  # field this path does not write
            state = states.get(n)
            if state is None:
                state = states[n] = (pointer(loc), {}, {})
            at, made, assigned = state
            if values is not None:
                values["component"] = component
                values["instance"] = iid
            before = added
            for (
                k,
                parent_key,
                place_key,
                parent_at,
                place_at,
                value_at,
                key,
                value,
                s,
                check,
                unset,
            ) in acts:
                if value is None:
                    if s.per_instance:
                        value = s.value(values)
                    elif (value := rendered.get(id(s))) is None:
                        value = rendered[id(s)] = s.value(values)
                    if check is not None and check(value):
                        return None
                if key is None:  # a single field, of a parent that must exist
                    parent = template.get(parent_key)
                    if not isinstance(parent, dict):  # no spec: the general path warns
                        return None
                    old = assigned.get(value_at, parent.get(place_key))
                    if old is None or (old != value and (overwrite or old in unset)):
                        assigned[value_at] = value
                        outs[k].append({"op": "add", "path": at + value_at, "value": value})
                        added += 1
                    continue
                if made:
                    box = made.get(place_at)
                    if box is not None:  # a map an op of ours creates: the key goes in it
                        old = box.get(key)
                        if old is None or (old != value and (overwrite or old in unset)):
                            box[key] = value
                        continue
                    top = made.get(parent_at)
                    if top is not None:  # its parent is ours, without the map
                        top[place_key] = made[place_at] = {key: value}
                        continue
                parent = template.get(parent_key)
                if parent is None and parent_at not in _CREATED:  # no spec: the general path
                    return None
                if parent is None:  # no metadata: one op adds it with the map and the key
                    box = made[place_at] = {key: value}
                    top = made[parent_at] = {place_key: box}
                    outs[k].append({"op": "add", "path": at + parent_at, "value": top})
                    added += 1
                    continue
                if not isinstance(parent, dict):  # in the way: the general path judges
                    return None
                cur = parent.get(place_key)
                if cur is None:  # no map: one op adds it with the key
                    box = made[place_at] = {key: value}
                    outs[k].append({"op": "add", "path": at + place_at, "value": box})
                    added += 1
                    continue
                if not isinstance(cur, dict):
                    return None
                old = assigned.get(value_at, cur.get(key))
                if old is None or (old != value and (overwrite or old in unset)):
                    assigned[value_at] = value
                    outs[k].append({"op": "add", "path": at + value_at, "value": value})
                    added += 1
            if added > before:
                mutated.add(n)
        if len(outs) > 1:
            for out in outs:
                ops.extend(out)
    return Plan(ops, [], len(mutated), len(states), [])
