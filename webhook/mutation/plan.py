"""Plan the mutation of a workload: a minimal, idempotent JSON Patch.

Ops are ``add`` operations at the exact locations the definition resolved — never a whole
template written back (upstream Karta once replaced a Pod by its own template that way).
Missing ``metadata`` / ``labels`` / ``annotations`` objects are created in the same op as their
first key, so a patch never refers to a parent it has not created. A value that is already
there yields no op, so a reinvocation (or a second ``plan`` on the patched object) is empty.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

from webhook.base import pointers
from webhook.base.pointers import Path_
from webhook.mutation.policy import Policy, Rule, toleration_identity
from webhook.workload.model import ComponentView, Instance, Workload

#: Why a policy could not be applied in full (the ``reason`` of a mutation failure): a write
#: path failed, a value is in the way, a rendered value is invalid, or the definition gives
#: no place for a field the rule sets.
EVALUATION, UNWRITABLE, INVALID_VALUE = "evaluation", "unwritable", "invalid_value"
NOT_APPLICABLE = "not_applicable"


@dataclass(slots=True)
class Plan:
    """A mutation's patch and what is to be said about it (not to be changed once made; not
    frozen, as one is made on every request and frozen dataclasses are slow to build)."""

    ops: list[dict[str, Any]]
    warnings: list[str]
    templates_mutated: int
    templates_matched: int
    #: ``(reason, what)`` for every part of the policy that could not be applied: a write path
    #: that failed to evaluate, a value in the way that is not an object, a rendered value the
    #: API server would reject
    failures: list[tuple[str, str]]


class _Patch:
    """Builds ops against the original object plus what earlier ops already did, without
    copying the object: containers we create live only inside our own ops' values."""

    def __init__(self, obj: Any) -> None:
        self.obj = obj
        self.ops: list[dict[str, Any]] = []
        self.created: dict[Path_, dict[str, Any]] = {}  # containers created by our ops
        # The top container of each op, by path, and the lengths of those paths: a lookup
        # costs one probe per length, not one per op (linear planning in the template count).
        self.roots: dict[Path_, dict[str, Any]] = {}
        self.root_lengths: set[int] = set()
        self.assigned: dict[tuple[Path_, str], Any] = {}  # keys set on existing containers
        self.changes = 0  # values set so far (a key set inside a created container has no op)
        self.lists: dict[Path_, list[Any]] = {}  # lists our ops create (tolerations)
        self.appended: dict[Path_, list[dict[str, Any]]] = {}  # entries our ops append

    def append(
        self, path: Path_, base: int, item: dict[str, Any], overwrite: bool, anchor: Any, at: str
    ) -> str | None:
        """Append ``item`` to the list at ``path`` (created when absent, in its parent at
        ``path[:base]``) unless an entry with its identity (:func:`toleration_identity`) is
        there; with ``overwrite`` such an entry that differs is replaced. ``at`` is the JSON
        Pointer of ``path``. Returns None on success or no-op, else why it was skipped."""
        made = self.lists.get(path)
        mine = made if made is not None else self.appended.get(path, [])
        want = toleration_identity(item)
        for t in mine:  # entries our ops write: change them in place (their op holds them)
            if toleration_identity(t) == want:
                if overwrite and t != item:
                    t.clear()
                    t.update(item)
                return None
        if made is not None:
            made.append(item)
            self.changes += 1
            return None
        cur = self.get(path, base, anchor)
        if cur is None:
            up = path[:-1]
            if len(path) == base + 1:
                parent = anchor if anchor is not None else self.get(up)
            else:
                parent = self.get(up, base, anchor)
            if parent is not None and not isinstance(parent, dict):
                return f"{pointers.pointer(up)} is not an object"
            new = [item]
            if parent is None:
                # holders missing below the base (a fragment's ``extraPodSpec``): created with
                # the list, as :meth:`set` creates a map's
                why = self.set(up, base, str(path[-1]), cast(Any, new), False, anchor)
                if why is None:
                    self.lists[path] = new
                return why
            self.lists[path] = new
            self.changes += 1
            if up in self.created:  # a container an earlier op creates: the list goes in it
                self.created[up][str(path[-1])] = new
            else:
                self.ops.append({"op": "add", "path": at, "value": new})
            return None
        if not isinstance(cur, list):
            return f"{at} is not a list"
        for i, t in enumerate(cur):
            if isinstance(t, dict) and toleration_identity(t) == want:
                if overwrite and _differs(t, item):
                    self.changes += 1
                    self.ops.append({"op": "replace", "path": f"{at}/{i}", "value": item})
                return None
        self.appended.setdefault(path, []).append(item)
        self.changes += 1
        self.ops.append({"op": "add", "path": at + "/-", "value": item})
        return None

    def get(self, path: Path_, base: int = 0, anchor: Any = None) -> Any:
        """The value at ``path`` as our ops leave it; ``anchor``, when given, is the original
        object at ``path[:base]`` and saves walking from the root."""
        if self.root_lengths:
            for n in self.root_lengths:  # containers created by an op: look inside our value
                made = self.roots.get(path[:n]) if n <= len(path) else None
                if made is not None:
                    cur: Any = made
                    for tok in path[n:]:
                        cur = cur.get(tok) if isinstance(cur, dict) else None
                    return cur
        if anchor is not None and base <= len(path):
            cur = anchor
            for tok in path[base:]:  # keys (labels, metadata) below a resolved anchor, mostly
                if isinstance(cur, dict) and isinstance(tok, str):
                    cur = cur.get(tok)
                else:  # a list index on the way: the general walk, from the anchor
                    return pointers.getpath(anchor, path[base:])
            return cur
        return pointers.getpath(self.obj, path)

    def set(
        self,
        container: Path_,
        base: int,
        key: str,
        value: str,
        overwrite: bool,
        anchor: Any = None,
        unset: tuple[str, ...] = (),
        at: tuple[str, str] | None = None,
    ) -> str | None:
        """Set ``key`` in the object at ``container`` (creating it and missing parents below the
        first ``base`` tokens). A value in ``unset`` counts as no value. ``at``, when given, is
        the JSON Pointer of ``container`` and what ``key`` adds to it, built by the caller from
        parts it reuses. Returns None on success or no-op, else why it was skipped."""
        below = len(container) - base
        cur: Any
        if anchor is not None and below == 0 and isinstance(anchor, dict):
            # The anchor itself (a pod spec, for schedulerName): the original object's, so no
            # op created it or anything above it.
            cur = anchor
        elif anchor is not None and below == 1 and isinstance(anchor, dict):
            # A key of the anchor (a fragment's podLabels, a pod spec's map). The anchor is the
            # original object's, so no op created it or anything above it: only an op that
            # created the container itself can have changed what is there.
            ours = self.roots.get(container) if self.roots else None
            step = container[base]
            if ours is not None:
                cur = ours
            elif isinstance(step, str):
                cur = anchor.get(step)
            else:
                cur = self.get(container, base, anchor)
        else:
            cur = self.get(container, base, anchor)
        if isinstance(cur, dict):
            existing = self.assigned.get((container, key), cur.get(key))
            if existing in unset and existing != value:
                existing = None
            if existing is not None and (existing == value or not overwrite):
                return None
            self.changes += 1
            if self.created and container in self.created:
                cur[key] = value
            else:
                path = at[0] + at[1] if at is not None else pointers.pointer((*container, key))
                self.ops.append({"op": "add", "path": path, "value": value})
                self.assigned[(container, key)] = value
            return None
        if cur is not None:
            return f"{pointers.pointer(container)} is not an object"
        if not isinstance(anchor if anchor is not None else self.get(container[:base]), dict):
            return f"{pointers.pointer(container[:base])} is not an object"
        if anchor is not None and at is not None and len(container) == base + 1:
            # A map missing right below its anchor (a fragment's podLabels): one op that adds
            # it with the key. The anchor is the original object's, so no op created its path.
            new: dict[str, Any] = {key: value}
            self.created[container] = self.roots[container] = new
            self.root_lengths.add(len(container))
            self.changes += 1
            self.ops.append({"op": "add", "path": at[0], "value": new})
            return None
        # Find the first missing (or null) container below the base and create from there
        # (the container itself is missing: that is why we are here).
        start = base
        while start < len(container) - 1:
            here = self.get(container[: start + 1], base, anchor)
            if here is None:
                break
            if not isinstance(here, dict):
                return f"{pointers.pointer(container[: start + 1])} is not an object"
            start += 1
        top: dict[str, Any] = {}
        node = top
        self.created[container[: start + 1]] = top
        for depth in range(start + 1, len(container)):
            child: dict[str, Any] = {}
            node[str(container[depth])] = child
            self.created[container[: depth + 1]] = child
            node = child
        node[key] = value
        self.changes += 1
        parent = container[:start]
        if parent in self.created:  # inside a container an earlier op creates: extend that op
            self.created[parent][str(container[start])] = top
        else:
            self.roots[container[: start + 1]] = top
            self.root_lengths.add(start + 1)
            made = container[: start + 1]
            path = (
                at[0] if at is not None and start + 1 == len(container) else pointers.pointer(made)
            )
            self.ops.append({"op": "add", "path": path, "value": top})
        return None


