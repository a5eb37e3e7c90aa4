"""The pod spec a fragmented definition implies.

Upstream's fragmented format has paths for some pod-spec fields (``schedulerNamePath``,
``priorityClassNamePath``, ``containersPath``, ``nodeAffinityPath``, ``podAffinityPath``,
``resourceClaimsPath``) and none for others (``nodeSelector``, ``tolerations``). When the paths
a component gives end in their pod-spec fields of one and the same object (Grove's
``.spec.template.cliques[].spec.podSpec.schedulerName`` and ``….podSpec.containers``), that
object is the pod spec, and the pod-spec policy fields without a path of their own
(:func:`implied_fields`: ``nodeSelector``, ``tolerations``, and ``priorityClassName`` or
``schedulerName`` where the definition gives no path for it) live there too: they are written
beside the written field that ends in it
(:func:`webhook.workload.slots.implied_slots`).

The inference is made from the expressions alone, once per component: a path counts when its
last steps are its pod-spec field's keys, bound to the whole expression (the expression is
``P.schedulerName``, ``P | .schedulerName`` or ``Q | P.schedulerName`` with ``P`` a plain path),
so that its locations are those of the object ``P`` plus the field. Paths that end elsewhere
(Argo's ``.spec.podPriorityClassName``) say nothing either way. The inference is refused, with
the reason (``validate``'s "policy fields carried" line), where the counted paths end in
different objects or no written field ends in the object (nowhere to find its locations).
``validate`` also judges the implied fields against the kind's schema where it has one
(:func:`webhook.validation.schemafields.check_implied`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from webhook.jq.paths import parse_plain
from webhook.jq.syntax import FIELD, OP, TokenizeError, tokenize
from webhook.karta.fields import FRAGMENTED, INJECTABLES, Injectable, Role
from webhook.karta.model import Component

__all__ = [
    "IMPLIED",
    "POD_SPEC_FIELDS",
    "Implied",
    "implied_fields",
    "implied_pod_spec",
    "object_of",
    "role_key",
]

#: Fragmented fields that name a pod-spec field, and that field's keys below the PodSpec.
POD_SPEC_FIELDS: Final[dict[Role, tuple[str, ...]]] = {
    Role.SCHEDULER_NAME: ("schedulerName",),
    Role.PRIORITY_CLASS_NAME: ("priorityClassName",),
    Role.CONTAINERS: ("containers",),
    Role.NODE_AFFINITY: ("affinity", "nodeAffinity"),
    Role.POD_AFFINITY: ("affinity", "podAffinity"),
    Role.RESOURCE_CLAIMS: ("resourceClaims",),
}
#: The policy fields that live in the pod spec: written at the implied pod spec when the
#: component has no fragmented path of their own (``nodeSelector`` and ``tolerations`` never
#: have one; ``priorityClassName`` where a definition gives no ``priorityClassNamePath``).
IMPLIED: Final[tuple[Injectable, ...]] = tuple(i for i in INJECTABLES if i.in_pod_spec is not None)
_KEYS: Final[dict[Role, str]] = {i.fragment: i.key for i in INJECTABLES if i.fragment}
#: written fragments that name a pod-spec field: where the implied fields' locations come from
_ANCHORS: Final[tuple[Role, ...]] = tuple(
    i.fragment for i in INJECTABLES if i.fragment in POD_SPEC_FIELDS
)


def implied_fields(c: Component) -> tuple[Injectable, ...]:
    """The pod-spec policy fields ``c`` places at its implied pod spec: those it has no
    fragmented path for (none when it implies no pod spec; derived once per component)."""
    return c.derive("implied-fields", _fields, c)


def _fields(c: Component) -> tuple[Injectable, ...]:
    if implied_pod_spec(c).expression is None:
        return ()
    return tuple(i for i in IMPLIED if i.fragment is None or not c.exprs.get(i.fragment))


def role_key(role: Role) -> str:
    """The policy field a written fragment locates (``schedulerNamePath``: ``schedulerName``)."""
    return _KEYS[role]


@dataclass(frozen=True)
class Implied:
    """A component's implied pod spec: ``expression`` (jq, e.g. ``.spec.predictor``) when
    inferred, the written fields that end in it (``anchors``) and every counted path that does
    (``evidence``); else None and ``reason``, why not (None too for a component that is not
    fragmented)."""

    expression: str | None
    anchors: tuple[Role, ...] = ()
    evidence: tuple[Role, ...] = ()
    reason: str | None = None


def implied_pod_spec(c: Component) -> Implied:
    """The pod spec ``c``'s fragment paths imply (derived once per component)."""
    return c.derive("implied-pod-spec", _infer, c)


def _infer(c: Component) -> Implied:
    if c.pattern != FRAGMENTED:
        return Implied(None)
    ends: dict[Role, str] = {}
    seen: dict[str, str] = {}  # normalised object -> as first written
    for role, suffix in POD_SPEC_FIELDS.items():
        expr = c.exprs.get(role)
        if not expr:
            continue
        obj = object_of(expr, suffix)
        if obj is not None:
            ends[role] = obj
            seen.setdefault(_normal(obj), obj)
    if not ends:
        return Implied(None, reason="no pod-spec field path ends in its pod-spec field")
    if len(seen) > 1:
        where = ", ".join(f"{r.value} in {o!r}" for r, o in ends.items())
        return Implied(None, reason=f"the pod-spec field paths end in different objects ({where})")
    anchors = tuple(r for r in _ANCHORS if r in ends)
    (obj,) = seen.values()
    if not anchors:
        return Implied(
            None,
            reason=f"no written pod-spec field ({', '.join(r.value for r in _ANCHORS)}) ends in {obj!r}",
        )
    return Implied(obj, anchors, tuple(ends))


def object_of(expr: str, suffix: tuple[str, ...]) -> str | None:
    """The object ``expr`` locates ``suffix`` (a pod-spec field's keys) in, as jq text, when
    ``expr`` is that object's path followed by the keys; None otherwise."""
    try:
        tokens = tokenize(expr)
    except TokenizeError:
        return None
    k = len(suffix)
    if len(tokens) <= k - 1:
        return None
    tail = tokens[len(tokens) - k :]
    if any(t.kind != FIELD or t.text != "." + name for t, name in zip(tail, suffix, strict=True)):
        return None
    head = tokens[: len(tokens) - k]
    if not head:
        return "."
    depth, pipe = 0, -1
    for j, t in enumerate(head):
        if t.kind != OP:
            continue
        if t.text in "([{":
            depth += 1
        elif t.text in ")]}":
            depth -= 1
        elif t.text == "|" and depth == 0:
            pipe = j
    segment = head[pipe + 1 :]
    if not segment:  # ``P | .schedulerName``
        obj = expr[: head[pipe].pos].rstrip()
        return obj or None
    if parse_plain(expr[segment[0].pos : tail[0].pos]) is None:
        return None
    return expr[: tail[0].pos].rstrip()


def _normal(expr: str) -> str:
    return " ".join(t.text for t in tokenize(expr))
