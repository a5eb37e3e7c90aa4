"""JSON text in and out, as deep as the API server accepts, with no recursion at all.

``orjson`` is fast (one decode per admission request is most of the hot path's floor) but stops
at 1,024 levels of nesting on decode and 254 on encode, while the API server stores objects
nested up to 10,000 levels (``maxNestingDepth`` of ``sigs.k8s.io/json``, its decoder): a workload
author could otherwise switch the mutation off with a deep free-form field. So :func:`loads` and
:func:`dumps` use ``orjson`` and, only for a document it refuses for its depth, an iterative
codec of this module: an explicit stack walks the deep "spine" of the document, and every part
shallow enough for ``orjson`` is handed to it whole. Nothing here recurses, so no recursion
limit is involved: from Python 3.12 the standard library's C codec is bounded by the
interpreter's fixed C recursion limit (cpython#107263), which ``sys.setrecursionlimit`` no
longer raises (measured: ``json.loads`` stops between 1,000 and 1,500 levels on 3.12.1 and
below 10,000 on 3.13.0, whatever the limit). Deeper than the limit is a :class:`DepthError`,
as at the API server. Its cost against the standard codec in a big-stack thread it
replaces: docs/performance.md ("Figures once in the code's docstrings").
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from json import JSONDecodeError
from json.decoder import scanstring  # type: ignore[attr-defined]  # the C scanner
from typing import Any

import orjson

from webhook.base.limits import MAX_JSON_DEPTH

#: Parts of a deep document at most this many levels high are decoded by ``orjson`` (it reads
#: 1,024) and encoded by it (it writes 254), with a margin should a version lower them.
_ORJSON_READS = 512
_ORJSON_WRITES = 128
#: Everything but brackets up to the next bracket, strings (with any brackets in them) whole.
_TO_BRACKET = re.compile(r'(?:[^"\[\]{}]++|"(?:[^"\\]++|\\.)*+")*+([\[\]{}])', re.DOTALL)
_BLANK = frozenset(" \t\n\r")
_CLOSER = {"[": "]", "{": "}"}


class DepthError(ValueError):
    """Nested deeper than the limit (:data:`~webhook.base.limits.MAX_JSON_DEPTH` unless told)."""


def _is_depth(e: Exception) -> bool:
    text = str(e).lower()
    return "recursion" in text or "depth" in text


def loads(data: bytes | str, *, max_depth: int = MAX_JSON_DEPTH) -> Any:
    """Decode JSON text; :class:`ValueError` (``orjson.JSONDecodeError`` or
    ``json.JSONDecodeError``, ``UnicodeDecodeError`` for bytes that are not UTF-8) for text that
    is not JSON, :class:`DepthError` for nesting deeper than ``max_depth`` levels."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as e:
        if not _is_depth(e):
            raise
    text = data if isinstance(data, str) else bytes(data).decode("utf-8")
    return _loads_deep(text, max_depth)


def dumps(value: Any, *, max_depth: int = MAX_JSON_DEPTH) -> bytes:
    """Compact UTF-8 JSON of a decoded value (:class:`DepthError` past ``max_depth`` levels,
    and for a value that contains itself)."""
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError as e:
        if not _is_depth(e):
            raise
    return _dumps_deep(value, max_depth)


# --------------------------------------------------------------------------- decoding


#: One container of a deep document too high for ``orjson``: its closing bracket's index and
#: the (opening, closing) indices of its children that are too high as well.
_Spine = tuple[int, list[tuple[int, int]]]


def _spine(s: str, max_depth: int) -> dict[int, _Spine]:
    """The containers of ``s`` more than :data:`_ORJSON_READS` levels high, by the index of
    their opening bracket. One step per bracket: strings and scalars are skipped by the regular
    expression. Stops quietly at the first bracket that does not match (the document is not
    JSON; :func:`_loads_deep` then says so); :class:`DepthError` past ``max_depth`` levels."""
    spine: dict[int, _Spine] = {}
    # per open container: its bracket, its index, the height of its highest child so far, its
    # children in the spine
    stack: list[tuple[str, int, int, list[tuple[int, int]]]] = []
    match = _TO_BRACKET.match
    pos = 0
    while (m := match(s, pos)) is not None:
        i = m.end() - 1
        c = s[i]
        pos = i + 1
        if c in _CLOSER:
            if len(stack) >= max_depth:
                raise DepthError(f"nested deeper than {max_depth} levels")
            stack.append((c, i, 0, []))
            continue
        if not stack or _CLOSER[stack[-1][0]] != c:
            break
        _, start, highest, kids = stack.pop()
        height = highest + 1
        if height > _ORJSON_READS:
            spine[start] = (i, kids)
        if stack:
            pc, pstart, phighest, pkids = stack[-1]
            if height > _ORJSON_READS:
                pkids.append((start, i))
            if height > phighest:
                stack[-1] = (pc, pstart, height, pkids)
    return spine


