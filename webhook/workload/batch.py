"""What a resolution evaluates: every jq expression a definition's components need at one
:class:`~webhook.karta.fields.Need` (:class:`Requests`, derived once per definition), and the
outcomes of one object's evaluation handed out by expression (:class:`Batch`), with the
components whose write fields are keys of one parent object (:class:`Shared`), whose requests
are deferred on the mutation path.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from webhook.jq.engine import (
    Engine,
    Outcome,
    Path_,
    Prepared,
    key_chain,
    pointer,
    prepare,
)
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


@dataclass(frozen=True)
class Requests:
    """What resolution at one :class:`Need` evaluates for a definition: every (expression,
    mode) once, prepared for the engine, and where each one's outcome is. Derived once per
    definition (definitions are immutable; this is on every request's path)."""

    prepared: Prepared
    index: Mapping[tuple[str, Mode], int]
    #: a mutation's requests that only components resolved by
    #: :func:`~webhook.workload.resolve._by_parent` make (plain key paths, walked in process):
    #: evaluated only when one of them is resolved in full
    deferred: Prepared
    deferred_index: Mapping[tuple[str, Mode], int]


def _wanted(c: Component, need: Need, root: bool) -> list[tuple[Role, str, Mode]]:
    """The component's fields that resolution at ``need`` evaluates: those of the spec pattern
    it follows, its instance ids and scale, and (the root's only) its status (derived once)."""
    return c.derive(("wanted", need, root), _wanted_fields, c, need, root)


def _wanted_fields(c: Component, need: Need, root: bool) -> list[tuple[Role, str, Mode]]:
    out = []
    for f in COMPONENT_FIELDS:
        expr = c.exprs.get(f.role)
        if not expr or f.need > need or (f.root_only and not root):
            continue
        if f.pattern is not None and f.pattern != c.pattern:
            continue
        out.append((f.role, expr, f.mode))
    return out


def requests_for(karta: Karta, need: Need, full: bool) -> Requests:
    return karta.root.derive(("requests", need, full), _requests_of, karta, need, full)


def _requests_of(karta: Karta, need: Need, full: bool) -> Requests:
    now: list[tuple[str, Mode]] = []
    later: list[tuple[str, Mode]] = []
    for c in karta.components:
        defer = not full and c is not karta.root and shared_fields(c) is not None
        wanted = _wanted(c, need, c is karta.root)
        (later if defer else now).extend((expr, mode) for _, expr, mode in wanted)
    root_status = karta.root.status
    if full and root_status:
        for matchers in root_status.mappings.values():
            now.extend(
                (status.tostring(m.by_expression), "values") for m in matchers if m.by_expression
            )
    index = _positions(now)
    later_index = _positions(r for r in later if r not in index)
    return Requests(prepare(list(index)), index, prepare(list(later_index)), later_index)


def _positions(requests: Iterable[tuple[str, Mode]]) -> dict[tuple[str, Mode], int]:
    """Each distinct request and its place, in first-seen order (the dict's order)."""
    return {r: i for i, r in enumerate(dict.fromkeys(requests))}


class Batch:
    """The outcomes of one object's requests, handed out by expression and mode (the
    deferred ones evaluated when first asked for)."""

    def __init__(
        self, requests: Requests, engine: Engine, obj: Any, outcomes: list[Outcome]
    ) -> None:
        self.requests = requests
        self.engine = engine
        self.obj = obj
        self.outcomes = outcomes
        self.later: list[Outcome] | None = None
        self.failures: list[str] = []  # write paths whose evaluation failed

    def get(self, expr: str | None, mode: Mode) -> Outcome | None:
        """The outcome of a requested expression; None when it was not requested."""
        if not expr:
            return None
        i = self.requests.index.get((expr, mode))
        if i is not None:
            return self.outcomes[i]
        i = self.requests.deferred_index.get((expr, mode))
        if i is None:
            return None
        if self.later is None:
            self.later = self.engine.evaluate(self.requests.deferred, self.obj)
        return self.later[i]


def mutation_requests(karta: Karta) -> Requests:
    """What a mutation of ``karta``'s objects evaluates (``resolve(..., full=False)``)."""
    return requests_for(karta, Need.MUTATE, False)


def write_locations(
    batch: Batch, expr: str | None, c: Component, field: str, warnings: list[str]
) -> list[tuple[Path_, Any]]:
    """The locations a write field found; a failure is a warning and a mutation failure."""
    out = batch.get(expr, "paths")
    if out is None:
        return []
    if out.error:
        what = f"component {c.name!r}: {field}"
        warnings.append(f"{what} {expr!r}: {out.error}")
        batch.failures.append(f"{what}: {out.error}")
    return out.items


@dataclass(frozen=True)
class Shared:
    """A component's write fields as keys of one parent object: the parent's keys, its
    length, and each field's injectable, location and JSON Pointer (in table order)."""

    parent: tuple[str, ...]
    base: int
    fields: tuple[tuple[str, tuple[str, ...], str], ...]


def shared_fields(c: Component) -> Shared | None:
    """The component's write fields as keys of one parent object, or None (derived once)."""
    return c.derive("shared", _shared_parent, c)


def _shared_parent(c: Component) -> Shared | None:
    if c.pattern != FRAGMENTED or c.exprs.get(Role.INSTANCE_ID):
        return None
    fields = []
    for inj in FRAGMENT_INJECTABLES:
        assert inj.fragment is not None
        expr = c.exprs.get(inj.fragment)
        if expr:
            keys = key_chain(expr)
            if not keys:
                return None
            fields.append((inj.key, keys, pointer(keys)))
    parents = {keys[:-1] for _, keys, _ in fields}
    if len(parents) != 1:
        return None
    (parent,) = parents
    if not parent:
        return None
    return Shared(parent, len(parent), tuple(fields))
