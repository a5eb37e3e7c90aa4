"""Label selectors with Kubernetes' ``LabelSelector`` semantics, for a policy rule's
``match.namespaceSelector`` (the namespace's labels) and ``match.objectSelector`` (the
workload's own labels).

A selector is ``matchLabels`` (key: value, each must be equal) and ``matchExpressions`` (each
``{key, operator, values}``, operator ``In``, ``NotIn``, ``Exists`` or ``DoesNotExist``), all
ANDed; an empty selector (``{}``) matches everything, as the API server's does. ``NotIn``
matches an object without the key, as in Kubernetes. Checked when the policy loads, every
error at its field path (``rules[0] (kai).match.namespaceSelector.matchExpressions[1].values``),
the checks the API server makes of a webhook's selectors: a qualified-name key, label values,
``values`` non-empty for ``In``/``NotIn`` and absent for ``Exists``/``DoesNotExist``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from webhook.base.errors import FieldError
from webhook.base.names import label_value_errors, qualified_name_errors

OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")
_FIELDS = ("matchLabels", "matchExpressions")
_EXPRESSION_FIELDS = ("key", "operator", "values")


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: str  # one of OPERATORS
    values: frozenset[str] = frozenset()

    def matches(self, labels: Mapping[str, str]) -> bool:
        if self.operator == "Exists":
            return self.key in labels
        if self.operator == "DoesNotExist":
            return self.key not in labels
        has = self.key in labels and labels[self.key] in self.values
        return has if self.operator == "In" else not has


@dataclass(frozen=True)
class Selector:
    """A checked ``LabelSelector``: ``matchLabels`` as requirements ``key In (value)``, then
    ``matchExpressions`` in their order."""

    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Mapping[str, str]) -> bool:
        return all(r.matches(labels) for r in self.requirements)

    @property
    def empty(self) -> bool:
        """Matches everything (``{}``)."""
        return not self.requirements


def parse_selector(value: Any, where: str, errors: list[FieldError]) -> Selector | None:
    """The selector at ``where`` (None when absent), its problems added to ``errors``."""
    if value is None:
        return None
    if not isinstance(value, dict):
        errors.append(FieldError(where, "must be a label selector (matchLabels, matchExpressions)"))
        return None
    for key in value:
        if key not in _FIELDS:
            errors.append(
                FieldError(f"{where}.{key}", f"unknown field; a selector has {', '.join(_FIELDS)}")
            )
    out: list[Requirement] = []
    labels = value.get("matchLabels")
    if labels is not None:
        at = f"{where}.matchLabels"
        if not isinstance(labels, dict):
            errors.append(FieldError(at, "must be a map of label key: value"))
        else:
            for k, v in labels.items():
                out.extend(_label(k, v, at, errors))
    exprs = value.get("matchExpressions")
    if exprs is not None:
        at = f"{where}.matchExpressions"
        if not isinstance(exprs, list):
            errors.append(FieldError(at, "must be a list of {key, operator, values}"))
        else:
            for i, e in enumerate(exprs):
                r = _expression(e, f"{at}[{i}]", errors)
                if r is not None:
                    out.append(r)
    return Selector(tuple(out))


def _label(k: Any, v: Any, at: str, errors: list[FieldError]) -> list[Requirement]:
    if not isinstance(k, str):
        errors.append(FieldError(at, f"key {k!r} must be a string"))
        return []
    kat = f"{at}[{k!r}]"
    bad = [FieldError(kat, f"invalid key {k!r}: {e}") for e in qualified_name_errors(k)]
    if isinstance(v, bool | int | float):
        bad.append(FieldError(kat, f"value {v!r} must be a string (quote it in YAML)"))
    elif not isinstance(v, str):
        bad.append(FieldError(kat, "value must be a string"))
    else:
        bad.extend(FieldError(kat, f"invalid value {v!r}: {e}") for e in label_value_errors(v))
    errors.extend(bad)
    return [] if bad else [Requirement(k, "In", frozenset((v,)))]


def _expression(e: Any, at: str, errors: list[FieldError]) -> Requirement | None:
    if not isinstance(e, dict):
        errors.append(FieldError(at, "must be a map {key, operator, values}"))
        return None
    before = len(errors)
    for k in e:
        if k not in _EXPRESSION_FIELDS:
            known = ", ".join(_EXPRESSION_FIELDS)
            errors.append(FieldError(f"{at}.{k}", f"unknown field; an expression has {known}"))
    key, op, values = e.get("key"), e.get("operator"), e.get("values")
    if not isinstance(key, str) or not key:
        errors.append(FieldError(f"{at}.key", "required: a label key"))
    else:
        for msg in qualified_name_errors(key):
            errors.append(FieldError(f"{at}.key", f"invalid key {key!r}: {msg}"))
    if op not in OPERATORS:
        shown = "required: one of" if op is None else f"{op!r} is not one of"
        errors.append(FieldError(f"{at}.operator", f"{shown} {', '.join(OPERATORS)}"))
    vals: list[str] = []
    if values is not None and (
        not isinstance(values, list) or not all(isinstance(v, str) for v in values)
    ):
        errors.append(FieldError(f"{at}.values", "must be a list of strings (quote them in YAML)"))
    elif values is not None:
        vals = values
        for j, v in enumerate(vals):
            for msg in label_value_errors(v):
                errors.append(FieldError(f"{at}.values[{j}]", f"invalid value {v!r}: {msg}"))
    if op in ("In", "NotIn") and not values:
        errors.append(FieldError(f"{at}.values", f"must be non-empty when the operator is {op}"))
    if op in ("Exists", "DoesNotExist") and values:
        errors.append(FieldError(f"{at}.values", f"must be empty when the operator is {op}"))
    if len(errors) > before:
        return None
    return Requirement(str(key), str(op), frozenset(vals))
