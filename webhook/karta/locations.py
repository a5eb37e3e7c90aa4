"""Rules about locations in an object that resolution and validation share, so that what a
definition is judged to find is exactly what the mutation writes: which locations a missing key
can be created at, and what value counts as a replica count."""

from __future__ import annotations

from typing import Any

from webhook.jq.engine import Path_, getpath


def parent_object(obj: Any, loc: Path_) -> dict[str, Any] | None:
    """The object holding the last step of ``loc`` (where a missing ``labels`` or
    ``schedulerName`` is created), or None: the root has no parent, and a key cannot be added
    to a list, a scalar or nothing. Validation counts a location as found by the same rule."""
    if not loc:
        return None
    parent = getpath(obj, loc[:-1])
    return parent if isinstance(parent, dict) else None


def creatable(obj: Any, loc: Path_) -> tuple[int, dict[str, Any]] | None:
    """For a root component's fragment location: how many leading steps of ``loc`` exist as
    objects and the deepest of them, when the rest can be created (every step a key, nothing in
    the way that is not an object); None otherwise. Validation counts such a location as found
    by the same rule."""
    if not loc or not all(isinstance(t, str) for t in loc):
        return None
    cur: Any = obj
    depth = 0
    for tok in loc[:-1]:
        nxt = cur.get(tok)
        if nxt is None:
            break
        if not isinstance(nxt, dict):
            return None
        cur, depth = nxt, depth + 1
    return (depth, cur) if isinstance(cur, dict) else None


def as_count(v: Any) -> int | None:
    """A replica count as upstream reads one: a non-negative integer, an integral float or a
    string of digits; None for anything else (booleans included). Validation uses the same
    rule to judge a definition's scale paths."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int) and v >= 0:
        return v
    if isinstance(v, float) and v >= 0 and v.is_integer():
        return int(v)
    if isinstance(v, str) and v.strip().isdigit():
        return int(v.strip())
    return None
