"""The rules of a policy that can apply to a request, found by what they match: the kind
(group and Kind), the namespace (names and patterns) and the definition's components. A
request meets only those (:func:`applicable`), so a rule for another kind, another namespace
or components the definition has not costs it nothing: its selectors are not evaluated, its
``$(…)`` values not looked up, and the planners do not pass it by one rule at a time.

The index is made once per policy (it is replaced only when one of its sources changes):
rules by Kind, plus those of any Kind; among those of one kind and definition, the rules of
every namespace, by exact namespace name, and by pattern (one regular expression of all the
patterns tells a namespace none matches at once). What :func:`applicable` gives for a set of
rules is one :class:`~webhook.mutation.policy.Policy` object, kept, so that what the planners
and :mod:`webhook.mutation.scope` derive from it is derived once.

A rule left out is exactly one the planners would pass by:
:meth:`~webhook.mutation.policy.Match.workload` is false for it, or it names only components
the definition does not have (so it matches no template of the workload).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from fnmatch import fnmatchcase, translate

from webhook.base.gvk import GVK
from webhook.karta.model import Karta
from webhook.mutation.policy import Policy, Rule

#: sets of rules kept per policy, and (kind, namespace) answers, before the store is emptied
_KEEP = 4096
_WILD = re.compile(r"[*?\[]")


@dataclass(slots=True)
class _Kinded:
    """The rules of one policy that can apply to one kind under one definition, by namespace."""

    #: positions of the rules for every namespace
    every: tuple[int, ...]
    #: positions by exact namespace name
    named: dict[str, tuple[int, ...]]
    #: positions of the rules with namespace patterns, with their patterns
    patterns: tuple[tuple[int, tuple[str, ...]], ...]
    #: matches a namespace that some pattern matches (None: no patterns)
    any_pattern: re.Pattern[str] | None
    #: the positions by namespace, as decided
    by_namespace: dict[str, tuple[int, ...]] = field(default_factory=dict)


@dataclass(slots=True)
class _Index:
    policy: Policy
    #: positions of the rules by Kind, and of those for any Kind
    by_kind: dict[str, tuple[int, ...]]
    any_kind: tuple[int, ...]
    kinded: dict[tuple[GVK, frozenset[str]], _Kinded] = field(default_factory=dict)
    #: one policy per set of positions
    made: dict[tuple[int, ...], Policy] = field(default_factory=dict)


#: the newest policies' indexes (a policy is replaced only when one of its sources changes)
_INDEXES: list[_Index] = []


def _index(policy: Policy) -> _Index:
    for got in _INDEXES:
        if got.policy is policy:
            return got
    by_kind: dict[str, list[int]] = {}
    any_kind: list[int] = []
    for i, rule in enumerate(policy.rules):
        kinds = {k for _, k in rule.match.kinds}
        if not kinds:
            any_kind.append(i)
        for k in kinds:
            by_kind.setdefault(k, []).append(i)
    made = _Index(policy, {k: tuple(v) for k, v in by_kind.items()}, tuple(any_kind))
    _INDEXES.insert(0, made)
    del _INDEXES[8:]
    return made


def _kinded(index: _Index, gvk: GVK, components: frozenset[str]) -> _Kinded:
    key = (gvk, components)
    got = index.kinded.get(key)
    if got is not None:
        return got
    rules = index.policy.rules
    every: list[int] = []
    named: dict[str, list[int]] = {}
    patterns: list[tuple[int, tuple[str, ...]]] = []
    for i in sorted({*index.by_kind.get(gvk.kind, ()), *index.any_kind}):
        m = rules[i].match
        if m.kinds and not any(k == gvk.kind and (g is None or g == gvk.group) for g, k in m.kinds):
            continue
        if m.components and components.isdisjoint(m.components):
            continue
        if not m.namespaces:
            every.append(i)
        elif any(_WILD.search(p) for p in m.namespaces):
            patterns.append((i, m.namespaces))
        else:
            for ns in set(m.namespaces):
                named.setdefault(ns, []).append(i)
    pats = {p for _, ps in patterns for p in ps}
    regex = re.compile("|".join(f"(?:{translate(p)})" for p in sorted(pats))) if pats else None
    got = _Kinded(tuple(every), {k: tuple(v) for k, v in named.items()}, tuple(patterns), regex)
    if len(index.kinded) >= _KEEP:
        index.kinded.clear()
    index.kinded[key] = got
    return got


def _positions(k: _Kinded, namespace: str) -> tuple[int, ...]:
    got = k.by_namespace.get(namespace)
    if got is not None:
        return got
    named = k.named.get(namespace, ())
    if k.any_pattern is not None and k.any_pattern.match(namespace):
        pats = tuple(i for i, ps in k.patterns if any(fnmatchcase(namespace, p) for p in ps))
    else:
        pats = ()
    got = tuple(sorted((*k.every, *named, *pats))) if named or pats else k.every
    if len(k.by_namespace) >= _KEEP:
        k.by_namespace.clear()
    k.by_namespace[namespace] = got
    return got


def components_of(karta: Karta) -> frozenset[str]:
    """The names of ``karta``'s components (kept on its root component)."""
    return karta.root.derive(
        "policyindex.components", lambda: frozenset(c.name for c in karta.components)
    )


def applicable(policy: Policy, gvk: GVK, namespace: str, karta: Karta) -> Policy:
    """``policy`` with only the rules that can apply to a workload of ``gvk`` in ``namespace``
    (``""``: cluster-scoped) under ``karta``, in order; ``policy`` itself when every rule can."""
    if not policy.rules:
        return policy
    index = _index(policy)
    kinded = _kinded(index, gvk, components_of(karta))
    positions = _positions(kinded, namespace)
    if len(positions) == len(policy.rules):
        return policy
    got = index.made.get(positions)
    if got is None:
        if len(index.made) >= _KEEP:
            index.made.clear()
        chosen: tuple[Rule, ...] = tuple(policy.rules[i] for i in positions)
        got = Policy(chosen, policy.source, policy.operations, policy.failure_mode)
        index.made[positions] = got
    return got
