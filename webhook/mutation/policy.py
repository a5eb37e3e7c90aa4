"""The injection policy: which labels, annotations, ``schedulerName``, ``priorityClassName``,
``nodeSelector`` and ``tolerations`` go where.

A policy is a YAML document::

    operations: [CREATE]             # optional; add UPDATE to mutate on updates too
    failureMode: open                # optional; closed denies what cannot be mutated in full
    rules:
    - name: kai                      # required, unique
      match:                         # optional; fields ANDed, list entries ORed; absent = all
        kinds: [JobSet, kubeflow.org/PyTorchJob]   # Kind or group/Kind ("" group: /Pod)
        namespaces: [research, "team-*"]            # shell-style globs
        components: [replicatedjob]                 # component names of the definition
        instances: ["worker*"]                      # globs on instance ids
      schedulerName: kai-scheduler
      labels: {kai.scheduler/queue: research}
      annotations: {example.com/owner: "$(workload.name)"}
      priorityClassName: train       # set when absent
      nodeSelector: {nvidia.com/gpu.present: "true"}   # merged by key
      tolerations:                   # appended unless one with the same key, operator, effect
      - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}
      overwrite: false               # default false

Everything that can be checked before a request arrives is checked when the policy loads, so a
typo is an error at startup (exit 2 in the CLI) rather than a silent no-op in production.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from webhook.base.derived import Derives
from webhook.base.documents import read_documents
from webhook.base.errors import FieldError, InputError
from webhook.base.gvk import GVK
from webhook.base.names import label_value_errors, qualified_name_errors
from webhook.jq.engine import pointer
from webhook.karta.fields import INJECTABLES, Injectable

VARIABLES = ("workload.name", "workload.namespace", "workload.kind", "component", "instance")
_VAR = re.compile(r"\$\$|\$\(([^)]*)\)")
_RULE_FIELDS = {"name", "match", "overwrite", *(i.key for i in INJECTABLES)}
#: a toleration's fields, and the values the API server accepts for two of them
_TOLERATION_FIELDS = ("key", "operator", "value", "effect", "tolerationSeconds")
TOLERATION_OPERATORS = ("Equal", "Exists")
TOLERATION_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_MATCH_FIELDS = {"kinds", "namespaces", "components", "instances"}
OPERATIONS = ("CREATE", "UPDATE")
#: What happens to a workload the policy could not be applied to in full: ``open`` admits it
#: (with a warning, a log line and a metric), ``closed`` denies it.
FAILURE_MODES = ("open", "closed")
_POLICY_FIELDS = ("rules", "operations", "failureMode")


class PolicyError(InputError):
    """A policy that cannot be used; lists every problem with its place."""

    def __init__(self, source: str, errors: list[FieldError]) -> None:
        self.source = source
        self.errors = errors
        super().__init__(f"{source}: invalid policy:\n" + "\n".join(f"  {e}" for e in errors))


# --------------------------------------------------------------------------- values


def variables_in(template: str) -> list[str]:
    return [m.group(1) for m in _VAR.finditer(template) if m.group(0) != "$$"]


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
        return {k: out[k] for k in _TOLERATION_FIELDS if k in out}

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
    #: by key of a list injectable (tolerations), the entries the rule appends, each a map
    #: whose ``value`` is a template (checked by :func:`parse_policy`)
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

    def __post_init__(self) -> None:
        object.__setattr__(self, "variable", any(rule.variable for rule in self.rules))

    @property
    def empty(self) -> bool:
        return not self.rules


EMPTY = Policy()


def _strings(value: Any, where: str, errors: list[FieldError]) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        errors.append(FieldError(where, "must be a list of strings"))
        return ()
    return tuple(value)


def _check_template(template: str, where: str, errors: list[FieldError]) -> bool:
    unknown = [v for v in variables_in(template) if v not in VARIABLES]
    for v in unknown:
        errors.append(
            FieldError(
                where, f"unknown variable $({v}); known: {', '.join(f'$({n})' for n in VARIABLES)}"
            )
        )
    return not unknown


def _sample(template: str) -> str:
    """A template rendered with placeholder values: what its syntax can be checked on."""
    return render(template, dict.fromkeys(VARIABLES, "x"))


def _entries(inj: Injectable, value: Any, where: str, errors: list[FieldError]) -> Entries:
    """A rule's value for ``inj``, checked: a map of key: template, or one template."""
    if value is None:
        return ()
    if not inj.is_map:
        if not isinstance(value, str):
            errors.append(FieldError(where, "must be a string"))
            return ()
        if _check_template(value, where, errors) and inj.check_value:
            for e in inj.check_value(_sample(value)):
                errors.append(FieldError(where, e))
        return ((None, value),)
    if not isinstance(value, dict):
        errors.append(FieldError(where, "must be a map of key: value"))
        return ()
    out: list[tuple[str | None, str]] = []
    for key, val in value.items():
        kwhere = f"{where}[{key!r}]" if isinstance(key, str) else where
        if not isinstance(key, str):
            errors.append(FieldError(where, f"key {key!r} must be a string"))
            continue
        for e in inj.check_key(key) if inj.check_key else []:
            errors.append(FieldError(kwhere, f"invalid key {key!r}: {e}"))
        if isinstance(val, bool | int | float):
            # YAML reads `on`, `42` as non-strings; Kubernetes wants strings, so say so.
            errors.append(FieldError(kwhere, f"value {val!r} must be a string (quote it in YAML)"))
            continue
        if not isinstance(val, str):
            errors.append(FieldError(kwhere, "value must be a string"))
            continue
        if _check_template(val, kwhere, errors) and inj.check_value:
            for e in inj.check_value(_sample(val)):
                errors.append(FieldError(kwhere, f"invalid value {val!r}: {e}"))
        out.append((key, val))
    return tuple(out)


