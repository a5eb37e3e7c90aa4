"""What a locator evaluates, and one object's outcomes of it.

:class:`Requests` are every jq expression a definition's components need at one
:class:`~webhook.karta.fields.Need`, each (expression, mode) once, prepared for the engine as one
batch, with the place of each component field's outcome in it (derived once per definition, by
:class:`webhook.workload.locator.Locator`). A component whose write fields are keys of one parent
object (:class:`Shared`: a Milvus component) is resolved on the mutation path from that parent
alone, so the batch asks for the parent's value, and the component's own requests are *deferred*:
evaluated only when one such component must be resolved in full. :class:`Batch` hands one
object's outcomes out by place.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

from webhook.base.pointers import Path_, pointer
from webhook.jq.engine import Engine, Outcome, Prepared, prepare
from webhook.jq.paths import Guard, Key, chain_expression, parse_guarded
from webhook.karta.fields import (
    COMPONENT_FIELDS,
    FRAGMENT_INJECTABLES,
    FRAGMENTED,
    Mode,
    Need,
    Role,
)
from webhook.karta.model import Component, Karta
from webhook.workload import phase as status

Request = tuple[str, Mode]


@dataclass(frozen=True)
class Requests:
    """What a locator evaluates: the batch (``prepared``, every request once) and the deferred
    requests after it; ``index`` gives each request's place, the deferred ones numbered on
    from the batch's length (so one place names an outcome either way)."""

    prepared: Prepared
    deferred: Prepared
    index: Mapping[Request, int]

    def place(self, expr: str | None, mode: Mode) -> int | None:
        return self.index.get((expr, mode)) if expr else None


def wanted(c: Component, need: Need, root: bool) -> list[tuple[Role, str, Mode]]:
    """The component's fields that resolution at ``need`` evaluates: those of the spec pattern
    it follows, its instance ids and scale, and (the root's only) its status."""
    out = []
    for f in COMPONENT_FIELDS:
        expr = c.exprs.get(f.role)
        if not expr or f.need > need or (f.root_only and not root):
            continue
        if f.pattern is not None and f.pattern != c.pattern:
            continue
        out.append((f.role, expr, f.mode))
    return out


def requests_of(karta: Karta, need: Need, full: bool) -> Requests:
    """Every request of ``karta``'s components at ``need``: with ``full=False`` (a mutation),
    a component resolved by its shared parent asks for that parent and defers the rest."""
    now: list[Request] = []
    later: list[Request] = []
    for c in karta.components:
        root = c is karta.root
        shared = None if full else shared_fields(c)
        if shared is not None:
            now.append((shared.expression, "values"))
        defer = shared is not None and not root  # the root's parent may be missing: created
        wants = wanted(c, need, root)
        (later if defer else now).extend((expr, mode) for _, expr, mode in wants)
    root_status = karta.root.status
    if full and root_status:
        for matchers in root_status.mappings.values():
            now.extend(
                (status.tostring(m.by_expression), "values") for m in matchers if m.by_expression
            )
    index = _positions(now)
    batch = list(index)
    deferred = [r for r in dict.fromkeys(later) if r not in index]
    for k, r in enumerate(deferred):
        index[r] = len(batch) + k
    return Requests(prepare(batch), prepare(deferred), index)


def _positions(requests: Iterable[Request]) -> dict[Request, int]:
    """Each distinct request and its place, in first-seen order (the dict's order)."""
    return {r: i for i, r in enumerate(dict.fromkeys(requests))}


class Found(NamedTuple):
    """What one object's batch gave: each request's items, the outcomes when they were
    evaluated one by one (None: the paths were walked together, and each gave items), and
    whether any failed."""

    items: Sequence[list[Any]]
    outcomes: Sequence[Outcome] | None
    failed: bool


