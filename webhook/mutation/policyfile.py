"""Reading and checking a policy document (the model it gives: :mod:`webhook.mutation.policy`).

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
        namespaceSelector:                          # the namespace's labels (LabelSelector)
          matchLabels: {team: research}
        objectSelector:                             # the workload's own labels
          matchExpressions: [{key: tier, operator: NotIn, values: [batch]}]
      schedulerName: kai-scheduler
      labels: {kai.scheduler/queue: research}
      annotations: {example.com/owner: "$(workload.name)"}   # also $(namespace.labels['k']),
                                     # $(namespace.annotations['k']), $(workload.labels['k']) ...
      priorityClassName: train       # set when absent
      nodeSelector: {nvidia.com/gpu.present: "true"}   # merged by key
      tolerations:                   # appended unless one with the same key, operator, effect
      - {key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}
      overwrite: false               # default false
      gang: native                   # optional: Kubernetes' own gang (mutation/gangrule.py)


Everything that can be checked before a request arrives is checked when the policy loads, so a
typo is an error at startup (exit 2 in the CLI) rather than a silent no-op in production. Each
part of the document has its function: the top-level keys, a rule, its match, each
injectable's value, the tolerations.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from webhook.base.documents import read_documents
from webhook.base.errors import FieldError, InputError
from webhook.base.limits import INT64_MAX, INT64_MIN, MAX_ANNOTATION_VALUE_BYTES
from webhook.base.names import annotation_value_errors, label_value_errors, qualified_name_errors
from webhook.karta.fields import INJECTABLES, Injectable
from webhook.mutation.gangrule import gang_conflicts, gang_labels, parse_gang
from webhook.mutation.policy import (
    CONTEXT_VARIABLES,
    FAILURE_MODES,
    OPERATIONS,
    TOLERATION_FIELDS,
    VARIABLES,
    Entries,
    Match,
    Policy,
    Rule,
    Tally,
    context_variable,
    longest,
    render,
    toleration_identity,
    variables_in,
)
from webhook.mutation.selectors import parse_selector

_RULE_FIELDS = {"name", "match", "overwrite", "gang", *(i.key for i in INJECTABLES)}
#: the values the API server accepts for two of a toleration's fields
TOLERATION_OPERATORS = ("Equal", "Exists")
TOLERATION_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
_MATCH_FIELDS = {
    "kinds", "namespaces", "components", "instances", "namespaceSelector", "objectSelector",
}  # fmt: skip
_POLICY_FIELDS = ("rules", "operations", "failureMode")


class PolicyError(InputError):
    """A policy that cannot be used; lists every problem with its place."""

    def __init__(self, source: str, errors: list[FieldError]) -> None:
        self.source = source
        self.errors = errors
        super().__init__(f"{source}: invalid policy:\n" + "\n".join(f"  {e}" for e in errors))


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
    bad = False
    for v in variables_in(template):
        if v in VARIABLES:
            continue
        bad = True
        got = context_variable(v)
        if got is None:
            known = ", ".join(f"$({n})" for n in (*VARIABLES, *CONTEXT_VARIABLES))
            errors.append(FieldError(where, f"unknown variable $({v}); known: {known}"))
            continue
        _, which, key = got
        what = "label" if which == "labels" else "annotation"
        problems = qualified_name_errors(key) if key else ["must be non-empty"]
        if not problems:
            bad = False
        for e in problems:
            errors.append(FieldError(where, f"$({v}): invalid {what} key {key!r}: {e}"))
    return not bad


def _sample(template: str) -> str:
    """A template rendered with placeholder values: what its syntax can be checked on."""
    return render(template, dict.fromkeys(variables_in(template), "x"))


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
        if not _check_template(val, kwhere, errors) or not inj.check_value:
            pass
        elif inj.check_value is annotation_value_errors:
            # free text, bounded in size: rendered with every variable at its longest, so that
            # the bytes a policy adds hold (a longer rendered value is refused per request)
            if (size := longest(val)) > MAX_ANNOTATION_VALUE_BYTES:
                errors.append(
                    FieldError(
                        kwhere,
                        f"value of {size:,} bytes (variables at their longest), at most "
                        f"{MAX_ANNOTATION_VALUE_BYTES:,}",
                    )
                )
        else:
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
        _toleration(t, at, errors)
        if len(errors) == before:
            if any(toleration_identity(o) == toleration_identity(t) for o in out):
                errors.append(FieldError(at, "the same key, operator and effect as an earlier one"))
            else:
                out.append(dict(t))
    return tuple(out)


def _toleration(t: dict[str, Any], at: str, errors: list[FieldError]) -> None:
    """One toleration (a map) checked, as :func:`_tolerations` says."""
    before = len(errors)
    for k in t:
        if k not in TOLERATION_FIELDS:
            known = ", ".join(TOLERATION_FIELDS)
            errors.append(FieldError(f"{at}.{k}", f"unknown field; a toleration has {known}"))
    for k in ("key", "operator", "value", "effect"):
        if k in t and not isinstance(t[k], str):
            errors.append(FieldError(f"{at}.{k}", "must be a string (quote it in YAML)"))
    if len(errors) > before:
        return
    key, op, val = t.get("key", ""), t.get("operator", "Equal"), t.get("value", "")
    effect = t.get("effect", "")
    if op not in TOLERATION_OPERATORS:
        errors.append(
            FieldError(f"{at}.operator", f"{op!r} is not one of {', '.join(TOLERATION_OPERATORS)}")
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
        elif not INT64_MIN <= secs <= INT64_MAX:
            # an int64 field: the API server cannot decode a pod that has more
            shown = (
                f"{secs}"
                if len(str(abs(secs))) <= 40
                else f"an integer of {len(str(abs(secs)))} digits"
            )
            errors.append(
                FieldError(
                    f"{at}.tolerationSeconds",
                    f"{shown} is out of range: an int64, {INT64_MIN} to {INT64_MAX}",
                )
            )
        elif effect != "NoExecute":
            errors.append(FieldError(f"{at}.tolerationSeconds", "only with effect NoExecute"))


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


def _match(value: Any, where: str, errors: list[FieldError]) -> Match:
    """A rule's ``match`` (at ``where``), checked; absent matches everything."""
    m = value or {}
    if not isinstance(m, dict):
        errors.append(FieldError(where, "must be a map"))
        m = {}
    for key in m:
        if key not in _MATCH_FIELDS:
            errors.append(
                FieldError(
                    f"{where}.{key}",
                    f"unknown field; match has {', '.join(sorted(_MATCH_FIELDS))}",
                )
            )
    return Match(
        kinds=_kinds(
            _strings(m.get("kinds"), f"{where}.kinds", errors),
            f"{where}.kinds",
            errors,
        ),
        namespaces=_strings(m.get("namespaces"), f"{where}.namespaces", errors),
        components=_strings(m.get("components"), f"{where}.components", errors),
        instances=_strings(m.get("instances"), f"{where}.instances", errors),
        namespace_selector=parse_selector(
            m.get("namespaceSelector"), f"{where}.namespaceSelector", errors
        ),
        object_selector=parse_selector(m.get("objectSelector"), f"{where}.objectSelector", errors),
    )


