"""A workload's status category from its definition's status mappings, as upstream reads it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from webhook.jq.engine import Outcome
from webhook.karta.statusmodel import STATUS_ORDER, UNDEFINED, StatusDefinition


def tostring(expr: str) -> str:
    """A ``byExpression`` as it is evaluated: its first result compared as jq's ``tostring``."""
    return f"({expr}\n) | tostring"


def _first(out: Outcome | None) -> Any:
    if out is None or out.error or not out.items:
        return None
    return out.items[0]


def category(
    sd: StatusDefinition,
    phase_out: Outcome | None,
    cond_out: Outcome | None,
    expression: Callable[[str], Outcome | None],
    warnings: list[str],
) -> str:
    """The first status category (upstream order) whose matchers match; ``Undefined`` if none.

    ``phase_out`` and ``cond_out`` are the outcomes of the phase and conditions paths,
    ``expression(tostring(e))`` that of a matcher's expression. Clauses of one matcher are
    ANDed, matchers of one category ORed, as upstream does."""
    phase = _first(phase_out)
    conditions: dict[str, Mapping[str, Any]] = {}
    for out, what in ((phase_out, "phaseDefinition.path"), (cond_out, "conditionsDefinition.path")):
        if out is not None and out.error:
            warnings.append(f"status {what}: {out.error}")
    for item in cond_out.items if cond_out and not cond_out.error else []:
        for cond in item if isinstance(item, list) else [item]:
            if isinstance(cond, dict) and isinstance(cond.get(sd.type_field), str):
                conditions[cond[sd.type_field]] = cond  # a later duplicate type wins
    for key in STATUS_ORDER:
        for m in sd.mappings.get(key, ()):
            if m.by_phase is not None and m.by_phase != phase:
                continue
            if not all(
                _condition_holds(conditions, cm.type, cm.status, cm.reason, sd)
                for cm in m.by_conditions
            ):
                continue
            if m.by_expression is not None:
                got = _first(expression(tostring(m.by_expression)))
                if got is None or got != m.expected_result:
                    continue
            return key.capitalize()
    return UNDEFINED


def _condition_holds(
    conds: Mapping[str, Mapping[str, Any]],
    ctype: str,
    status: str | None,
    reason: str | None,
    sd: StatusDefinition,
) -> bool:
    cond = conds.get(ctype)
    if cond is None:
        return False
    if status is not None and cond.get(sd.status_field) != status:
        return False
    return not (reason is not None and cond.get(sd.reason_field) != reason)
