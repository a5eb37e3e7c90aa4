"""The injection policy as the planners use it: its rules, what each matches and what it sets
(labels, annotations, ``schedulerName``, ``priorityClassName``, ``nodeSelector``,
``tolerations``), prepared once when the policy loads, and the ``$(variable)`` rendering of
its values.

Reading and checking a policy document (its format): :mod:`webhook.mutation.policyfile`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

from webhook.base.derived import Derives
from webhook.base.errors import FieldError
from webhook.base.gvk import GVK
from webhook.base.limits import (
    MAX_MATCH_VALUES,
    MAX_POLICY_ADDED_BYTES,
    MAX_POLICY_MATCH_VALUES,
    MAX_POLICY_RULES,
    MAX_RULE_SETTINGS,
    VARIABLE_BYTES,
)
from webhook.base.pointers import pointer
from webhook.karta.fields import INJECTABLES, POLICY_ENTRIES, Injectable
from webhook.mutation.selectors import Selector

VARIABLES = ("workload.name", "workload.namespace", "workload.kind", "component", "instance")
#: The variables read from the namespace's and the workload's metadata (``KEY``: a label or
#: annotation key), decided per request by :func:`webhook.mutation.scope.narrow`: a key that is
#: missing makes the setting not applicable.
CONTEXT_VARIABLES = (
    "namespace.labels['KEY']",
    "namespace.annotations['KEY']",
    "workload.labels['KEY']",
    "workload.annotations['KEY']",
)
_CONTEXT_VAR = re.compile(r"(namespace|workload)\.(labels|annotations)\['([^']*)'\]")
_VAR = re.compile(r"\$\$|\$\(([^)]*)\)")
#: a toleration's fields, in the order a written one has them
TOLERATION_FIELDS = ("key", "operator", "value", "effect", "tolerationSeconds")
OPERATIONS = ("CREATE", "UPDATE")
#: What happens to a workload the policy could not be applied to in full: ``open`` admits it
#: (with a warning, a log line and a metric), ``closed`` denies it.
FAILURE_MODES = ("open", "closed")


# --------------------------------------------------------------------------- values


def variables_in(template: str) -> list[str]:
    return [m.group(1) for m in _VAR.finditer(template) if m.group(0) != "$$"]


def context_variable(name: str) -> tuple[str, str, str] | None:
    """``("namespace", "labels", "k")`` for ``namespace.labels['k']``, None for any other name."""
    m = _CONTEXT_VAR.fullmatch(name)
    return (m.group(1), m.group(2), m.group(3)) if m else None


def render(template: str, values: Mapping[str, str]) -> str:
    """Substitute ``$(variable)``; ``$$`` is a literal ``$`` (as in Kubernetes env expansion)."""
    return _join(_pieces(template), values)


def _pieces(template: str) -> tuple[tuple[str, str | None], ...]:
    """A template as (text, variable or None) pieces: rendered without a regex (a rule's
    values are split once, when the policy loads)."""
    out: list[tuple[str, str | None]] = []
    text, at = "", 0
    for m in _VAR.finditer(template):
        text += template[at : m.start()]
        at = m.end()
        if m.group(0) == "$$":
            text += "$"
        else:
            out.append((text, m.group(1)))
            text = ""
    text += template[at:]
    if text or not out:
        out.append((text, None))
    return tuple(out)


def _join(pieces: tuple[tuple[str, str | None], ...], values: Mapping[str, str]) -> str:
    out = ""
    for text, var in pieces:  # a few pieces: concatenation is the cheapest way
        out += text + values[var] if var else text
    return out


# --------------------------------------------------------------------------- model


@dataclass(frozen=True)
class Match:
    kinds: tuple[tuple[str | None, str], ...] = ()  # (group or None for any group, Kind)
    namespaces: tuple[str, ...] = ()
    components: tuple[str, ...] = ()
    instances: tuple[str, ...] = ()
    #: the namespace's labels (``namespaceSelector``) and the workload's own (``objectSelector``),
    #: decided per request by :func:`webhook.mutation.scope.narrow`
    namespace_selector: Selector | None = None
    object_selector: Selector | None = None

    @property
    def selective(self) -> bool:
        """Whether the match needs the workload's labels or its namespace's."""
        return self.namespace_selector is not None or self.object_selector is not None

    def workload(self, gvk: GVK, namespace: str) -> bool:
        if self.kinds and not any(
            k == gvk.kind and (g is None or g == gvk.group) for g, k in self.kinds
        ):
            return False
        return not self.namespaces or any(fnmatchcase(namespace, p) for p in self.namespaces)

    def instance(self, component: str, instance: str) -> bool:
        if self.components and component not in self.components:
            return False
        return not self.instances or any(fnmatchcase(instance, p) for p in self.instances)


#: What a rule sets for one injectable: ``(key, value template)`` pairs for a map (labels), one
#: ``(None, value template)`` for a single value (schedulerName).
Entries = tuple[tuple[str | None, str], ...]


@dataclass(frozen=True)
class Setting:
    """One entry of a rule, prepared once when the policy loads: a value template without
    variables is its own value on every request, checked once."""

    #: the map's key (labels, annotations), None for a single value (schedulerName)
    key: str | None
    template: str
    #: the value when the template has no variable, else None (rendered per instance)
    constant: str | None
    #: whether ``constant`` fails the injectable's value check
    invalid: bool
    #: what the key adds to the JSON Pointer of its map (``/kai.scheduler~1queue``); "" for a
    #: single value
    tail: str
    #: the template as (text, variable or None) pieces, for rendering without a regex
    pieces: tuple[tuple[str, str | None], ...] = ()
    #: whether the value differs between the instances of one workload (the template names
    #: ``$(component)`` or ``$(instance)``); if not, it is rendered once per workload
    per_instance: bool = False
    #: a list entry's fields but its value (a toleration's key, operator, effect and
    #: tolerationSeconds), in the order given; None for maps and single values
    item: tuple[tuple[str, Any], ...] | None = None

    def entry(self, value: str) -> dict[str, Any]:
        """The list entry written for ``value`` (rendered): ``item`` with the value, which an
        ``Exists`` toleration has none of."""
        out = dict(self.item or ())
        if value or out.get("operator") != "Exists":
            out["value"] = value
        return {k: out[k] for k in TOLERATION_FIELDS if k in out}

    def value(self, variables: Mapping[str, str] | None) -> str:
        """The value for one instance (``variables``: see :data:`VARIABLES`), as
        :func:`render` gives it."""
        if self.constant is not None:
            return self.constant
        return _join(self.pieces, variables or {})


@dataclass(frozen=True)
class Rule(Derives):
    name: str
    match: Match
    #: by :attr:`~webhook.karta.fields.Injectable.key`, what the rule sets (absent: nothing)
    sets: Mapping[str, Entries] = field(default_factory=dict)
    overwrite: bool = False
    #: ``native`` or ``native-workload``: the matched workloads get Kubernetes' own gang
    #: (:mod:`webhook.mutation.gangrule`); None: no gang
    gang: str | None = None
    #: by key of a list injectable (tolerations), the entries the rule appends, each a map
    #: whose ``value`` is a template (checked by
    #: :func:`~webhook.mutation.policyfile.parse_policy`)
    items: Mapping[str, tuple[Mapping[str, Any], ...]] = field(default_factory=dict)
    #: what the rule sets, injectable by injectable in table order (only those it sets),
    #: derived from ``sets``
    settings: tuple[tuple[Injectable, tuple[Setting, ...]], ...] = field(
        init=False, compare=False, repr=False
    )
    #: whether any value needs the workload's variables
    variable: bool = field(init=False, compare=False, repr=False)
    #: what the mutation derives from the rule once (:meth:`~webhook.base.derived.Derives.derive`)
    derived: dict[Any, Any] = field(init=False, compare=False, repr=False, default_factory=dict)

    def __post_init__(self) -> None:
        settings = []
        for inj in INJECTABLES:
            if inj.is_list:
                got = self.items.get(inj.key, ())
                if got:
                    settings.append((inj, tuple(_list_setting(inj, item) for item in got)))
                continue
            entries = self.sets.get(inj.key, ())
            if entries:
                settings.append((inj, tuple(_setting(inj, k, t) for k, t in entries)))
        object.__setattr__(self, "settings", tuple(settings))
        variable = any(s.constant is None for _, group in settings for s in group)
        object.__setattr__(self, "variable", variable)

    def entries(self, inj: Injectable) -> Entries:
        return self.sets.get(inj.key, ())


def _setting(inj: Injectable, key: str | None, template: str) -> Setting:
    constant = None if _VAR.search(template) else template
    check = inj.check_value
    invalid = constant is not None and check is not None and bool(check(constant))
    tail = pointer((key,)) if key is not None else ""
    pieces = _pieces(template)
    per_instance = any(var in _INSTANCE_VARIABLES for _, var in pieces)
    return Setting(key, template, constant, invalid, tail, pieces, per_instance)


def _list_setting(inj: Injectable, item: Mapping[str, Any]) -> Setting:
    """A list entry (a toleration) as a setting: its value is the template, the rest fixed."""
    template = item.get("value", "")
    base = _setting(inj, None, template if isinstance(template, str) else "")
    fixed = tuple((k, v) for k, v in item.items() if k != "value")
    return Setting(
        base.key, base.template, base.constant, base.invalid, "", base.pieces,
        base.per_instance, fixed,
    )  # fmt: skip


def toleration_identity(t: Mapping[str, Any]) -> tuple[Any, Any, Any]:
    """What makes two tolerations the same one for the policy: key, operator, effect (an
    absent operator is ``Equal``, an absent effect matches every effect: ``""``)."""
    return (t.get("key") or "", t.get("operator") or "Equal", t.get("effect") or "")


_INSTANCE_VARIABLES = ("component", "instance")


@dataclass(frozen=True)
class Run(Derives):
    """Consecutive rules of a policy with one ``match`` and one ``overwrite``: every template
    one of them matches, all of them match, so a planner may take each template once for all
    of them (what it writes and in what order stay those of the rules one by one). The same
    settings then cost the same per admission whether one rule holds them or a hundred."""

    rules: tuple[Rule, ...]
    #: the rules' (one and the same)
    match: Match = field(init=False, compare=False, repr=False)
    overwrite: bool = field(init=False, compare=False, repr=False)
    #: whether any of the rules' values needs the workload's variables
    variable: bool = field(init=False, compare=False, repr=False)
    #: what a planner derives from the run once (:meth:`~webhook.base.derived.Derives.derive`)
    derived: dict[Any, Any] = field(init=False, compare=False, repr=False, default_factory=dict)

    def __post_init__(self) -> None:
        object.__setattr__(self, "match", self.rules[0].match)
        object.__setattr__(self, "overwrite", self.rules[0].overwrite)
        object.__setattr__(self, "variable", any(r.variable for r in self.rules))


def runs(rules: tuple[Rule, ...]) -> tuple[Run, ...]:
    """``rules`` as :class:`Run` s, in order."""
    out: list[list[Rule]] = []
    for rule in rules:
        if out and (out[-1][0].match, out[-1][0].overwrite) == (rule.match, rule.overwrite):
            out[-1].append(rule)
        else:
            out.append([rule])
    return tuple(Run(tuple(group)) for group in out)


@dataclass(frozen=True)
class Policy:
    rules: tuple[Rule, ...] = ()
    source: str = "<none>"
    #: admission operations whose workloads are mutated; UPDATE also stamps pod templates
    #: edited after creation (the server keeps the webhook's rules in line with this)
    operations: tuple[str, ...] = ("CREATE",)
    #: see :data:`FAILURE_MODES`
    failure_mode: str = "open"
    #: whether any rule's values need the workload's variables (derived from ``rules``)
    variable: bool = field(init=False, compare=False, repr=False)
    #: the rules as runs of one match and overwrite (derived from ``rules``)
    runs: tuple[Run, ...] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "variable", any(rule.variable for rule in self.rules))
        object.__setattr__(self, "runs", runs(self.rules))

    @property
    def empty(self) -> bool:
        return not self.rules

    @property
    def gang(self) -> bool:
        """Whether a rule turns the native gang on (the Pod webhook and the PodGroup
        controller are then wanted)."""
        return any(rule.gang for rule in self.rules)


EMPTY = Policy()


# --------------------------------------------------------------------------- bounds

#: a toleration's bytes besides its key and value: its operator, its effect, the
#: ``tolerationSeconds`` an int64 spells in at most 20 characters, and the field names
_TOLERATION_FIXED = len(
    '{"key":"","operator":"Exists","value":"","effect":"PreferNoSchedule","tolerationSeconds":-9223372036854775808}'
)


def longest(template: str) -> int:
    """The most bytes ``template`` renders to: its text, each variable counted at
    :data:`~webhook.base.limits.VARIABLE_BYTES` (the longest Kubernetes name)."""
    if "$" not in template:
        return len(template.encode())
    return sum(len(t.encode()) + (VARIABLE_BYTES if v else 0) for t, v in _pieces(template))


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