def _count(value: Any) -> int:
    """Entries a rule's field holds as written: a map's keys, a list's items, one value."""
    return len(value) if isinstance(value, dict | list) else int(value is not None)


def _match_count(m: Any) -> int:
    """Values a rule's ``match`` lists as written: each kind, namespace, component and
    instance pattern; each selector label, and each expression's values (one at least), as
    :meth:`~webhook.mutation.policy.Tally.add` counts a match already read."""
    if not isinstance(m, dict):
        return 0
    n = sum(_count(m.get(k)) for k in ("kinds", "namespaces", "components", "instances"))
    for key in ("namespaceSelector", "objectSelector"):
        sel = m.get(key)
        if not isinstance(sel, dict):
            continue
        n += _count(sel.get("matchLabels"))
        exprs = sel.get("matchExpressions")
        for e in exprs if isinstance(exprs, list) else ():
            n += max(1, _count(e.get("values")) if isinstance(e, dict) else 0)
    return n


def _rule(
    raw: dict[Any, Any], i: int, seen: set[str], errors: list[FieldError], tally: Tally
) -> Rule | None:
    """The ``i``-th rule (a map), checked; its name joins ``seen`` (names are unique). None
    when it passes a bound of the policy's (``tally``, in ``errors``): the policy is refused,
    and nothing of the rule is checked further."""
    base = f"rules[{i}]"
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
    over = tally.rule(base, {inj.key: _count(raw.get(inj.key)) for inj in INJECTABLES})
    over = over or tally.match(f"{base}.match", _match_count(raw.get("match")))
    if over:
        errors.extend(over)
        return None
    match = _match(raw.get("match"), f"{base}.match", errors)
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
    gang = parse_gang(raw.get("gang"), f"{base}.gang", errors)
    if gang is not None:
        sets["labels"] = gang_labels(sets.get("labels", ()), gang)
    rule = Rule(name=name, match=match, sets=sets, overwrite=overwrite, items=items, gang=gang)
    if not sets and not items:
        keys = [*(i.key for i in INJECTABLES), "gang"]
        errors.append(FieldError(base, f"sets nothing: give {', '.join(keys[:-1])} or {keys[-1]}"))
    over = tally.bytes(base, rule)
    if over:
        errors.extend(over)
        return None
    return rule


def _top_level(doc: dict[Any, Any], errors: list[FieldError]) -> tuple[tuple[str, ...], Any]:
    """The policy's keys but its rules, checked: its operations and its failure mode."""
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
    return operations, failure_mode


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
    operations, failure_mode = _top_level(doc, errors)
    raw_rules = doc.get("rules") or []
    if not isinstance(raw_rules, list):
        raise PolicyError(source, [FieldError("rules", "must be a list")])
    # Bounds first, counted as the rules are read: past one, nothing more is checked.
    over = Tally.rules(len(raw_rules))
    if over:
        raise PolicyError(source, errors + over)
    rules: list[Rule] = []
    placed: list[tuple[str, Rule]] = []
    seen: set[str] = set()
    tally = Tally()
    for i, raw in enumerate(raw_rules):
        if not isinstance(raw, dict):
            errors.append(FieldError(f"rules[{i}]", "a rule must be a map"))
            continue
        rule = _rule(raw, i, seen, errors, tally)
        if rule is None:
            raise PolicyError(source, errors)
        rules.append(rule)
        placed.append((f"rules[{i}] ({rule.name})", rule))
    errors.extend(gang_conflicts(placed))
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