def _error(msg: str, s: str, pos: int) -> JSONDecodeError:
    return JSONDecodeError(msg, s, min(pos, len(s)))


def _strip(s: str, start: int, end: int) -> tuple[int, int]:
    """``start`` and ``end`` moved past the JSON whitespace at either end of ``s[start:end]``."""
    while start < end and s[start] in _BLANK:
        start += 1
    while end > start and s[end - 1] in _BLANK:
        end -= 1
    return start, end


def _run(s: str, start: int, end: int, is_dict: bool) -> Any:
    """The members or elements in ``s[start:end]`` (a run between two children in the spine,
    without the commas around it), read by ``orjson``; at least one is required."""
    a, b = _strip(s, start, end)
    if a == b:
        raise _error("expecting a value", s, a)
    try:
        return orjson.loads(("{" if is_dict else "[") + s[a:b] + ("}" if is_dict else "]"))
    except orjson.JSONDecodeError as e:
        raise _error(f"{e.msg} (in the run of values from here)", s, a) from None


def _key_before(s: str, start: int, end: int) -> tuple[str, int]:
    """The key that ends ``s[start:end]`` (``"key" :`` and whitespace) and the index where it
    starts."""
    a, b = _strip(s, start, end)
    if b == a or s[b - 1] != ":":
        raise _error("expecting ':' delimiter", s, b)
    a, b = _strip(s, a, b - 1)
    if b == a or s[b - 1] != '"':
        raise _error("expecting a property name enclosed in double quotes", s, b)
    # the opening quote: inside a JSON string every quote is escaped by an odd number of
    # backslashes
    q = b - 1
    while True:
        q = s.rfind('"', a, q)
        if q < 0:
            raise _error("expecting a property name enclosed in double quotes", s, a)
        n = q
        while n > a and s[n - 1] == "\\":
            n -= 1
        if (q - n) % 2 == 0:
            break
    try:
        key, after = scanstring(s, q + 1, True)
    except JSONDecodeError as e:
        raise _error(e.msg, s, e.pos) from None
    if after != b:
        raise _error("expecting ':' delimiter", s, after)
    return str(key), q


class _Frame:
    """A container of the spine being read: the next child in the spine to read, where the
    text not yet read starts, the key the child read now goes to."""

    __slots__ = ("close", "container", "is_dict", "key", "kids", "next", "pos")

    def __init__(self, s: str, open_: int, spine: _Spine) -> None:
        self.is_dict = s[open_] == "{"
        self.container: Any = {} if self.is_dict else []
        self.close, self.kids = spine
        self.next = 0
        self.pos = open_ + 1
        self.key = ""


