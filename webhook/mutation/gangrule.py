"""A rule's ``gang`` setting (``native`` or ``native-workload``): the workloads it matches get
Kubernetes' own gang (``scheduling.k8s.io/v1beta1`` PodGroups, made by the server's
controller; their pods join at creation by the Pod webhook). The rule stamps
:data:`~webhook.workload.gang.GANG_LABEL` into every pod template it matches, which is what
scopes the Pod webhook to these workloads' pods.

The scheduler refuses a whole gang whose pods differ in ``schedulerName`` or priority, and
only kube-scheduler reads the PodGroup: a policy that would do either is refused when it
loads, each error at the rule's field (:func:`gang_conflicts`).
"""

from __future__ import annotations

from collections.abc import Iterable
from fnmatch import fnmatchcase
from typing import Any

from webhook.base.errors import FieldError
from webhook.mutation.policy import Entries, Match, Rule
from webhook.workload.gang import DEFAULT_SCHEDULER, GANG_LABEL, MODES

__all__ = ["GANG_LABEL", "MODES", "gang_conflicts", "gang_labels", "parse_gang"]


def parse_gang(value: Any, where: str, errors: list[FieldError]) -> str | None:
    """A rule's ``gang`` (at ``where``), checked: one of :data:`MODES`, or absent."""
    if value is None:
        return None
    if value not in MODES:
        errors.append(FieldError(where, f"{value!r} is not one of {', '.join(MODES)}"))
        return None
    return str(value)


def gang_labels(labels: Entries, mode: str | None) -> Entries:
    """A rule's labels with the gang's own added when the rule turns the gang on."""
    if mode is None:
        return labels
    return (*((k, v) for k, v in labels if k != GANG_LABEL), (GANG_LABEL, mode))


def _value(rule: Rule, key: str) -> str | None:
    for _, template in rule.sets.get(key, ()):
        return template
    return None


def _kinds_meet(a: Match, b: Match) -> bool:
    if not a.kinds or not b.kinds:
        return True
    return any(
        ka == kb and (ga is None or gb is None or ga == gb)
        for ga, ka in a.kinds
        for gb, kb in b.kinds
    )


def _namespaces_meet(a: Match, b: Match) -> bool:
    if not a.namespaces or not b.namespaces:
        return True
    return any(fnmatchcase(x, y) or fnmatchcase(y, x) for x in a.namespaces for y in b.namespaces)


def _overlap(gang: Rule, other: Rule) -> bool:
    """Whether ``other`` may match a workload ``gang`` matches, as far as can be told before
    any request: kinds and namespaces (label selectors are decided per request: a rule with
    one is taken not to overlap; the Pod path leaves a pod another scheduler takes alone)."""
    if other.match.selective and other is not gang:
        return False
    return _kinds_meet(gang.match, other.match) and _namespaces_meet(gang.match, other.match)


def gang_conflicts(rules: Iterable[tuple[str, Rule]]) -> list[FieldError]:
    """Errors of rules (``(where, rule)``, in order) that would give one native gang two
    scheduler names, two priority classes, or a scheduler other than kube-scheduler's; and of
    a gang rule that matches part of a workload only (its other pods would be left out of a
    gang that waits for them)."""
    got = list(rules)
    errors: list[FieldError] = []
    gangs = [(where, r) for where, r in got if r.gang]
    for where, g in gangs:
        if g.match.components or g.match.instances:
            field = "components" if g.match.components else "instances"
            errors.append(
                FieldError(
                    f"{where}.match.{field}",
                    "a gang is the whole workload's: a rule with gang matches workloads, not "
                    "components or instances (pods left out would keep the gang waiting)",
                )
            )
    for where, r in got:
        for gwhere, g in gangs:
            if not _overlap(g, r):
                continue
            scheduler = _value(r, "schedulerName")
            if scheduler is not None and scheduler != DEFAULT_SCHEDULER:
                errors.append(
                    FieldError(
                        f"{where}.schedulerName",
                        f"{scheduler!r} for workloads {gwhere} gangs natively: only "
                        f"kube-scheduler ({DEFAULT_SCHEDULER}) reads a PodGroup (KAI gangs on "
                        "its own: give its workloads a rule without gang)",
                    )
                )
                break
            partial = r.match.components or r.match.instances
            for key in ("schedulerName", "priorityClassName"):
                if partial and _value(r, key) is not None:
                    errors.append(
                        FieldError(
                            f"{where}.{key}",
                            f"set on part of a workload ({'components' if r.match.components else 'instances'}) "
                            f"that {gwhere} gangs: one gang's pods would have two {key}s, and the "
                            "scheduler refuses the whole gang",
                        )
                    )
            if partial:
                break
    return errors
