"""A policy's size against the bounds of :mod:`webhook.base.limits`: its rules, their settings
by field, the values their matches list, and the bytes they may add to one pod template.

:class:`Tally` counts rule by rule while a policy is read, so a policy past a bound is
refused as soon as one is passed; :func:`bounds_errors` checks rules already read, from
several sources in force together. docs/policy-bounds.md has the bounds and why.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from webhook.base.errors import FieldError
from webhook.base.limits import (
    MAX_MATCH_VALUES,
    MAX_POLICY_ADDED_BYTES,
    MAX_POLICY_MATCH_VALUES,
    MAX_POLICY_RULES,
    MAX_RULE_SETTINGS,
)
from webhook.karta.fields import POLICY_ENTRIES, Injectable
from webhook.mutation.templates import longest

if TYPE_CHECKING:  # the model imports this module (it keeps these names importable)
    from webhook.mutation.policy import Rule

#: a toleration's bytes besides its key and value: its operator, its effect, the
#: ``tolerationSeconds`` an int64 spells in at most 20 characters, and the field names
_TOLERATION_FIXED = len(
    '{"key":"","operator":"Exists","value":"","effect":"PreferNoSchedule","tolerationSeconds":-9223372036854775808}'
)


def added_bytes(inj: Injectable, key: str | None, template: str) -> int:
    """What one setting may add to a pod template, in bytes: its key (or the field's name) and
    its value rendered at its longest, capped by what the field can hold."""
    value = min(longest(template), inj.rendered_max)
    if inj.is_list:
        return (len(key.encode()) if key else 0) + value + _TOLERATION_FIXED
    return len((key if key is not None else inj.key).encode()) + value


class Tally:
    """A policy's size, counted rule by rule while it is read (every YAML alias expanded), so
    that a policy past a bound of :mod:`webhook.base.limits` is refused as soon as one is
    passed, before any work in proportion to the rest (a 50 KB file that aliases expand to
    1,000 rules of 950 labels is refused at its rule count). The same counts hold for a
    policy from any source: a file, a test suite, a policy object.

    Each method returns the errors of the bound it checks, naming the bound; once one is
    returned the policy is refused and the reader stops."""

    def __init__(self) -> None:
        #: entries of each map and list field so far, over all rules
        self.entries = dict.fromkeys(POLICY_ENTRIES, 0)
        #: bytes the rules so far may add to one pod template
        self.added = 0
        #: values the rules' matches list so far
        self.matching = 0

    @staticmethod
    def rules(n: int) -> list[FieldError]:
        if n > MAX_POLICY_RULES:
            return [FieldError("rules", f"{n} rules, at most {MAX_POLICY_RULES}")]
        return []

    def rule(self, where: str, counts: Mapping[str, int]) -> list[FieldError]:
        """One rule's entries by field (``counts``: what the document holds, before any is
        checked): at most :data:`~webhook.base.limits.MAX_RULE_SETTINGS` in the rule, and
        each field's total over the rules within its entry's ``max_entries``
        (:data:`~webhook.karta.fields.POLICY_ENTRIES`)."""
        total = sum(counts.values())
        if total > MAX_RULE_SETTINGS:
            return [FieldError(where, f"{total} settings, at most {MAX_RULE_SETTINGS} in a rule")]
        errors = []
        for key, n in counts.items():
            if key not in self.entries:
                continue
            self.entries[key] += n
            bound = POLICY_ENTRIES[key]
            if self.entries[key] > bound:
                errors.append(
                    FieldError(
                        f"{where}.{key}",
                        f"{self.entries[key]} {key} in the rules up to this one, at most "
                        f"{bound} in a policy",
                    )
                )
        return errors

    def bytes(self, where: str, rule: Rule) -> list[FieldError]:
        """What ``rule`` may add to one pod template, added to the rules' before it: at most
        :data:`~webhook.base.limits.MAX_POLICY_ADDED_BYTES` together."""
        for inj, settings in rule.settings:
            for s in settings:
                key = s.key if not inj.is_list else str(dict(s.item or ()).get("key", ""))
                self.added += added_bytes(inj, key, s.template)
        if self.added > MAX_POLICY_ADDED_BYTES:
            return [
                FieldError(
                    where,
                    f"the rules up to this one may add {self.added:,} bytes to a pod template "
                    f"(keys and values rendered at their longest), at most "
                    f"{MAX_POLICY_ADDED_BYTES:,}",
                )
            ]
        return []

    def copy(self) -> Tally:
        out = Tally()
        out.entries, out.added, out.matching = dict(self.entries), self.added, self.matching
        return out

    def match(self, where: str, n: int) -> list[FieldError]:
        """The values one rule's ``match`` lists (``n``, as the document holds them, before any
        is checked): at most :data:`~webhook.base.limits.MAX_MATCH_VALUES` in the rule and
        :data:`~webhook.base.limits.MAX_POLICY_MATCH_VALUES` over the rules."""
        if n > MAX_MATCH_VALUES:
            return [FieldError(where, f"{n} values, at most {MAX_MATCH_VALUES} in a rule's match")]
        self.matching += n
        if self.matching > MAX_POLICY_MATCH_VALUES:
            return [
                FieldError(
                    where,
                    f"{self.matching} values in the matches of the rules up to this one, at "
                    f"most {MAX_POLICY_MATCH_VALUES} in a policy",
                )
            ]
        return []

    def add(self, where: str, rule: Rule) -> list[FieldError]:
        """A rule already read (say a policy object's, put after the file's rules): its
        settings counted as :meth:`rule` counts a document's, then its bytes."""
        over = self.rule(where, {inj.key: len(settings) for inj, settings in rule.settings})
        m = rule.match
        selectors = (m.namespace_selector, m.object_selector)
        matching = len(m.kinds) + len(m.namespaces) + len(m.components) + len(m.instances)
        matching += sum(max(1, len(r.values)) for s in selectors if s for r in s.requirements)
        over = over or self.match(f"{where}.match", matching)
        return over or self.bytes(where, rule)


def bounds_errors(rules: Iterable[Rule]) -> list[FieldError]:
    """The first bound that ``rules`` together pass, as :class:`Tally` names it; [] within
    them. For rules of several sources in force together (the policy file's and the policy
    objects'), each source within the bounds on its own."""
    got = tuple(rules)
    over = Tally.rules(len(got))
    if over:
        return over
    tally = Tally()
    for i, rule in enumerate(got):
        over = tally.add(f"rules[{i}] ({rule.name})", rule)
        if over:
            return over
    return []
