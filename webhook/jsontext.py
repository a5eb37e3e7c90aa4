"""JSON text in and out, as deep as the API server accepts.

``orjson`` is fast (one decode per admission request is most of the hot path's floor) but stops
at 1,024 levels of nesting on decode and 255 on encode, while the API server stores objects
nested up to 10,000 levels (its decoder's limit): a workload author could otherwise switch the
mutation off with a deep free-form field. So :func:`loads` and :func:`dumps` use ``orjson`` and,
only for an object it refuses for its depth, the standard library's codec in a thread with a
stack large enough for :data:`~webhook.limits.MAX_JSON_DEPTH` levels. Deeper than that is a
:class:`DepthError`, as at the API server.
"""

from __future__ import annotations

import json
import sys
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import orjson

from webhook.limits import MAX_JSON_DEPTH

T = TypeVar("T")

#: Stack of the thread that decodes or encodes a deep document (the C codec recurses per level).
_DEEP_STACK = 256 * 1024 * 1024
#: Frames of the interpreter's recursion limit beyond one per nesting level (the codec's own).
_SLACK = 64
#: Frames the standard codec takes before its one per nesting level.
_CODEC_FRAMES = 8
_deep_lock = threading.Lock()
_deep = threading.local()  # .frames: in a deep thread, the frames per level it allows


class DepthError(ValueError):
    """Nested deeper than :data:`~webhook.limits.MAX_JSON_DEPTH`."""


def _is_depth(e: Exception) -> bool:
    text = str(e).lower()
    return "recursion" in text or "depth" in text


def run_deep(fn: Callable[[], T], *, frames_per_level: int = 1) -> T:
    """Run ``fn`` in a thread whose stack and recursion limit allow nesting up to
    :data:`~webhook.limits.MAX_JSON_DEPTH` levels (for code that recurses ``frames_per_level``
    frames per level); re-raise what it raises. One at a time: the recursion limit is the
    interpreter's, raised only while it runs. Inside such a thread, ``fn`` just runs."""
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


def _stack_depth() -> int:
    frame: Any = sys._getframe()
    n = 0
    while frame is not None:
        n, frame = n + 1, frame.f_back
    return n


def _bounded(fn: Callable[[], T]) -> T:
    """Run the standard codec with a recursion limit that allows exactly
    :data:`~webhook.limits.MAX_JSON_DEPTH` levels from here (callers may have raised the limit
    for their own, deeper recursion); past it, :class:`DepthError`."""
    before = sys.getrecursionlimit()
    sys.setrecursionlimit(_stack_depth() + _CODEC_FRAMES + MAX_JSON_DEPTH)
    try:
        return fn()
    except RecursionError:
        raise DepthError(f"nested deeper than {MAX_JSON_DEPTH} levels") from None
    finally:
        sys.setrecursionlimit(before)


def loads(data: bytes | str) -> Any:
    """Decode JSON text; :class:`ValueError` (``orjson.JSONDecodeError``) for text that is not
    JSON, :class:`DepthError` for nesting past the API server's limit."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as e:
        if not _is_depth(e):
            raise

    return run_deep(lambda: _bounded(lambda: json.loads(data)))


def dumps(value: Any) -> bytes:
    """Compact UTF-8 JSON of a decoded value (:class:`DepthError` past the depth limit)."""
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError as e:
        if not _is_depth(e):
            raise

    return run_deep(
        lambda: _bounded(
            lambda: json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode()
        )
    )


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
