"""Rules about locations in an object that resolution and validation share, so that what a
definition is judged to find is exactly what the mutation writes: which locations a missing key
can be created at (inside an instance that exists, never the instance: docs/definition-rules.md,
"Created inside an instance"), and what value counts as a replica count."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from webhook.base.pointers import Path_, getpath


def parent_object(obj: Any, loc: Path_) -> dict[str, Any] | None:
    """The object holding the last step of ``loc`` (where a missing ``labels`` or
    ``schedulerName`` is created), or None: the root has no parent, and a key cannot be added
    to a list, a scalar or nothing. Validation counts a location as found by the same rule."""
    if not loc:
        return None
    parent = getpath(obj, loc[:-1])
    return parent if isinstance(parent, dict) else None


def creatable(obj: Any, loc: Path_, within: int = 0) -> tuple[int, dict[str, Any]] | None:
    """For a fragment location whose parent is missing: how many leading steps of ``loc``
    exist and the deepest of them (an object), when the rest can be created (every missing
    step a key, nothing in the way that is neither an object nor, for an index, a list) and
    what exists reaches at least ``within`` steps (the instance's own object, see
    :func:`instance_depths`; 0 for the root component, whose object is the workload itself);
    None otherwise. Validation counts such a location as found by the same rule."""
    if not loc or not isinstance(loc[-1], str):
        return None
    cur: Any = obj
    depth = 0
    for tok in loc[:-1]:
        if isinstance(cur, dict) and isinstance(tok, str):
            nxt = cur.get(tok)
        elif isinstance(cur, list) and type(tok) is int and 0 <= tok < len(cur):
            nxt = cur[tok]
        else:
            return None
        if nxt is None:
            break
        if not isinstance(nxt, dict | list):
            return None
        cur, depth = nxt, depth + 1
    if depth < within or not isinstance(cur, dict):
        return None
    if not all(isinstance(t, str) for t in loc[depth:]):
        return None
    return depth, cur


def instance_depths(locations: Sequence[Sequence[Path_]]) -> list[int]:
    """Per instance (position), the length of the longest common prefix of the locations its
    write fragments found (``locations``: per fragment, its locations in instance order):
    where the instance's own object is, inside which missing holders are created. 0 when
    fewer than two fragments locate the instance, or they share no step: then nothing but the
    parent of each location tells, and a child component's missing parent is not created."""
    n = max((len(locs) for locs in locations), default=0)
    out = []
    for i in range(n):
        here = [locs[i] for locs in locations if i < len(locs)]
        if len(here) < 2:
            out.append(0)
            continue
        first = here[0]
        k = min(len(p) for p in here)
        for other in here[1:]:
            j = 0
            while j < k and other[j] == first[j]:
                j += 1
            k = j
        out.append(k)
    return out


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
