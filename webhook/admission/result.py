"""What an admission handler answers (:class:`Result`), and the name a request's object goes by.

The handlers are :mod:`webhook.admission.mutating` and :mod:`webhook.admission.validating`
(all of them importable from :mod:`webhook.admission.handlers`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from webhook.admission.review import Request, Response
from webhook.validation.check import Report


@dataclass(slots=True)
class Result:
    """What a handler answered, and what the server counts and logs about it (not to be
    changed once made; not frozen, as :class:`webhook.mutation.plan.Plan`)."""

    response: Response
    kind: str  # the object's Kind, or "" when unknown
    outcome: str  # "patched" | "unchanged" | "skipped" | "error" | "allowed" | "denied"
    ops: int = 0
    report: Report | None = None  # /validate: the check's report, when one ran
    #: /mutate: why the policy could not be applied in full (a bounded metric label), if so
    failure: str | None = None


def object_name(req: Request) -> str:
    """The name of ``req``'s object: the request's, else the object's ``metadata.name``
    (empty when neither says)."""
    meta = req.object.get("metadata") if isinstance(req.object, Mapping) else None
    return req.name or (str(meta.get("name") or "") if isinstance(meta, Mapping) else "")
