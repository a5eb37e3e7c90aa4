"""The commonest mutation planned in one pass over the object: the express lane.

For a definition whose one template component keeps its templates at a plain path with at
most one iteration, over a list (JobSet's ``.spec.replicatedJobs[].template.spec.template``
with ``.spec.replicatedJobs[].name`` for ids, a Deployment's ``.spec.template``), and a
request that exactly one rule of the policy applies to, without narrowing to components or
instances: :func:`plan` gives what :func:`webhook.stamp.plan` gives from the walked paths,
walking the object once and writing each template's ops as it goes. None whenever the object
or the policy is anything else (an iteration over an object or over nothing, an id that is
not a non-empty string, no template, more than one rule or none, a value check that fails),
and then the stamp lane plans it from the evaluated paths as before, or declines in turn.

What makes it cheaper is what it leaves out: no lists of locations and values between the
walk and the plan, no JSON Pointer built from a location (a template's is its index between
two fixed texts), and none of the stamp lane's bookkeeping of what earlier rules created,
since only one rule applies. In the server the mutation runs on cold caches, where the
code and data a request touches count more than how often it loops (README, Performance).
``tests/test_stamp.py`` holds it to the stamp lane and the general path on every sample and
on generated templates.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from webhook.definitions import Component, Karta
from webhook.jqexpr import pointer
from webhook.jqpath import follow
from webhook.limits import MAX_RESULTS
from webhook.mutation import Plan, variables
from webhook.policy import Policy, Rule, Setting
from webhook.stamp import actions, lane
from webhook.workload import identity


@dataclass(frozen=True)
class _Route:
    """Where a definition keeps its templates, as this lane walks them (derived once)."""

    component: Component
    #: keys from the object to the iteration, or to the template when there is none
    head: tuple[str, ...]
    iterate: bool
    #: keys from an iterated item to its template (empty without an iteration)
    tail: tuple[str, ...]
    #: keys from an iterated item to its instance id; None without an iteration, where the
    #: one template's id is the component's name (as :func:`webhook.workload.instance_ids`)
    id_keys: tuple[str, ...] | None
    #: JSON Pointers of ``head`` and ``tail``: a template's is ``head_at/i tail_at``
    head_at: str
    tail_at: str


def route(karta: Karta) -> _Route | None:
    """The definition's route when this lane may plan its objects, else None."""
    return karta.root.derive("express", _route_of, karta)


def _route_of(karta: Karta) -> _Route | None:
    layout = lane(karta)
    if layout is None or len(layout.components) != 1 or not layout.apart:
        return None
    shared = layout.prepared.shared
    if shared is None or len(shared[0]) > 1:
        return None
    prefix, tails = shared
    c, at_paths, at_ids = layout.components[0]
    keys, paths = tails[at_paths]
    if not paths:
        return None
    id_keys: tuple[str, ...] | None = None
    if at_ids is not None:
        id_keys, id_paths = tails[at_ids]
        if id_paths:
            return None
    if prefix:  # keys, then the iteration, then the template's keys
        if id_keys is None:
            return None  # ids from the templates' places: the stamp lane works them out
        head, tail = prefix[0], keys
        return _Route(c, head, True, tail, id_keys, pointer(head), pointer(tail))
    if id_keys is not None:
        return None
    return _Route(c, keys, False, (), None, pointer(keys), "")


#: One value as this lane writes it: the key in its map (None for a single field), the JSON
#: Pointer of the value below the template, the index of its setting in
#: :attr:`_Program.settings`, and the values that count as unset.
_Entry = tuple[str | None, str, int, tuple[str, ...]]


@dataclass(frozen=True)
class _Program:
    """What one rule writes in each template, grouped as the stamp lane writes it: the maps
    in ``metadata`` (each with its key, its pointer below the template and its entries),
    then the fields of ``spec`` (each with its key and entry)."""

    maps: tuple[tuple[str, str, tuple[_Entry, ...]], ...]
    fields: tuple[tuple[str, _Entry], ...]
    #: pointer of ``metadata`` below the template, when a map is written there
    metadata_at: str
    #: every setting with its value check (None: none, or a constant, checked at load)
    settings: tuple[tuple[Setting, Callable[[str], list[str]] | None], ...]
    #: the indexes of the settings whose value differs by template ($(component), $(instance))
    per_instance: tuple[int, ...]


