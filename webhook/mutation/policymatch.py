"""A rule's ``match`` read and checked when the policy loads: its kinds (Kind or
group/Kind), namespaces and instances (shell-style globs), components, and the label
selectors (:mod:`webhook.mutation.selectors`); and the values a match lists as written,
counted against the policy's bounds before any is checked.
"""

from __future__ import annotations

from typing import Any

from webhook.base.errors import FieldError
from webhook.mutation.policy import Match
from webhook.mutation.selectors import parse_selector

MATCH_FIELDS = {
    "kinds", "namespaces", "components", "instances", "namespaceSelector", "objectSelector",
}  # fmt: skip


def strings(value: Any, where: str, errors: list[FieldError]) -> tuple[str, ...]:
    """A string or a list of strings, as a tuple; () with an error for anything else."""
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        errors.append(FieldError(where, "must be a list of strings"))
        return ()
    return tuple(value)


def count(value: Any) -> int:
    """Entries a rule's field holds as written: a map's keys, a list's items, one value."""
    return len(value) if isinstance(value, dict | list) else int(value is not None)


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


def parse_match(value: Any, where: str, errors: list[FieldError]) -> Match:
    """A rule's ``match`` (at ``where``), checked; absent matches everything."""
    m = value or {}
    if not isinstance(m, dict):
        errors.append(FieldError(where, "must be a map"))
        m = {}
    for key in m:
        if key not in MATCH_FIELDS:
            errors.append(
                FieldError(
                    f"{where}.{key}",
                    f"unknown field; match has {', '.join(sorted(MATCH_FIELDS))}",
                )
            )
    return Match(
        kinds=_kinds(
            strings(m.get("kinds"), f"{where}.kinds", errors),
            f"{where}.kinds",
            errors,
        ),
        namespaces=strings(m.get("namespaces"), f"{where}.namespaces", errors),
        components=strings(m.get("components"), f"{where}.components", errors),
        instances=strings(m.get("instances"), f"{where}.instances", errors),
        namespace_selector=parse_selector(
            m.get("namespaceSelector"), f"{where}.namespaceSelector", errors
        ),
        object_selector=parse_selector(m.get("objectSelector"), f"{where}.objectSelector", errors),
    )


def match_count(m: Any) -> int:
    """Values a rule's ``match`` lists as written: each kind, namespace, component and
    instance pattern; each selector label, and each expression's values (one at least), as
    :meth:`~webhook.mutation.policybounds.Tally.add` counts a match already read."""
    if not isinstance(m, dict):
        return 0
    n = sum(count(m.get(k)) for k in ("kinds", "namespaces", "components", "instances"))
    for key in ("namespaceSelector", "objectSelector"):
        sel = m.get(key)
        if not isinstance(sel, dict):
            continue
        n += count(sel.get("matchLabels"))
        exprs = sel.get("matchExpressions")
        for e in exprs if isinstance(exprs, list) else ():
            n += max(1, count(e.get("values")) if isinstance(e, dict) else 0)
    return n
