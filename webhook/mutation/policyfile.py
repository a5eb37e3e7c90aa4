"""Reading and checking a policy document into the model of :mod:`webhook.mutation.policy`
(the format in full, with an example: docs/policy.md). A policy is a YAML map of:

* ``operations`` (optional, ``[CREATE]``): add ``UPDATE`` to mutate on updates too;
* ``failureMode`` (optional, ``open``): ``closed`` denies what cannot be mutated in full;
* ``rules``: each a map of

  * ``name``: required, unique;
  * ``match`` (optional; fields ANDed, list entries ORed; absent matches all): ``kinds``,
    ``namespaces``, ``components``, ``instances``, ``namespaceSelector``, ``objectSelector``
    (:mod:`webhook.mutation.policymatch`);
  * what it sets: ``schedulerName``, ``labels``, ``annotations``, ``priorityClassName``,
    ``nodeSelector``, ``tolerations``, whose values may name ``$(variables)``
    (:mod:`webhook.mutation.policyvalues`);
  * ``overwrite`` (default false) and ``gang`` (:mod:`webhook.mutation.gangrule`).

Everything that can be checked before a request arrives is checked when the policy loads, so a
typo is an error at startup (exit 2 in the CLI) rather than a silent no-op in production. The
policy's bounds are counted as its rules are read (:mod:`webhook.mutation.policybounds`): past
one, nothing more is checked.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from webhook.base.documents import read_documents
from webhook.base.errors import FieldError, InputError
from webhook.karta.fields import INJECTABLES
from webhook.mutation.gangrule import gang_conflicts, gang_labels, parse_gang
from webhook.mutation.policy import FAILURE_MODES, OPERATIONS, Policy, Rule
from webhook.mutation.policybounds import Tally
from webhook.mutation.policymatch import MATCH_FIELDS, count, match_count, parse_match, strings
from webhook.mutation.policyvalues import TOLERATION_EFFECTS as TOLERATION_EFFECTS
from webhook.mutation.policyvalues import TOLERATION_OPERATORS as TOLERATION_OPERATORS
from webhook.mutation.policyvalues import parse_entries, parse_tolerations

_RULE_FIELDS = {"name", "match", "overwrite", "gang", *(i.key for i in INJECTABLES)}
#: a match's fields (kept here, where the chart's schema test reads them)
_MATCH_FIELDS = MATCH_FIELDS
_POLICY_FIELDS = ("rules", "operations", "failureMode")


class PolicyError(InputError):
    """A policy that cannot be used; lists every problem with its place."""

    def __init__(self, source: str, errors: list[FieldError]) -> None:
        self.source = source
        self.errors = errors
        super().__init__(f"{source}: invalid policy:\n" + "\n".join(f"  {e}" for e in errors))


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
    over = tally.rule(base, {inj.key: count(raw.get(inj.key)) for inj in INJECTABLES})
    over = over or tally.match(f"{base}.match", match_count(raw.get("match")))
    if over:
        errors.extend(over)
        return None
    match = parse_match(raw.get("match"), f"{base}.match", errors)
    overwrite = raw.get("overwrite", False)
    if not isinstance(overwrite, bool):
        errors.append(FieldError(f"{base}.overwrite", "must be true or false"))
        overwrite = False
    sets = {
        inj.key: got
        for inj in INJECTABLES
        if not inj.is_list
        and (got := parse_entries(inj, raw.get(inj.key), f"{base}.{inj.key}", errors))
    }
    items = {
        inj.key: listed
        for inj in INJECTABLES
        if inj.is_list
        and (listed := parse_tolerations(raw.get(inj.key), f"{base}.{inj.key}", errors))
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
    operations = strings(doc.get("operations", ["CREATE"]), "operations", errors)
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