def _program_of(rule: Rule) -> _Program | None:
    """The rule's program (derived once per rule), when it fits this lane: values in
    ``metadata``'s maps, then single fields of ``spec``, and no constant the injectable
    rejects; else None."""
    acts, invalid = actions(rule)
    if invalid:
        return None
    maps: list[tuple[str, str, list[_Entry]]] = []
    fields: list[tuple[str, _Entry]] = []
    settings: list[tuple[Setting, Callable[[str], list[str]] | None]] = []
    metadata_at = ""
    for parent, place, parent_at, place_at, value_at, key, value, s, check, unset in acts:
        entry: _Entry = (key, value_at, len(settings), unset)
        settings.append((s, check if value is None else None))
        if key is not None and parent == "metadata" and not fields:
            if not maps or maps[-1][0] != place:
                maps.append((place, place_at, []))
            maps[-1][2].append(entry)
            metadata_at = parent_at
        elif key is None and parent == "spec":
            fields.append((place, entry))
        else:
            return None  # another shape, or an order the stamp lane would write otherwise
    if len({m[0] for m in maps}) != len(maps):
        return None
    return _Program(
        tuple((p, at, tuple(es)) for p, at, es in maps),
        tuple(fields),
        metadata_at,
        tuple(settings),
        tuple(j for j, (s, _) in enumerate(settings) if s.per_instance),
    )


def plan(karta: Karta, policy: Policy, obj: dict[str, Any]) -> Plan | None:
    """The patch ``policy`` makes on ``obj`` (what :func:`webhook.stamp.plan` gives), or None
    when this lane does not take the object (see the module text). Written out in one
    function, walks included: it runs on every request of the kinds it fits."""
    way = route(karta)
    if way is None:
        return None
    gvk, name, namespace = identity(karta, obj)
    rule = None
    for r in policy.rules:
        if r.match.workload(gvk, namespace):
            if rule is not None:
                return None  # two rules: what the first creates, the second writes into
            rule = r
    if rule is None or rule.match.components or rule.match.instances:
        return None
    prog = rule.derive("express", _program_of, rule)
    if prog is None:
        return None
    ok, there = follow(obj, way.head)  # the walk, as jqpath.walk_shared walks it
    if not ok:
        return None
    if way.iterate:
        if type(there) is not list or len(there) > MAX_RESULTS:
            return None
        items: list[Any] = there
    else:
        items = [there]
    found: list[tuple[str, str, dict[str, Any]]] = []
    component = way.component.name
    id_keys = way.id_keys
    for i, item in enumerate(items):
        template = item  # follow(item, way.tail), written out: it runs for every template
        for key in way.tail:
            if type(template) is dict:
                template = template.get(key)
            elif template is not None:
                return None
        iid: Any = component
        if id_keys is not None:
            iid = item
            for key in id_keys:
                if type(iid) is dict:
                    iid = iid.get(key)
                elif iid is not None:
                    return None
            if type(iid) is not str or not iid:
                return None  # ids from the places: the stamp lane works them out
        if isinstance(template, dict):
            at = f"{way.head_at}/{i}{way.tail_at}" if way.iterate else way.head_at
            found.append((iid, at, template))
    if not found:
        return None
    # Every value once (those of one template each, per template), checked as it is made.
    values = variables(name, namespace, gvk.kind) if rule.variable else None
    once: list[str] = []
    for s, check in prog.settings:
        given = s.constant
        if given is None:
            given = "" if s.per_instance else s.value(values)
            if check is not None and not s.per_instance and check(given):
                return None
        once.append(given)
    overwrite = rule.overwrite
    ops: list[dict[str, Any]] = []
    mutated = 0
    for iid, at, template in found:
        vals = once
        if prog.per_instance:
            assert values is not None
            values["component"], values["instance"] = component, iid
            vals = list(once)
            for j in prog.per_instance:
                s, check = prog.settings[j]
                value = vals[j] = s.value(values)
                if check is not None and check(value):
                    return None
        before = len(ops)
        if prog.maps:
            meta = template.get("metadata")
            if meta is None:  # one op adds metadata with every map
                made = {
                    place: {e[0]: vals[e[2]] for e in entries} for place, _, entries in prog.maps
                }
                ops.append({"op": "add", "path": at + prog.metadata_at, "value": made})
            elif not isinstance(meta, dict):  # in the way: the general path judges
                return None
            else:
                for place, place_at, entries in prog.maps:
                    cur = meta.get(place)
                    if cur is None:  # one op adds the map with its keys
                        box = {e[0]: vals[e[2]] for e in entries}
                        ops.append({"op": "add", "path": at + place_at, "value": box})
                    elif not isinstance(cur, dict):
                        return None
                    else:
                        for name_in_map, value_at, j, unset in entries:
                            value = vals[j]
                            old = cur.get(name_in_map)
                            if old is None or (old != value and (overwrite or old in unset)):
                                ops.append({"op": "add", "path": at + value_at, "value": value})
        if prog.fields:
            spec = template.get("spec")
            if not isinstance(spec, dict):  # no spec: the general path warns
                return None
            for place, (_, value_at, j, unset) in prog.fields:
                value = vals[j]
                old = spec.get(place)
                if old is None or (old != value and (overwrite or old in unset)):
                    ops.append({"op": "add", "path": at + value_at, "value": value})
        if len(ops) > before:
            mutated += 1
    return Plan(ops, [], mutated, len(found), [])
