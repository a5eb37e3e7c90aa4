"""The status conditions of a Karta, as upstream's operator sets them: pure functions.

Three ``metav1.Condition`` types say whether a definition is in use and why not:

* ``Validated`` — ``ValidationSucceeded`` when the webhook loaded the definition (shape, safety
  screen, structure and jq checks, one Karta per root kind), else ``ValidationFailed`` with the
  first errors as the message;
* ``CRDExists`` — ``CRDFound`` when a CustomResourceDefinition serves the root kind at its
  version, or the kind is a built-in one, else ``CRDNotFound`` (saying which versions the CRD
  serves, when it serves others);
* ``Ready`` — ``Ready`` when both are True, else ``NotReady`` naming which is not.

:func:`wanted` decides them, :func:`merged` turns them into the ``status.conditions`` list to
write (None when nothing changed): conditions of other types are kept, and a condition whose
status did not change keeps its ``lastTransitionTime``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Final

from webhook.base.limits import STATUS_ERRORS, STATUS_MESSAGE_CHARS
from webhook.karta.model import root_gvk
from webhook.schema.builtin import BUILTIN_KINDS
from webhook.schema.crds import SchemaIndex

__all__ = ["CRD_EXISTS", "READY", "VALIDATED", "Condition", "merged", "rfc3339", "wanted"]

VALIDATED: Final = "Validated"
CRD_EXISTS: Final = "CRDExists"
READY: Final = "Ready"
TYPES: Final = (VALIDATED, CRD_EXISTS, READY)


@dataclass(frozen=True, slots=True)
class Condition:
    type: str
    status: bool
    reason: str
    message: str

    @property
    def status_text(self) -> str:
        return "True" if self.status else "False"


def rfc3339(t: datetime) -> str:
    """A ``metav1.Time``: RFC 3339 in UTC, whole seconds."""
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _bounded(text: str) -> str:
    if len(text) <= STATUS_MESSAGE_CHARS:
        return text
    return text[: STATUS_MESSAGE_CHARS - 3] + "..."


def validated(errors: Sequence[str] | None) -> Condition:
    """``errors``: why the definition is not in use, None (or empty) when it is."""
    if not errors:
        return Condition(
            VALIDATED,
            True,
            "ValidationSucceeded",
            "the definition passed the webhook's checks and is loaded",
        )
    shown = "; ".join(errors[:STATUS_ERRORS])
    more = len(errors) - STATUS_ERRORS
    if more > 0:
        shown += f" (and {more} more)"
    return Condition(VALIDATED, False, "ValidationFailed", _bounded(shown))


def crd_exists(obj: Mapping[str, Any], crds: SchemaIndex) -> Condition:
    gvk = root_gvk(obj)
    if gvk is None:
        return Condition(
            CRD_EXISTS,
            False,
            "CRDNotFound",
            "spec.structureDefinition.rootComponent.kind is not set",
        )
    entry = crds.get(gvk)
    if entry is not None:
        return Condition(
            CRD_EXISTS, True, "CRDFound", f"{gvk} is served by CustomResourceDefinition {entry.crd}"
        )
    if (gvk.group, gvk.version, gvk.kind) in BUILTIN_KINDS:
        return Condition(CRD_EXISTS, True, "CRDFound", f"{gvk} is a built-in kind")
    others = sorted(crds.versions(gvk.group, gvk.kind))
    if others:
        message = (
            f"the CustomResourceDefinition of {gvk.group} {gvk.kind} serves "
            f"{', '.join(others)}, not {gvk.version}"
        )
    else:
        message = f"no CustomResourceDefinition in the cluster serves {gvk}"
    return Condition(CRD_EXISTS, False, "CRDNotFound", _bounded(message))


def ready(v: Condition, c: Condition) -> Condition:
    if v.status and c.status:
        return Condition(READY, True, "Ready", "the definition is in use")
    false = [x.type for x in (v, c) if not x.status]
    verb = "is" if len(false) == 1 else "are"
    return Condition(READY, False, "NotReady", f"not in use: {' and '.join(false)} {verb} False")


def wanted(
    obj: Mapping[str, Any], errors: Sequence[str] | None, crds: SchemaIndex
) -> list[Condition]:
    """``Validated``, ``CRDExists`` and ``Ready`` of one Karta object."""
    v = validated(errors)
    c = crd_exists(obj, crds)
    return [v, c, ready(v, c)]


def current_conditions(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    status = obj.get("status")
    conds = status.get("conditions") if isinstance(status, Mapping) else None
    return [dict(c) for c in conds if isinstance(c, Mapping)] if isinstance(conds, list) else []


def merged(
    current: Sequence[Mapping[str, Any]],
    want: Sequence[Condition],
    generation: int | None,
    now: str,
) -> list[dict[str, Any]] | None:
    """The ``status.conditions`` to write, or None when ``current`` already says ``want``.

    Our types take the place of an earlier entry of the same type (else they are appended in
    ``want``'s order); other types stay as they are. ``lastTransitionTime`` is ``now`` only for
    a condition that is new or whose status changed.
    """
    by_type = {c.type: c for c in want}
    out: list[dict[str, Any]] = []
    done: set[str] = set()
    for old in current:
        t = old.get("type")
        if not isinstance(t, str) or t not in by_type:
            out.append(dict(old))
            continue
        if t in done:
            continue  # a duplicate of a type (not possible through the API): dropped
        out.append(_render(by_type[t], old, generation, now))
        done.add(t)
    out.extend(_render(c, None, generation, now) for c in want if c.type not in done)
    return None if out == [dict(c) for c in current] else out


def _render(
    c: Condition, old: Mapping[str, Any] | None, generation: int | None, now: str
) -> dict[str, Any]:
    same = old is not None and old.get("status") == c.status_text
    since = old.get("lastTransitionTime") if same and old is not None else None
    out: dict[str, Any] = {
        "type": c.type,
        "status": c.status_text,
        "reason": c.reason,
        "message": c.message,
        "lastTransitionTime": since if isinstance(since, str) and since else now,
    }
    if generation is not None:
        out["observedGeneration"] = generation
    return out
