"""What a rule sets, read and checked when the policy loads: each injectable's value (a map
of key: template, or one template) and the tolerations, checked as the API server checks a
pod's. Only a toleration's ``value`` may hold variables; a template's variables must be known
(:mod:`webhook.mutation.templates`), and its syntax is checked on placeholder values.
"""

from __future__ import annotations

from typing import Any

from webhook.base.errors import FieldError
from webhook.base.limits import INT64_MAX, INT64_MIN, MAX_ANNOTATION_VALUE_BYTES
from webhook.base.names import annotation_value_errors, label_value_errors, qualified_name_errors
from webhook.karta.fields import Injectable
from webhook.mutation.policy import TOLERATION_FIELDS, Entries, toleration_identity
from webhook.mutation.templates import (
    CONTEXT_VARIABLES,
    VARIABLES,
    context_variable,
    longest,
    render,
    variables_in,
)

#: the values the API server accepts for two of a toleration's fields
TOLERATION_OPERATORS = ("Equal", "Exists")
TOLERATION_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")


def _template_ok(template: str, where: str, errors: list[FieldError]) -> bool:
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


def parse_entries(inj: Injectable, value: Any, where: str, errors: list[FieldError]) -> Entries:
    """A rule's value for ``inj``, checked: a map of key: template, or one template."""
    if value is None:
        return ()
    if not inj.is_map:
        if not isinstance(value, str):
            errors.append(FieldError(where, "must be a string"))
            return ()
        if _template_ok(value, where, errors) and inj.check_value:
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
        _value(inj, val, kwhere, errors)
        out.append((key, val))
    return tuple(out)


def _value(inj: Injectable, val: str, kwhere: str, errors: list[FieldError]) -> None:
    """One value of a map (at ``kwhere``), checked: its variables, and its syntax on
    placeholder values, or (free text) its size rendered with every variable at its longest,
    so that the bytes a policy adds hold (a longer rendered value is refused per request)."""
    if not _template_ok(val, kwhere, errors) or not inj.check_value:
        return
    if inj.check_value is not annotation_value_errors:
        for e in inj.check_value(_sample(val)):
            errors.append(FieldError(kwhere, f"invalid value {val!r}: {e}"))
    elif (size := longest(val)) > MAX_ANNOTATION_VALUE_BYTES:
        errors.append(
            FieldError(
                kwhere,
                f"value of {size:,} bytes (variables at their longest), at most "
                f"{MAX_ANNOTATION_VALUE_BYTES:,}",
            )
        )


def parse_tolerations(
    value: Any, where: str, errors: list[FieldError]
) -> tuple[dict[str, Any], ...]:
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
    """One toleration (a map) checked, as :func:`parse_tolerations` says."""
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
    elif val and _template_ok(val, f"{at}.value", errors):
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
        _seconds(t["tolerationSeconds"], effect, f"{at}.tolerationSeconds", errors)


def _seconds(secs: Any, effect: str, where: str, errors: list[FieldError]) -> None:
    """A toleration's ``tolerationSeconds``: an int64, only with effect ``NoExecute``."""
    if isinstance(secs, bool) or not isinstance(secs, int):
        errors.append(FieldError(where, "must be an integer"))
    elif not INT64_MIN <= secs <= INT64_MAX:
        # an int64 field: the API server cannot decode a pod that has more
        digits = len(str(abs(secs)))
        shown = f"{secs}" if digits <= 40 else f"an integer of {digits} digits"
        errors.append(
            FieldError(where, f"{shown} is out of range: an int64, {INT64_MIN} to {INT64_MAX}")
        )
    elif effect != "NoExecute":
        errors.append(FieldError(where, "only with effect NoExecute"))