class Batch:
    """One object's outcomes, handed out by place (the deferred ones evaluated when first
    asked for), and the write paths whose evaluation failed."""

    __slots__ = ("engine", "failures", "found", "later", "obj", "requests", "size")

    def __init__(self, requests: Requests, engine: Engine, obj: Any, found: Found) -> None:
        self.requests = requests
        self.engine = engine
        self.obj = obj
        self.found = found
        self.size = len(found.items)
        self.later: list[Outcome] | None = None
        self.failures: list[str] = []  # write paths whose evaluation failed

    def at(self, i: int | None) -> Outcome | None:
        """The outcome at place ``i``; None for no place (the field was not requested)."""
        if i is None:
            return None
        if i < self.size:
            outs = self.found.outcomes
            return outs[i] if outs is not None else Outcome(self.found.items[i])
        if self.later is None:
            self.later = self.engine.evaluate(self.requests.deferred, self.obj)
        return self.later[i - self.size]

    def get(self, expr: str | None, mode: Mode) -> Outcome | None:
        """The outcome of a requested expression (a status mapping's); None when it was not
        requested."""
        return self.at(self.requests.place(expr, mode))


def write_locations(
    batch: Batch, at: int | None, c: Component, role: Role, field: str, warnings: list[str]
) -> list[tuple[Path_, Any]]:
    """The locations the write field ``role`` (its outcome at place ``at``, named ``field`` in
    messages) found; a failure is a warning and a mutation failure."""
    out = batch.at(at)
    if out is None:
        return []
    if out.error:
        what = f"component {c.name!r}: {field}"
        warnings.append(f"{what} {c.exprs.get(role)!r}: {out.error}")
        batch.failures.append(f"{what}: {out.error}")
    return out.items


@dataclass(frozen=True)
class Shared:
    """A component's write fields as keys of one parent object: the parent's keys, its
    length, the expression that gives its value, each field's injectable, location and
    JSON Pointer (in table order), and the id of the one instance it has when the parent is
    an object (the constant of its ``instanceIdPath``, else the component's name)."""

    parent: tuple[str, ...]
    base: int
    expression: str
    fields: tuple[tuple[str, tuple[str, ...], str], ...]
    id: str


def shared_fields(c: Component) -> Shared | None:
    """The component's write fields as keys of one parent object, or None (derived once)."""
    return c.derive("shared", _shared_parent, c)


def _shared_parent(c: Component) -> Shared | None:
    """:class:`Shared` when every write field is the parent's keys then one more, either all
    plain (``.spec.components.proxy.podLabels``) or all guarding exactly the parent
    (``.spec.components.proxy // empty | .podLabels``: nothing where the parent is null, as
    the shortcut takes it); an ``instanceIdPath`` only as that guard then a non-empty
    constant (``.spec.components.proxy // empty | "proxy"``: one id where the parent is an
    object, none where it is null, as the shortcut gives)."""
    if c.pattern != FRAGMENTED:
        return None
    fields = []
    guards = set()
    for inj in FRAGMENT_INJECTABLES:
        assert inj.fragment is not None
        expr = c.exprs.get(inj.fragment)
        if expr:
            found = _guarded_keys(expr)
            if found is None or found[2] is not None:
                return None
            keys, guard, _ = found
            fields.append((inj.key, keys, pointer(keys)))
            guards.add(guard)
    parents = {keys[:-1] for _, keys, _ in fields}
    if len(parents) != 1 or len(guards) != 1:
        return None
    (parent,), (guard,) = parents, guards
    if not parent or guard not in (None, len(parent)):
        return None
    name = c.name
    if id_expr := c.exprs.get(Role.INSTANCE_ID):
        found = _guarded_keys(id_expr)
        if guard is None or found is None or found[:2] != (parent, guard) or not found[2]:
            return None
        name = found[2]
    return Shared(parent, len(parent), chain_expression(parent), tuple(fields), name)


def _guarded_keys(expr: str) -> tuple[tuple[str, ...], int | None, str | None] | None:
    """A path of object keys whose first ``n`` may be guarded (``P // empty | .key``): its
    keys, ``n`` (None: no guard) and its constant tail (``| "name"``), or None for any other
    expression."""
    found = parse_guarded(expr)
    if found is None:
        return None
    steps, const = found
    guard = None
    if steps and isinstance(steps[0], Guard):
        guard = steps[0].n
        steps = steps[1:]
    keys = tuple(s.name for s in steps if isinstance(s, Key))
    return (keys, guard, const) if len(keys) == len(steps) else None
