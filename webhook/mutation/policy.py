"""The injection policy as the planners use it: its rules, what each matches and what it sets
(labels, annotations, ``schedulerName``, ``priorityClassName``, ``nodeSelector``,
``tolerations``), prepared once when the policy loads.

Elsewhere:

* reading and checking a policy document (its format): :mod:`webhook.mutation.policyfile`;
* a value's ``$(variable)`` template and its rendering: :mod:`webhook.mutation.templates`;
* a policy's size against its bounds: :mod:`webhook.mutation.policybounds`.

The names of those two modules that importers have always taken from here stay importable.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from fnmatch import translate
from typing import Any

from webhook.base.derived import Derives
from webhook.base.gvk import GVK
from webhook.base.pointers import pointer
from webhook.karta.fields import INJECTABLES, Injectable
from webhook.mutation.policybounds import Tally as Tally
from webhook.mutation.policybounds import added_bytes as added_bytes
from webhook.mutation.policybounds import bounds_errors as bounds_errors
from webhook.mutation.selectors import Selector
from webhook.mutation.templates import CONTEXT_VARIABLES as CONTEXT_VARIABLES
from webhook.mutation.templates import INSTANCE_VARIABLES, Pieces, has_variables, join, pieces
from webhook.mutation.templates import VARIABLES as VARIABLES
from webhook.mutation.templates import context_variable as context_variable
from webhook.mutation.templates import longest as longest
from webhook.mutation.templates import render as render
from webhook.mutation.templates import variables_in as variables_in

#: a toleration's fields, in the order a written one has them
TOLERATION_FIELDS = ("key", "operator", "value", "effect", "tolerationSeconds")
OPERATIONS = ("CREATE", "UPDATE")
#: What happens to a workload the policy could not be applied to in full: ``open`` admits it
#: (with a warning, a log line and a metric), ``closed`` denies it.
FAILURE_MODES = ("open", "closed")
#: the characters that make a shell-style pattern more than a name
_WILD = re.compile(r"[*?\[]")


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
    #: whether the match narrows a workload to some of its instances (components, instances)
    narrowed: bool = field(init=False, compare=False, repr=False)
    #: the fields above compiled once, for :meth:`workload` and :meth:`instance`: the Kinds of
    #: any group, the (group, Kind) pairs, and the namespaces and instances as :class:`_Globs`
    _any_group: frozenset[str] = field(init=False, compare=False, repr=False)
    _grouped: frozenset[tuple[str, str]] = field(init=False, compare=False, repr=False)
    _namespaces: _Globs = field(init=False, compare=False, repr=False)
    _instances: _Globs = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        set_(self, "narrowed", bool(self.components or self.instances))
        set_(self, "_any_group", frozenset(k for g, k in self.kinds if g is None))
        set_(self, "_grouped", frozenset((g, k) for g, k in self.kinds if g is not None))
        set_(self, "_namespaces", _Globs.of(self.namespaces))
        set_(self, "_instances", _Globs.of(self.instances))

    @property
    def selective(self) -> bool:
        """Whether the match needs the workload's labels or its namespace's."""
        return self.namespace_selector is not None or self.object_selector is not None

    def workload(self, gvk: GVK, namespace: str) -> bool:
        """Whether the kinds name ``gvk`` (a Kind alone: of any group) and a namespace
        pattern matches ``namespace``; absent fields match everything."""
        if (
            self.kinds
            and gvk.kind not in self._any_group
            and (gvk.group, gvk.kind) not in self._grouped
        ):
            return False
        return not self.namespaces or self._namespaces.match(namespace)

    def instance(self, component: str, instance: str) -> bool:
        if self.components and component not in self.components:
            return False
        return not self.instances or self._instances.match(instance)


@dataclass(frozen=True, slots=True)
class _Globs:
    """Shell-style patterns (:func:`fnmatch.fnmatchcase`'s) compiled once: those without a
    wildcard as a set of names, the others as one regular expression."""

    names: frozenset[str]
    #: None when every pattern is a name
    patterns: re.Pattern[str] | None

    @staticmethod
    def of(globs: tuple[str, ...]) -> _Globs:
        wild = sorted({g for g in globs if _WILD.search(g)})
        regex = re.compile("|".join(f"(?:{translate(g)})" for g in wild)) if wild else None
        return _Globs(frozenset(g for g in globs if not _WILD.search(g)), regex)

    def match(self, name: str) -> bool:
        """Whether one of the patterns matches ``name`` whole."""
        if name in self.names:
            return True
        return self.patterns is not None and self.patterns.match(name) is not None


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
    pieces: Pieces = ()
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
        return join(self.pieces, variables or {})


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
    constant = None if has_variables(template) else template
    check = inj.check_value
    invalid = constant is not None and check is not None and bool(check(constant))
    tail = pointer((key,)) if key is not None else ""
    split = pieces(template)
    per_instance = any(var in INSTANCE_VARIABLES for _, var in split)
    return Setting(key, template, constant, invalid, tail, split, per_instance)


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
class Policy(Derives):
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
    #: what the planners derive from the policy once (:meth:`~webhook.base.derived.Derives.derive`)
    derived: dict[Any, Any] = field(init=False, compare=False, repr=False, default_factory=dict)

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
