"""Deep values outside the JSON codec: :func:`run_deep` runs code that recurses in Python per
nesting level in a thread deep enough for :data:`~webhook.base.limits.MAX_JSON_DEPTH` levels;
:func:`pruned` cuts a value below a depth, iteratively. The codec itself is
:mod:`webhook.base.jsontext`, which never recurses.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable
from typing import Any, TypeVar

from webhook.base.limits import MAX_JSON_DEPTH

T = TypeVar("T")

#: Stack of the thread :func:`run_deep` starts, for code that recurses in Python per level.
_DEEP_STACK = 256 * 1024 * 1024
_SLACK = 64
_deep_lock = threading.Lock()
_deep = threading.local()  # .frames: in a deep thread, the frames per level it allows


def run_deep(fn: Callable[[], T], *, frames_per_level: int = 1) -> T:
    """Run ``fn``, code that recurses ``frames_per_level`` Python frames per nesting level (the
    CLI's YAML and describe printing), in a thread whose stack and recursion limit allow
    :data:`~webhook.base.limits.MAX_JSON_DEPTH` levels; re-raise what it raises. Only pure-Python
    recursion is governed by the recursion limit from Python 3.12, so nothing on the request
    path uses this: :func:`~webhook.base.jsontext.loads`, :func:`~webhook.base.jsontext.dumps`
    and :func:`pruned` never recurse. One at a time: the recursion limit is the interpreter's,
    raised only while it runs. Inside such a thread, ``fn`` just runs."""
    if getattr(_deep, "frames", 0) >= frames_per_level:
        return fn()
    result: list[T] = []
    error: list[BaseException] = []

    def target() -> None:
        _deep.frames = frames_per_level
        try:
            result.append(fn())
        except BaseException as e:  # handed to the caller
            error.append(e)

    with _deep_lock:
        before = sys.getrecursionlimit()
        old_stack = threading.stack_size(_DEEP_STACK)
        try:
            sys.setrecursionlimit(max(before, MAX_JSON_DEPTH * frames_per_level + _SLACK))
            t = threading.Thread(target=target, name="karta-deep-json", daemon=True)
            t.start()
        finally:
            threading.stack_size(old_stack)
        t.join()
        sys.setrecursionlimit(before)
    if error:
        raise error[0]
    return result[0]


def pruned(value: Any, depth: int) -> Any:
    """A copy of ``value`` with every object or list nested deeper than ``depth`` levels
    replaced by null (built iteratively, so any depth is fine)."""
    if depth < 0:
        return None
    root: list[Any] = [None]
    # (container to fill, key or index, value, its depth)
    todo: list[tuple[Any, Any, Any, int]] = [(root, 0, value, 0)]
    while todo:
        parent, key, v, level = todo.pop()
        if isinstance(v, dict):
            if level >= depth:
                parent[key] = None
                continue
            copy: dict[str, Any] = {}
            parent[key] = copy
            for k, item in v.items():
                copy[k] = None
                todo.append((copy, k, item, level + 1))
        elif isinstance(v, list):
            if level >= depth:
                parent[key] = None
                continue
            items: list[Any] = [None] * len(v)
            parent[key] = items
            todo.extend((items, i, item, level + 1) for i, item in enumerate(v))
        else:
            parent[key] = v
    return root[0]