def _tolerations(value: Any, where: str, errors: list[FieldError]) -> tuple[dict[str, Any], ...]:
    """A rule's tolerations, each checked as the API server checks a pod's (operator
    ``Exists`` or ``Equal``; ``Exists`` without a value; an empty key only with ``Exists``;
    a known effect; ``tolerationSeconds`` only with ``NoExecute``). Only ``value`` may hold
    variables."""
    if value is None:
        return ()
    if not isinstance(value, list):
        errors.append(FieldError(where, "must be a list of tolerations"))
        return ()
    out: list[dict[str, Any]] = []
    for i, t in enumerate(value):
        at = f"{where}[{i}]"
        if not isinstance(t, dict):
            errors.append(FieldError(at, "a toleration must be a map"))
            continue
        before = len(errors)
        for k in t:
            if k not in _TOLERATION_FIELDS:
                known = ", ".join(_TOLERATION_FIELDS)
                errors.append(FieldError(f"{at}.{k}", f"unknown field; a toleration has {known}"))
        for k in ("key", "operator", "value", "effect"):
            if k in t and not isinstance(t[k], str):
                errors.append(FieldError(f"{at}.{k}", "must be a string (quote it in YAML)"))
        if len(errors) > before:
            continue
        key, op, val = t.get("key", ""), t.get("operator", "Equal"), t.get("value", "")
        effect = t.get("effect", "")
        if op not in TOLERATION_OPERATORS:
            errors.append(
                FieldError(
                    f"{at}.operator", f"{op!r} is not one of {', '.join(TOLERATION_OPERATORS)}"
                )
            )
        if key:
            for e in qualified_name_errors(key):
                errors.append(FieldError(f"{at}.key", f"invalid key {key!r}: {e}"))
        elif op != "Exists":
            errors.append(FieldError(f"{at}.key", "required unless the operator is Exists"))
        if op == "Exists" and val:
            errors.append(FieldError(f"{at}.value", "must be empty when the operator is Exists"))
        elif val and _check_template(val, f"{at}.value", errors):
            for e in label_value_errors(_sample(val)):
                errors.append(FieldError(f"{at}.value", f"invalid value {val!r}: {e}"))
        if effect and effect not in TOLERATION_EFFECTS:
            errors.append(
                FieldError(
                    f"{at}.effect",
                    f"{effect!r} is not one of {', '.join(TOLERATION_EFFECTS)} (or empty: all)",
                )
            )
        if "tolerationSeconds" in t:
            secs = t["tolerationSeconds"]
            if isinstance(secs, bool) or not isinstance(secs, int):
                errors.append(FieldError(f"{at}.tolerationSeconds", "must be an integer"))
            elif effect != "NoExecute":
                errors.append(FieldError(f"{at}.tolerationSeconds", "only with effect NoExecute"))
        if len(errors) == before:
            if any(toleration_identity(o) == toleration_identity(t) for o in out):
                errors.append(FieldError(at, "the same key, operator and effect as an earlier one"))
            else:
                out.append(dict(t))
    return tuple(out)


def _kinds(
    values: tuple[str, ...], where: str, errors: list[FieldError]
) -> tuple[tuple[str | None, str], ...]:
    out: list[tuple[str | None, str]] = []
    for v in values:
        group, slash, kind = v.rpartition("/")
        if not kind or "/" in group:
            errors.append(FieldError(where, f"{v!r} is not Kind or group/Kind"))
            continue
        out.append((group if slash else None, kind))
    return tuple(out)


