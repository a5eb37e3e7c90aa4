"""Admission handlers: :class:`~webhook.admission.review.Request` in, a result with its
:class:`~webhook.admission.review.Response` out.

The HTTP server and the CLI both call these and hold no admission logic of their own: which
requests are judged, which samples a definition is checked against, how a finding becomes a
denial. Handlers never raise on bad objects: the mutating webhook must not block a workload
because it could not read it, so trouble becomes a warning on an allowed, unchanged request.

The handlers are :mod:`webhook.admission.mutating` (``/mutate``, and a Karta's index labels)
and :mod:`webhook.admission.validating` (``/validate``); what they answer is
:class:`webhook.admission.result.Result`. Callers import them from here.
"""

from __future__ import annotations

from webhook.admission.mutating import (
    INDEX_LABELS,
    _plan,
    mutate,
    mutate_object,
    mutate_with,
    nothing_found,
    policies_applied,
    stamp_index_labels,
)
from webhook.admission.result import Result
from webhook.admission.validating import unchanged_or_leaving, validate, validate_policy

__all__ = [
    "INDEX_LABELS",
    "Result",
    "_plan",
    "mutate",
    "mutate_object",
    "mutate_with",
    "nothing_found",
    "policies_applied",
    "stamp_index_labels",
    "unchanged_or_leaving",
    "validate",
    "validate_policy",
]