def _differs(have: dict[str, Any], want: dict[str, Any]) -> bool:
    """Whether a toleration of the same identity says something else (value, seconds)."""
    return (have.get("value") or "") != (want.get("value") or "") or have.get(
        "tolerationSeconds"
    ) != want.get("tolerationSeconds")


def variables(name: str, namespace: str, kind: str) -> dict[str, str]:
    """The workload's variables; :func:`_apply` adds the instance's."""
    return {"workload.name": name, "workload.namespace": namespace, "workload.kind": kind}


def plan(w: Workload, policy: Policy, obj: Mapping[str, Any]) -> Plan:
    """The JSON Patch that applies ``policy`` to every matching pod template of ``w``.

    Rules apply in order, each seeing what the earlier ones set: without ``overwrite`` a key
    (or ``schedulerName``) that is already set keeps its value. What could not be applied is
    in the plan's ``failures`` (for the policy's ``failureMode``), with a warning each.
    """
    patch = _Patch(obj)
    warnings: list[str] = []
    failures: list[tuple[str, str]] = []
    mutated: set[int] = set()
    matched: set[int] = set()
    w_values = variables(w.name, w.namespace, w.gvk.kind) if policy.variable else {}
    rendered: dict[int, str] = {}  # values the same for every instance, by id of the setting
    unplaced: set[tuple[str, str]] = set()  # (rule, field) said not applicable already
    for rule in policy.rules:
        if not rule.match.workload(w.gvk, w.namespace):
            continue
        narrowed = bool(rule.match.components or rule.match.instances)
        if not failures:  # templates a failed write path would have found get nothing
            failures.extend((EVALUATION, f) for f in w.failures)
        for n, (c, inst) in enumerate(w.instances):
            if narrowed and not rule.match.instance(c.name, inst.id):
                continue
            matched.add(n)
            before = patch.changes
            _apply(
                rule, w_values if rule.variable else None, rendered, c, inst, patch, warnings,
                failures, w.declined, unplaced,
            )  # fmt: skip
            if patch.changes > before:
                mutated.add(n)
    return Plan(patch.ops, warnings, len(mutated), len(matched), failures)