def parse_policy(doc: Any, source: str = "<policy>") -> Policy:
    """Parse and check a policy document; raise :class:`PolicyError` with every problem."""
    errors: list[FieldError] = []
    if doc is None:
        # An empty file is what an editor leaves between truncating and writing: never taken
        # as "no rules" (the reloader would serve it, silently stamping nothing).
        raise PolicyError(
            source, [FieldError("", "the policy is empty; a policy without rules says 'rules: []'")]
        )
    if not isinstance(doc, dict):
        raise PolicyError(source, [FieldError("", "a policy must be a map with a 'rules' list")])
    if "rules" not in doc:
        errors.append(FieldError("rules", "required (a policy without rules says 'rules: []')"))
    for key in doc:
        if key not in _POLICY_FIELDS:
            known = ", ".join(f"'{k}'" for k in _POLICY_FIELDS)
            errors.append(FieldError(str(key), f"unknown field (a policy has {known})"))
    failure_mode = doc.get("failureMode", "open")
    if failure_mode not in FAILURE_MODES:
        errors.append(
            FieldError("failureMode", f"{failure_mode!r} is not one of {', '.join(FAILURE_MODES)}")
        )
    operations = _strings(doc.get("operations", ["CREATE"]), "operations", errors)
    for op in operations:
        if op not in OPERATIONS:
            errors.append(FieldError("operations", f"{op!r} is not one of {', '.join(OPERATIONS)}"))
    if "operations" in doc and not operations:
        errors.append(FieldError("operations", "must list CREATE and/or UPDATE"))
    raw_rules = doc.get("rules") or []
    if not isinstance(raw_rules, list):
        raise PolicyError(source, [FieldError("rules", "must be a list")])
    rules: list[Rule] = []
    seen: set[str] = set()
    for i, raw in enumerate(raw_rules):
        base = f"rules[{i}]"
        if not isinstance(raw, dict):
            errors.append(FieldError(base, "a rule must be a map"))
            continue
        name = raw.get("name")
        if not isinstance(name, str) or not name:
            errors.append(FieldError(f"{base}.name", "required: a non-empty string"))
            name = f"#{i}"
        elif name in seen:
            errors.append(FieldError(f"{base}.name", f"duplicate rule name {name!r}"))
        seen.add(name)
        base = f"rules[{i}] ({name})"
        for key in raw:
            if key not in _RULE_FIELDS:
                errors.append(
                    FieldError(
                        f"{base}.{key}",
                        f"unknown field; a rule has {', '.join(sorted(_RULE_FIELDS))}",
                    )
                )
        m = raw.get("match") or {}
        if not isinstance(m, dict):
            errors.append(FieldError(f"{base}.match", "must be a map"))
            m = {}
        for key in m:
            if key not in _MATCH_FIELDS:
                errors.append(
                    FieldError(
                        f"{base}.match.{key}",
                        f"unknown field; match has {', '.join(sorted(_MATCH_FIELDS))}",
                    )
                )
        match = Match(
            kinds=_kinds(
                _strings(m.get("kinds"), f"{base}.match.kinds", errors),
                f"{base}.match.kinds",
                errors,
            ),
            namespaces=_strings(m.get("namespaces"), f"{base}.match.namespaces", errors),
            components=_strings(m.get("components"), f"{base}.match.components", errors),
            instances=_strings(m.get("instances"), f"{base}.match.instances", errors),
        )
        overwrite = raw.get("overwrite", False)
        if not isinstance(overwrite, bool):
            errors.append(FieldError(f"{base}.overwrite", "must be true or false"))
            overwrite = False
        sets = {
            inj.key: entries
            for inj in INJECTABLES
            if not inj.is_list
            and (entries := _entries(inj, raw.get(inj.key), f"{base}.{inj.key}", errors))
        }
        items = {
            inj.key: got
            for inj in INJECTABLES
            if inj.is_list and (got := _tolerations(raw.get(inj.key), f"{base}.{inj.key}", errors))
        }
        rule = Rule(name=name, match=match, sets=sets, overwrite=overwrite, items=items)
        if not sets and not items:
            keys = [i.key for i in INJECTABLES]
            errors.append(
                FieldError(base, f"sets nothing: give {', '.join(keys[:-1])} or {keys[-1]}")
            )
        rules.append(rule)
    if errors:
        raise PolicyError(source, errors)
    ordered = tuple(op for op in OPERATIONS if op in operations)
    return Policy(tuple(rules), source, ordered, str(failure_mode))


def load_policy(path: Path | str) -> Policy:
    """Read a policy file (``-`` for standard input)."""
    docs = read_documents(path)
    if len(docs) > 1:
        raise PolicyError(str(path), [FieldError("", "a policy file holds one YAML document")])
    source, doc = docs[0] if docs else (str(path), None)
    return parse_policy(doc, source)
