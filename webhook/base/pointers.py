"""Locations in a JSON value and their RFC 6901 JSON Pointers: reading the value at a location
and writing a location as the ``path`` of a JSON Patch operation.

These are JSON helpers, not jq: a jq ``path()`` gives a location as a list of keys and indices,
and everything that plans or reads a patch (``mutation/``, ``workload/``) works on such
locations without evaluating anything. So they live here, below every package, and a request's
flow calls into ``jq/`` only to evaluate a definition's expressions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from webhook.base.limits import POINTER_CACHE_BYTES, POINTER_CACHE_KEY
from webhook.base.memo import Memo

#: One step of a location: an object key or a list index (as jq's ``path()`` gives them).
PathToken = str | int
#: A location: the steps from the root.
Path_ = tuple[PathToken, ...]


def getpath(obj: Any, path: Sequence[PathToken]) -> Any:
    """The value at a location, or None where any step is missing (jq ``getpath``)."""
    cur = obj
    for tok in path:
        if isinstance(cur, dict) and isinstance(tok, str):
            cur = cur.get(tok)
        elif isinstance(cur, list) and isinstance(tok, int) and 0 <= tok < len(cur):
            cur = cur[tok]
        else:
            return None
    return cur


def escape(token: str) -> str:
    """One key as a JSON Pointer reference token (RFC 6901): ``~`` → ``~0``, ``/`` → ``~1``.
    The one place this escape is written (:func:`pointer` memoises it)."""
    return token.replace("~", "~0").replace("/", "~1")


def to_pointer(path_tokens: Sequence[PathToken]) -> str:
    """RFC 6901 JSON Pointer of a location (``()`` → ``""``), not memoised."""
    return "".join("/" + (str(t) if isinstance(t, int) else escape(t)) for t in path_tokens)


_escaped: Memo[str, str] = Memo(POINTER_CACHE_BYTES, POINTER_CACHE_KEY)
#: Whole pointers by location: the same definitions meet objects of the same shapes, so the
#: same locations come back on every request. Bounded like the keys (by pointer length).
_pointers: Memo[tuple[PathToken, ...], str] = Memo(POINTER_CACHE_BYTES, POINTER_CACHE_KEY)


def pointer(path: Sequence[PathToken]) -> str:
    """RFC 6901 JSON Pointer of a location (``~`` → ``~0``, ``/`` → ``~1``). Same result as
    :func:`to_pointer`, memoised by location (and escaped keys by key)."""
    key = path if isinstance(path, tuple) else tuple(path)
    done = _pointers.data.get(key)
    if done is not None:
        return done
    parts = []
    memo = _escaped.data
    for t in key:
        if isinstance(t, int):
            parts.append(str(t))
            continue
        esc = memo.get(t)
        if esc is None:
            esc = escape(t)
            _escaped.put(t, esc)
        parts.append(esc)
    done = "/" + "/".join(parts) if parts else ""
    _pointers.put(key, done, len(done))
    return done
