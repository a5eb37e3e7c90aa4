"""A Karta's ``statusDefinition``: the status categories and how each is recognised, typed.

Its jq fields (``phaseDefinition.path``, ``conditionsDefinition.path``) are in the field table
(:data:`webhook.karta.fields.COMPONENT_FIELDS`); the matchers' expressions are listed by
:func:`webhook.karta.model.jq_fields`; :mod:`webhook.workload.phase` evaluates them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from webhook.base.errors import join_path
from webhook.base.reader import Reader

#: Status categories in upstream's evaluation order (first match wins for our single value).
#: ``progressing`` and ``pending`` are proposed upstream (dsx-ai-factory/workload-map issue
#: 347: split ``initializing`` into "actively moving to running" and "waiting, nothing runs
#: yet"); they are read and matched just before ``initializing``, the category they refine,
#: progressing first (the more specific of the two when both match).
STATUS_ORDER = (
    "resuming",
    "suspending",
    "suspended",
    "running",
    "failed",
    "completed",
    "progressing",
    "pending",
    "initializing",
    "degraded",
)
UNDEFINED = "Undefined"


@dataclass(frozen=True)
class ConditionMatcher:
    type: str
    status: str | None = None
    reason: str | None = None


@dataclass(frozen=True)
class StatusMatcher:
    field_path: str
    by_phase: str | None = None
    by_conditions: tuple[ConditionMatcher, ...] = ()
    by_expression: str | None = None
    expected_result: str | None = None

    @property
    def empty(self) -> bool:
        """No clauses: it matches every object."""
        return self.by_phase is None and not self.by_conditions and self.by_expression is None


@dataclass(frozen=True)
class StatusDefinition:
    """The parts of a status definition that are not jq fields of :data:`COMPONENT_FIELDS`."""

    type_field: str = "type"
    status_field: str = "status"
    message_field: str = "message"
    reason_field: str = "reason"
    mappings: Mapping[str, tuple[StatusMatcher, ...]] = field(default_factory=dict)
    #: ``statusMappings`` keys that are no category this version knows (a newer upstream's):
    #: read, reported as warnings, never matched
    unknown: tuple[str, ...] = ()


def _matcher(r: Reader, value: Any, path: str) -> StatusMatcher | None:
    d = r.obj(value, path)
    if d is None:
        return None
    conditions = []
    cpath = join_path(path, "byConditions")
    for i, c in enumerate(r.items(d.get("byConditions"), cpath)):
        ipath = join_path(cpath, i)
        cd = r.obj(c, ipath)
        if cd is None:
            continue
        ctype = r.string(cd.get("type"), join_path(ipath, "type"), required=True) or ""
        conditions.append(
            ConditionMatcher(
                ctype,
                r.string(cd.get("status"), join_path(ipath, "status")),
                r.string(cd.get("reason"), join_path(ipath, "reason")),
            )
        )
    expression = expected = None
    epath = join_path(path, "byExpression")
    ed = r.obj(d.get("byExpression"), epath)
    if ed is not None:
        expression = r.string(ed.get("expression"), join_path(epath, "expression"), required=True)
        # YAML turns `expectedResult: true` into a boolean; the comparison is on jq's
        # `tostring`, so accept scalars the way a user means them.
        rpath = join_path(epath, "expectedResult")
        expected = r.scalar_text(ed.get("expectedResult"), rpath)
        if ed.get("expectedResult") is None:
            r.missing(rpath)
    return StatusMatcher(
        field_path=path,
        by_phase=r.string(d.get("byPhase"), join_path(path, "byPhase")),
        by_conditions=tuple(conditions),
        by_expression=expression,
        expected_result=expected,
    )


def parse_status(r: Reader, value: Any, path: str) -> StatusDefinition | None:
    d = r.obj(value, path)
    if d is None:
        return None
    cpath = join_path(path, "conditionsDefinition")
    cd = r.obj(d.get("conditionsDefinition"), cpath) or {}

    def name(key: str, default: str) -> str:
        return r.string(cd.get(key), join_path(cpath, key)) or default

    mpath = join_path(path, "statusMappings")
    md = r.obj(d.get("statusMappings"), mpath) or {}
    mappings: dict[str, tuple[StatusMatcher, ...]] = {}
    unknown: list[str] = []
    for key, matchers in md.items():
        kpath = join_path(mpath, key)
        if key not in STATUS_ORDER:
            unknown.append(key)  # a category added upstream after us: not a reason to refuse
            continue
        parsed = [
            _matcher(r, m, join_path(kpath, i)) for i, m in enumerate(r.items(matchers, kpath))
        ]
        mappings[key] = tuple(m for m in parsed if m is not None)
    return StatusDefinition(
        type_field=name("typeFieldName", "type"),
        status_field=name("statusFieldName", "status"),
        message_field=name("messageFieldName", "message"),
        reason_field=name("reasonFieldName", "reason"),
        mappings=mappings,
        unknown=tuple(unknown),
    )