def _apply(
    rule: Rule,
    w_values: dict[str, str] | None,
    rendered: dict[int, str],
    c: ComponentView,
    inst: Instance,
    patch: _Patch,
    warnings: list[str],
    failures: list[tuple[str, str]],
    declined: frozenset[str] = frozenset(),
    unplaced: set[tuple[str, str]] | None = None,
) -> None:
    """Everything ``rule`` sets on one instance, injectable by injectable (in table order):
    a map's keys inside the map at its slot, a single value at its slot, a list's entries
    appended at its slot. ``w_values`` are the workload's variables when the rule's values
    use any; ``rendered`` keeps, for the whole workload, the values that do not depend on the
    instance. Fields in ``declined`` (the definition says its kind refuses them) are left
    out; a field the instance has no place for is not applicable: a failure, said once per
    rule and field (``unplaced``)."""
    values = None  # the instance's variables, made when a value needs them
    slots = inst.slots
    for inj, settings in rule.settings:
        if inj.key in declined:
            continue
        slot = slots.get(inj.key)
        if slot is None:
            seen = unplaced if unplaced is not None else set()
            if (rule.name, inj.key) not in seen:
                seen.add((rule.name, inj.key))
                said = f"{_where(rule, c, inst)}: the definition gives no place for {inj.key}"
                warnings.append(f"{said}; not applicable, skipped")
                failures.append((NOT_APPLICABLE, said))
            continue
        check = inj.check_value
        for s in settings:
            if s.constant is not None:
                value = s.constant
            elif not s.per_instance:
                got = rendered.get(id(s))
                value = got if got is not None else rendered.setdefault(id(s), s.value(w_values))
            else:
                if values is None:
                    values = {**(w_values or {}), "component": c.name, "instance": inst.id}
                value = s.value(values)
            if s.invalid if s.constant is not None else bool(check and check(value)):
                where = _where(rule, c, inst)
                shown = f"{inj.noun} {s.key}={value!r}" if s.key else f"{inj.noun} {value!r}"
                warnings.append(f"{where}: {shown} {inj.invalid}; skipped")
                failures.append((INVALID_VALUE, f"{where}: {shown} {inj.invalid}"))
                continue
            if inj.is_list:
                entry = s.entry(value)
                missed = patch.append(
                    slot.path, slot.base, entry, rule.overwrite, slot.anchor, slot.pointer
                )
                if missed:
                    where = _where(rule, c, inst)
                    warnings.append(f"{where}: cannot add {inj.noun}: {missed}; skipped")
                    failures.append((UNWRITABLE, f"{where}: cannot add {inj.noun}: {missed}"))
                continue
            if s.key is not None:  # a key of the map at the slot
                container, name, at = slot.path, s.key, (slot.pointer, s.tail)
            else:  # the slot is the field itself: its parent's pointer, and its own step
                container, name = slot.path[:-1], str(slot.path[-1])
                up, _, step = slot.pointer.rpartition("/")
                at = (up, "/" + step)
            why = patch.set(
                container, slot.base, name, value, rule.overwrite, slot.anchor, inj.unset, at
            )
            if why:
                where = _where(rule, c, inst)
                warnings.append(f"{where}: cannot set {name}: {why}; skipped")
                failures.append((UNWRITABLE, f"{where}: cannot set {name}: {why}"))


def _where(rule: Rule, c: ComponentView, inst: Instance) -> str:
    """An instance under a rule, in warnings (built only when there is one to give)."""
    return f"rule {rule.name!r}, component {c.name!r}, instance {inst.id!r}"
