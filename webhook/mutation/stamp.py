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
template. What it writes on a template, decided once per policy, is
:mod:`webhook.mutation.stampwrite`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from webhook.base.pointers import Path_, pointer
from webhook.jq.engine import Outcome
from webhook.karta.fields import TEMPLATE, Role
from webhook.karta.model import Component, Karta
from webhook.mutation.plan import Plan, variables
from webhook.mutation.policy import Policy
from webhook.mutation.stampwrite import PLACES as PLACES
from webhook.mutation.stampwrite import Op, RunPlan, State, run_plans, write
from webhook.workload.instances import identity, instance_ids
from webhook.workload.locator import locator

#: A template found: its component's name, its instance id, its location and the template.
_Found = tuple[str, str, Path_, dict[str, Any]]


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


def plan(
    karta: Karta,
    layout: _Layout,
    policy: Policy,
    obj: dict[str, Any],
    results: Sequence[list[Any]],
) -> Plan | None:
    """The patch ``policy`` makes on ``obj``, from what each request of ``karta``'s mutation
    locator gave (:attr:`~webhook.workload.batch.Found.items`, none failed; ``layout`` is
    ``karta``'s :func:`lane`); None when the general path must plan it.

    The templates found, then each run of rules (:class:`~webhook.mutation.policy.Run`) that
    matches the workload, written on each template it matches: each template is taken once
    per run, whatever the number of its rules. What depends on the policy alone is decided
    once per policy (:func:`~webhook.mutation.stampwrite.run_plans`)."""
    found = _found(layout, results)
    if found is None:
        return None
    gvk, name, namespace = identity(karta, obj)
    values = variables(name, namespace, gvk.kind) if policy.variable else None
    ops: list[Op] = []
    states: dict[int, State] = {}
    mutated: set[int] = set()
    rendered: dict[int, str] = {}  # values the same for every template, by id of the setting
    rps = policy.derived.get("stamp") or policy.derive("stamp", run_plans, policy)
    for rp in rps:
        if not (rp.everywhere or rp.match.workload(gvk, namespace)):
            continue
        if not _stamp(rp, found, ops, states, mutated, values, rendered):
            return None
    return Plan(ops, [], len(mutated), len(states), [])


def _found(layout: _Layout, results: Sequence[list[Any]]) -> list[_Found] | None:
    """Every template of the object (an object where the locator found it), with its
    component and instance id: those the definition gives when they fit, else what
    :func:`~webhook.workload.instances.instance_ids` makes of them. None when the general
    path must plan the object: ids that do not fit (it warns), no template, or templates that
    overlap."""
    found: list[_Found] = []
    for c, at_paths, at_ids in layout.components:
        items = results[at_paths]
        ids = results[at_ids] if at_ids is not None else None
        if ids is not None and len(ids) == len(items):
            for i in ids:
                if type(i) is not str or not i:
                    ids = None
                    break
        else:
            ids = None
        if ids is None:
            warnings: list[str] = []
            given = Outcome(results[at_ids]) if at_ids is not None else None
            ids = instance_ids(c, [loc for loc, _ in items], given, warnings)
            if warnings:
                return None
        for i, (loc, val) in enumerate(items):
            if isinstance(val, dict):
                found.append((c.name, ids[i], loc, val))
    if not found or not (layout.apart or _apart([loc for _, _, loc, _ in found])):
        return None
    return found


def _apart(locs: list[Path_]) -> bool:
    """No two templates at one place, none inside another."""
    known = set(locs)
    if len(known) != len(locs):
        return False
    if len({len(loc) for loc in locs}) == 1:
        return True
    return not any(loc[:n] in known for loc in locs for n in range(len(loc)))


def _stamp(
    rp: RunPlan,
    found: list[_Found],
    ops: list[Op],
    states: dict[int, State],
    mutated: set[int],
    values: dict[str, str] | None,
    rendered: dict[int, str],
) -> bool:
    """Writes the run of ``rp`` on each template it matches (by its index in ``found``: its
    :data:`~webhook.mutation.stampwrite.State` in ``states``, in ``mutated`` once an op of ours
    changes it); each rule's ops in a list of its own, joined in rule order. False when the
    general path must plan the object. This runs for every run and template of every request."""
    outs = [ops] if rp.rules == 1 else [[] for _ in range(rp.rules)]
    narrowed, overwrite = rp.match.narrowed, rp.overwrite
    per_instance = values if rp.per_instance else None
    for n, (component, iid, loc, template) in enumerate(found):
        if narrowed and not rp.match.instance(component, iid):
            continue
        if rp.declined:  # a constant the injectable rejects (the general path warns), or a
            return False  # field this path does not write
        state = states.get(n)
        if state is None:
            state = states[n] = (pointer(loc), {}, {})
        if per_instance is not None:
            per_instance["component"] = component
            per_instance["instance"] = iid
        changed = write(rp.groups, overwrite, template, state, outs, values, rendered)
        if changed is None:
            return False
        if changed:
            mutated.add(n)
    if len(outs) > 1:
        for out in outs:
            ops.extend(out)
    return True