def _loads_deep(s: str, max_depth: int) -> Any:
    """Read a document with parts too deep for ``orjson``: the containers of its spine (those
    too high) with an explicit stack, each run of values between two of their children in the
    spine with ``orjson``. Commas and keys around the children in the spine are checked
    here; ``orjson`` checks the rest."""
    spine = _spine(s, max_depth)
    a, b = _strip(s, 0, len(s))
    if a not in spine:  # shallow enough for orjson after all, or not JSON
        try:
            return orjson.loads(s)
        except orjson.JSONDecodeError as e:
            if _is_depth(e):  # not closed: the spine has only the containers closed
                raise _error("brackets do not match, or the document ends early", s, a) from None
            raise
    root = spine[a]
    if root[0] != b - 1:
        raise _error("extra data", s, root[0] + 1)
    stack = [_Frame(s, a, root)]
    while True:
        f = stack[-1]
        first = f.next == 0
        if f.next < len(f.kids):
            # the run before the next child in the spine, then the child
            kid, _ = f.kids[f.next]
            end = kid
            if f.is_dict:
                f.key, end = _key_before(s, f.pos, kid)
            a, b = _strip(s, f.pos, end)
            if not first:
                if a == b or s[a] != ",":
                    raise _error("expecting ',' delimiter", s, a)
                a += 1
            if a != b:
                if s[b - 1] != ",":
                    raise _error("expecting ',' delimiter", s, b)
                _add(f, _run(s, a, b - 1, f.is_dict))
            stack.append(_Frame(s, kid, spine[kid]))
            continue
        # the run after the last child in the spine, then the container is complete
        a, b = _strip(s, f.pos, f.close)
        if not first:
            if a != b:
                if s[a] != ",":
                    raise _error("expecting ',' delimiter", s, a)
                _add(f, _run(s, a + 1, b, f.is_dict))
        elif a != b:
            _add(f, _run(s, a, b, f.is_dict))
        stack.pop()
        if not stack:
            return f.container
        parent = stack[-1]
        if parent.is_dict:
            parent.container[parent.key] = f.container
        else:
            parent.container.append(f.container)
        parent.pos = f.close + 1
        parent.next += 1


def _add(f: _Frame, run: Any) -> None:
    if f.is_dict:
        f.container.update(run)
    else:
        f.container.extend(run)


# --------------------------------------------------------------------------- encoding


def _deep_ids(value: Any, max_depth: int) -> set[int]:
    """The ids of the containers in ``value`` more than :data:`_ORJSON_WRITES` levels high
    (those ``orjson`` cannot write whole), found with an explicit stack."""
    deep: set[int] = set()
    # per open container: its id, an iterator over its children, its highest child so far
    stack: list[tuple[int, Any, int]] = [(id(value), _children(value), 0)]
    while stack:
        cid, children, highest = stack[-1]
        for child in children:
            if isinstance(child, (dict, list)):
                if len(stack) >= max_depth:
                    raise DepthError(f"nested deeper than {max_depth} levels")
                stack.append((id(child), _children(child), 0))
                break
        else:
            stack.pop()
            height = highest + 1
            if height > _ORJSON_WRITES:
                deep.add(cid)
            if stack:
                pid, pchildren, phighest = stack[-1]
                if height > phighest:
                    stack[-1] = (pid, pchildren, height)
    return deep


def _children(value: Any) -> Any:
    return iter(value.values()) if isinstance(value, dict) else iter(value)


def _pieces(value: Any, deep: set[int]) -> Iterator[Any]:
    """The JSON text of a container in the spine: bytes, and each child in the spine as itself
    (for the writer to descend into); each run of children between those written by
    ``orjson`` at once."""
    is_dict = isinstance(value, dict)
    items: list[Any] = list(value.items()) if is_dict else value
    yield b"{" if is_dict else b"["
    start = 0
    for i, item in enumerate(items):
        child = item[1] if is_dict else item
        if id(child) not in deep:
            continue
        if i > start:
            run = dict(items[start:i]) if is_dict else items[start:i]
            yield orjson.dumps(run)[1:-1] + b","
        if is_dict:
            if not isinstance(item[0], str):
                raise TypeError(f"dict key must be str, not {type(item[0]).__name__}")
            yield orjson.dumps(item[0]) + b":"
        yield child
        if i + 1 < len(items):
            yield b","
        start = i + 1
    if start < len(items):
        run = dict(items[start:]) if is_dict else items[start:]
        yield orjson.dumps(run)[1:-1]
    yield b"}" if is_dict else b"]"


def _dumps_deep(value: Any, max_depth: int) -> bytes:
    """An iterative JSON writer: the explicit ``stack`` holds the containers of the spine (too
    high for ``orjson``) being written; everything else ``orjson`` writes, a run at a time."""
    if not isinstance(value, (dict, list)):
        return orjson.dumps(value)
    deep = _deep_ids(value, max_depth)
    if id(value) not in deep:
        return orjson.dumps(value)
    out: list[bytes] = []
    stack = [_pieces(value, deep)]
    while stack:
        for piece in stack[-1]:
            if isinstance(piece, bytes):
                out.append(piece)
            else:
                stack.append(_pieces(piece, deep))
                break
        else:
            stack.pop()
    return b"".join(out)
