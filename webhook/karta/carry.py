"""Which policy fields a definition can carry, and which its kind refuses.

A definition locates a policy field (:data:`webhook.karta.fields.INJECTABLES`) by its pattern: a
whole pod template carries every one; a pod spec carries the pod-spec fields, and labels and
annotations only with a ``metadataPath``; a fragmented definition carries the fields it has a
fragmented path for, and the other pod-spec fields (``nodeSelector``, ``tolerations``, which
upstream's format has no path for, and a ``priorityClassName`` it gives no path for) where its
paths imply a pod spec (:mod:`webhook.karta.podspec`; ``validate`` says why not where they do
not).
A field a definition cannot locate is never written at a guessed place: a rule that sets it
is not applicable there (a failure, which ``failureMode`` decides).

Some kinds' own admission refuses pod fields the pod spec has (Knative Serving accepts
``nodeSelector``, ``tolerations`` and ``priorityClassName`` only behind its feature flags).
A definition says so with the annotation :data:`REFUSED_ANNOTATION`, a comma-separated list
of policy fields: a cluster-wide rule then leaves those fields out for that kind, without a
failure, and ``validate`` says so. A cluster that enabled the flags applies the definition
without the annotation (a cluster's Karta wins over the bundled one).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from webhook.base.errors import FieldError
from webhook.karta.fields import (
    FRAGMENTED,
    INJECTABLE_KEYS,
    INJECTABLES,
    POD_SPEC,
    TEMPLATE,
    WRITE_FRAGMENTS,
    Role,
)
from webhook.karta.model import Component, Karta
from webhook.karta.podspec import IMPLIED, implied_fields, implied_pod_spec

#: The annotation of a Karta that lists the policy fields its kind refuses.
REFUSED_ANNOTATION = "karta-webhook.run.ai/refused-pod-fields"
_WHERE = f"metadata.annotations[{REFUSED_ANNOTATION}]"


def _refused(raw: Mapping[str, Any]) -> tuple[frozenset[str], list[FieldError]]:
    meta = raw.get("metadata")
    notes = meta.get("annotations") if isinstance(meta, Mapping) else None
    text = notes.get(REFUSED_ANNOTATION) if isinstance(notes, Mapping) else None
    if text is None:
        return frozenset(), []
    if not isinstance(text, str):
        return frozenset(), [FieldError(_WHERE, "must be a string")]
    names = [n.strip() for n in text.split(",") if n.strip()]
    errors = [
        FieldError(_WHERE, f"unknown policy field {n!r}; known: {', '.join(INJECTABLE_KEYS)}")
        for n in names
        if n not in INJECTABLE_KEYS
    ]
    return frozenset(n for n in names if n in INJECTABLE_KEYS), errors


def declined(karta: Karta) -> frozenset[str]:
    """The policy fields ``karta`` says its kind refuses (derived once per definition)."""
    return karta.root.derive("declined", lambda: _refused(karta.raw)[0])


def declined_errors(karta: Karta) -> list[FieldError]:
    """What is wrong with the annotation (an unknown field name), for ``validate``."""
    return _refused(karta.raw)[1]


def carried(karta: Karta) -> tuple[str, ...]:
    """The policy fields some component of ``karta`` has a place for, in table order."""
    found = {k for c in karta.components for k in carried_by(c)}
    return tuple(k for k in INJECTABLE_KEYS if k in found)


def carried_by(c: Component) -> tuple[str, ...]:
    """The policy fields component ``c`` has a place for, in table order."""
    found: set[str] = set()
    pattern = c.pattern
    for inj in INJECTABLES:
        if pattern == TEMPLATE:
            found.add(inj.key)
        elif pattern == POD_SPEC:
            if inj.in_pod_spec is not None or c.exprs.get(Role.METADATA):
                found.add(inj.key)
        elif pattern == FRAGMENTED:
            own = inj.fragment is not None and bool(c.exprs.get(inj.fragment))
            if own or inj in implied_fields(c):
                found.add(inj.key)
    return tuple(k for k in INJECTABLE_KEYS if k in found)


#: What a scheduler policy needs at the least: a component with pods that carries none of
#: them is left out of every policy (``validate`` warns).
ESSENTIAL: tuple[str, ...] = ("labels", "annotations", "schedulerName")


def writes(c: Component) -> bool:
    """Whether ``c`` says where its pods' fields are written: a template, a pod spec, or a
    written fragment (a fragmented component of read-only paths alone, such as a GPU count,
    only describes its pods: NIMCache, a TrainJob's trainer)."""
    if c.pattern == FRAGMENTED:
        return any(c.exprs.get(r) for r in WRITE_FRAGMENTS)
    return c.pattern is not None


def bare(karta: Karta) -> list[str]:
    """A warning per component that writes (:func:`writes`) but carries none of
    :data:`ESSENTIAL`."""
    return [
        f"{c.field_path}: component {c.name!r} has pods but carries none of "
        f"{', '.join(ESSENTIAL)}: no policy can reach its pods"
        for c in karta.components
        if writes(c) and not set(carried_by(c)) & set(ESSENTIAL)
    ]


def per_component(karta: Karta) -> str | None:
    """The fields each pod-bearing component carries, when they are not all alike (a
    component that carries fewer than its siblings); None when they are."""
    rows = [(c.name, carried_by(c)) for c in karta.components if writes(c)]
    if len({fields for _, fields in rows}) <= 1:
        return None
    return "; ".join(f"{name}: {', '.join(fields) or 'none'}" for name, fields in rows)


def not_implied(karta: Karta) -> list[str]:
    """Why a fragmented component that writes something has no implied pod spec (see
    :mod:`webhook.karta.podspec`), one reason per such component, for ``validate``."""
    out = []
    for c in karta.components:
        if c.pattern != FRAGMENTED or not any(c.exprs.get(r) for r in WRITE_FRAGMENTS):
            continue
        reason = implied_pod_spec(c).reason
        if reason is not None:
            out.append(f"component {c.name!r}: {reason}")
    return out


def summary(karta: Karta) -> str | None:
    """One line for ``validate``: the fields the definition carries, those it has no place
    for and those its kind refuses; None for a definition that writes nothing."""
    can = carried(karta)
    if not can:
        return None
    refused = declined(karta)
    takes = [k for k in can if k not in refused]
    line = f"policy fields carried: {', '.join(takes) or 'none'}"
    missing = [k for k in INJECTABLE_KEYS if k not in can]
    if missing:
        line += f"; no place for {', '.join(missing)} (rules that set them are not applicable)"
        if any(i.key in missing for i in IMPLIED) and (why := not_implied(karta)):
            line += f"; no pod spec implied: {'; '.join(why)}"
    if (rows := per_component(karta)) is not None:
        line += f"; per component: {rows}"
    left = [k for k in INJECTABLE_KEYS if k in refused]
    if left:
        line += f"; refused by the kind, per {REFUSED_ANNOTATION}: {', '.join(left)}"
    return line
