"""Plain jq paths, natively: parsing them and walking them as libjq's ``path()`` would.

Nearly every path a definition writes through is "plain" (``.spec.replicatedJobs[].template``).
libjq re-parses the whole object for every call, which dominates admission latency, so
:func:`parse_plain` recognises plain paths and :func:`walk` evaluates them on the already
decoded object in place. Results and error messages are those of libjq's ``path(EXPR)``
(libjq 1.8, as bundled with the ``jq`` Python package), checked against libjq by
``tests/jq/test_jqpath.py``. A path it gives is a location
(:data:`webhook.base.pointers.Path_`); JSON Pointers of locations are :mod:`webhook.base.pointers`'s.

No libjq import here: this module must be usable where libjq is only available in a sandboxed
child process.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, Final

from webhook.base.pointers import PathToken
from webhook.jq.syntax import FIELD, IDENT, NUMBER, OP, STRING, TokenizeError, tokenize

__all__ = [
    "GStep",
    "Guard",
    "GuardedRun",
    "Index",
    "Iterate",
    "Key",
    "Run",
    "Step",
    "WalkError",
    "parse_guarded",
    "parse_plain",
    "segments",
    "walk",
    "walk_objects",
    "walk_shared",
]


@dataclass(frozen=True, slots=True)
class Key:
    """``.name`` / ``."name"`` / ``.["name"]``: object member (null stays null)."""

    name: str


@dataclass(frozen=True, slots=True)
class Index:
    """``[N]`` / ``.[N]`` with a non-negative integer literal: array element."""

    i: int


@dataclass(frozen=True, slots=True)
class Iterate:
    """``[]`` / ``.[]``: every element of an array, every value of an object."""


Step = Key | Index | Iterate


@dataclass(frozen=True, slots=True)
class Guard:
    """``(P // empty)``: the next ``n`` steps (keys and indices: P) are followed, and where
    they end at null or false there is nothing (not an error, not "absent"). A wrong type
    inside P is the same error as without the guard: libjq 1.8's ``//`` does not suppress
    the errors of its left side (``.a // empty`` on ``3`` fails; tests/jq/test_jqpath.py).
    Only :func:`parse_guarded` gives it, never :func:`parse_plain`."""

    n: int


GStep = Step | Guard

#: Larger indices go to libjq: it converts them through a double and a C ``int``.
_MAX_PLAIN_INDEX: Final = 2**31 - 1


def parse_plain(expr: str) -> tuple[Step, ...] | None:
    """The steps of a plain path expression, or None when ``expr`` is anything else.

    Plain means a pipe of segments, each starting with ``.`` and made only of ``.ident``,
    ``."str"``, ``.["str"]``, ``[N]`` / ``.[N]`` and ``[]`` / ``.[]``; ``.`` alone is the empty
    path. Parsing uses jq's tokens, so whitespace and comments are treated as jq treats them.
    Anything else (``?``, ``//``, slices, negative or huge indices, functions, variables, commas,
    interpolated strings) returns None and must be evaluated by libjq.
    """
    found = _parse(expr, False)
    if found is None:
        return None
    steps, _ = found
    return steps  # type: ignore[return-value]  # no Guard without guards


def parse_guarded(expr: str) -> tuple[tuple[GStep, ...], str | None] | None:
    """A plain path (:func:`parse_plain`) that may also guard segments, and its constant tail:
    ``(steps, constant)``, or None for anything else.

    A guard is ``P // empty`` (a whole segment, ``//`` binding tighter than ``|``) or
    ``(P // empty)`` followed by more steps, where P is a segment of keys and indices (no
    iteration): it yields P's one value when that is neither null nor false, else nothing;
    an error inside P stays an error, as in libjq 1.8. It is the step :class:`Guard` before
    P's steps.
    The constant is a last segment ``| "text"`` (a string without interpolation): each
    location's value is that string (values only; ``path()`` of it is an error).
    """
    return _parse(expr, True)


def _parse(expr: str, guards: bool) -> tuple[tuple[GStep, ...], str | None] | None:
    try:
        toks = tokenize(expr)
    except TokenizeError:
        return None
    if not toks:
        return None
    steps: list[GStep] = []
    i, n = 0, len(toks)

    def at(j: int, kind: str, text: str | None = None) -> bool:
        return j < n and toks[j].kind == kind and (text is None or toks[j].text == text)

    def bracket(j: int) -> int | None:
        """Parse ``[`` ... ``]`` at ``j``; return the index after it, or None if not plain."""
        if at(j + 1, OP, "]"):
            steps.append(Iterate())
            return j + 2
        if at(j + 2, OP, "]"):
            t = toks[j + 1]
            if t.kind == NUMBER and t.text.isdigit() and int(t.text) <= _MAX_PLAIN_INDEX:
                steps.append(Index(int(t.text)))
                return j + 3
            if t.kind == STRING and t.value is not None:
                steps.append(Key(t.value))
                return j + 3
        return None

    def head(i: int) -> int | None:
        """Parse a segment head at ``i`` (``.name``, ``."str"``, ``.[...]``, a bare ``.``)."""
        if at(i, FIELD):
            steps.append(Key(toks[i].text[1:]))
            return i + 1
        if not at(i, OP, "."):
            return None
        i += 1
        if at(i, STRING):
            if toks[i].value is None:
                return None
            steps.append(Key(toks[i].value or ""))
            return i + 1
        if at(i, OP, "["):
            return bracket(i)
        return i

    def postfix(i: int) -> int | None:
        """Parse the postfix steps at ``i``; the index after them, or None if not plain."""
        while i < n:
            if at(i, FIELD):
                steps.append(Key(toks[i].text[1:]))
                i += 1
            elif at(i, OP, "[") or (at(i, OP, ".") and at(i + 1, OP, "[")):
                j = bracket(i if toks[i].text == "[" else i + 1)
                if j is None:
                    return None
                i = j
            elif at(i, OP, ".") and at(i + 1, STRING):
                if toks[i + 1].value is None:
                    return None
                steps.append(Key(toks[i + 1].value or ""))
                i += 2
            else:
                break
        return i

    def guard(start: int, i: int) -> int | None:
        """``// empty`` at ``i`` after the segment that began at step ``start``: the guard
        inserted before it; the index after ``empty``, or None when the segment iterates."""
        if not (at(i, OP, "//") and at(i + 1, IDENT, "empty")):
            return None
        if any(not isinstance(s, Key | Index) for s in steps[start:]):
            return None
        steps.insert(start, Guard(len(steps) - start))
        return i + 2

    while True:
        start = len(steps)
        found: int | None
        if guards and at(i, OP, "("):  # ``(P // empty)`` then postfix steps
            found = head(i + 1)
            found = postfix(found) if found is not None else None
            found = guard(start, found) if found is not None else None
            if found is None or not at(found, OP, ")"):
                return None
            found = postfix(found + 1)
        else:
            found = head(i)
            found = postfix(found) if found is not None else None
            if guards and found is not None and at(found, OP, "//"):
                found = guard(start, found)
        if found is None:
            return None
        i = found
        if i == n:
            return tuple(steps), None
        if not at(i, OP, "|"):
            return None
        i += 1
        if guards and at(i, STRING) and i + 1 == n:
            text = toks[i].value
            return (tuple(steps), text) if text is not None else None


class WalkError(ValueError):
    """A plain path failed on this object; the message is libjq's, byte for byte.

    ``iterates_null`` is True exactly for ``Cannot iterate over null (null)``: callers treat a
    path through an absent list or map as "no locations" rather than as an error.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.iterates_null = message == "Cannot iterate over null (null)"


def walk(steps: Sequence[GStep], obj: Any) -> list[tuple[tuple[PathToken, ...], Any]]:
    """Evaluate plain ``steps`` on ``obj``: ``(path, value)`` pairs as libjq's ``path()`` gives.

    Order is libjq's (depth first; objects in insertion order), which also decides which error
    is raised first. Values are the objects inside ``obj``, not copies. A missing key or
    out-of-range index yields None at that location; indexing or iterating a value of the wrong
    type raises :class:`WalkError` with libjq's message. A :class:`Guard` yields nothing where
    its chain ends at null or false. Iterative but for guards: any number of steps.
    """
    out: list[tuple[tuple[PathToken, ...], Any]] = []
    last = len(steps)
    # Depth first with an explicit stack: (next step, value, path so far); children are
    # pushed in reverse so that they come off in libjq's order.
    todo: list[tuple[int, Any, tuple[PathToken, ...]]] = [(0, obj, ())]
    while todo:
        k, value, path = todo.pop()
        while k < last:
            step = steps[k]
            if isinstance(step, Key):
                if isinstance(value, dict):
                    value = value.get(step.name)
                elif value is not None:
                    raise WalkError(
                        f"Cannot index {_kind(value)} with string ({_trunc(_dump(step.name))})"
                    )
                path += (step.name,)
            elif isinstance(step, Index):
                if isinstance(value, list):
                    value = value[step.i] if step.i < len(value) else None
                elif value is not None:
                    raise WalkError(f"Cannot index {_kind(value)} with number ({step.i})")
                path += (step.i,)
            elif isinstance(step, Iterate):
                if isinstance(value, list):
                    items: list[tuple[PathToken, Any]] = list(enumerate(value))
                elif isinstance(value, dict):
                    items = list(value.items())
                else:
                    raise WalkError(f"Cannot iterate over {_kind(value)} ({_trunc(_dump(value))})")
                todo.extend((k + 1, item, (*path, tok)) for tok, item in reversed(items))
                break
            elif isinstance(step, Guard):
                # P has no iteration: one location, or the error any walk of it raises
                ((sub, value),) = walk(steps[k + 1 : k + 1 + step.n], value)
                if value is None or value is False:
                    break  # nothing here
                path += sub
                k += step.n
            else:
                raise TypeError(f"not a plain path step: {step!r}")
            k += 1
        else:
            out.append((path, value))
    return out


@dataclass(frozen=True, slots=True)
class GuardedRun:
    """A run of keys (:func:`segments`) with guards in it: ``items`` are its keys and, for
    each :class:`Guard`, the tuple of the keys it covers; ``keys`` are all of them in order
    (the location's tokens)."""

    items: tuple[str | tuple[str, ...], ...]
    keys: tuple[str, ...]


#: a run of keys between two iterations: a tuple of keys, or one with guards
Run = tuple[str, ...] | GuardedRun


def segments(steps: Sequence[GStep]) -> tuple[Run, ...] | None:
    """A path of object keys and iterations as the runs of keys between its iterations
    (``.spec.jobs[].template`` → ``(("spec", "jobs"), ("template",))``; a run with a guard
    is a :class:`GuardedRun`); None when a step is an index."""
    out: list[Run] = []
    run: list[str | tuple[str, ...]] = []
    k, last = 0, len(steps)

    def close() -> Run:
        if all(type(item) is str for item in run):
            return tuple(run)  # type: ignore[arg-type]  # keys only
        keys = tuple(k for item in run for k in ((item,) if isinstance(item, str) else item))
        return GuardedRun(tuple(run), keys)

    while k < last:
        step = steps[k]
        if isinstance(step, Key):
            run.append(step.name)
        elif isinstance(step, Iterate):
            out.append(close())
            run = []
        elif isinstance(step, Guard):
            chain = steps[k + 1 : k + 1 + step.n]
            if not all(isinstance(s, Key) for s in chain):
                return None
            run.append(tuple(s.name for s in chain))  # type: ignore[union-attr]
            k += step.n
        else:
            return None
        k += 1
    out.append(close())
    return tuple(out)


def walk_objects(segs: tuple[Run, ...], obj: Any) -> list[tuple[tuple[PathToken, ...], Any]] | None:
    """What :func:`walk` gives for the path of :func:`segments` ``segs``, on an object where
    every key is looked up in an object (or null) and every iteration is over a list or an
    object; None otherwise, and then :func:`walk` says what happens (an error, or nothing
    there). Level by level: each location is replaced by its children in order, which is
    the walk's depth-first order."""
    found = walk_shared(segs[:-1], ((segs[-1], True),), obj)
    return found[0] if found is not None else None


def chain_expression(keys: Sequence[str]) -> str:
    """The plain path expression of a run of object keys (``."spec"."components"``): what
    :func:`parse_plain` reads back as those keys, and jq evaluates as they are followed."""
    return "".join("." + json.dumps(k) for k in keys) or "."


def walk_shared(
    prefix: tuple[Run, ...], tails: tuple[tuple[Run, bool], ...], obj: Any
) -> list[list[Any]] | None:
    """For each ``(tail, paths)`` of ``tails``: what :func:`walk_objects` gives for the path
    ``prefix + (tail,)`` (its values only, unless ``paths``), walking their common ``prefix``
    once; None when it would decline any of them. Each list is as long as the prefix's, but
    for a tail with a guard, which leaves out the locations where it yields nothing."""
    level: list[tuple[tuple[PathToken, ...], Any]] = [((), obj)]
    for keys in prefix:  # each run of keys, then an iteration
        run = _run(level, keys, True) if type(keys) is tuple else _run_guarded(level, keys, True)
        if run is None:
            return None
        nxt: list[tuple[tuple[PathToken, ...], Any]] = []
        for path, value in run:
            if type(value) is list:
                nxt.extend([((*path, i), item) for i, item in enumerate(value)])
            elif type(value) is dict:
                nxt.extend([((*path, k), item) for k, item in value.items()])
            else:
                return None
        level = nxt
    out: list[list[Any]] = []
    for keys, paths in tails:
        if type(keys) is tuple:
            found = _run(level, keys, paths)
        else:
            found = _run_guarded(level, keys, paths)
        if found is None:
            return None
        out.append(found)
    return out


def _run(
    level: list[tuple[tuple[PathToken, ...], Any]], keys: tuple[str, ...], paths: bool
) -> list[Any] | None:
    """Each location of ``level`` followed by the run of keys ``keys`` (as a location, or
    only its value unless ``paths``), in a list of its own; None when a key meets what is
    neither an object nor null."""
    out: list[Any] = []
    for path, value in level:
        for key in keys:
            if type(value) is dict:
                value = value.get(key)
            elif value is not None:
                return None
        out.append((path + keys, value) if paths else value)
    return out


def _run_guarded(
    level: list[tuple[tuple[PathToken, ...], Any]], run: Run, paths: bool
) -> list[Any] | None:
    """:func:`_run` of a :class:`GuardedRun`: a location whose guard yields nothing is left
    out."""
    assert isinstance(run, GuardedRun)
    out: list[Any] = []
    keys = run.keys
    for path, value in level:
        for item in run.items:
            if type(item) is str:
                if type(value) is dict:
                    value = value.get(item)
                elif value is not None:
                    return None
                continue
            for key in item:
                if type(value) is dict:
                    value = value.get(key)
                elif value is not None:
                    return None
            if value is None or value is False:
                break
        else:
            out.append((path + keys, value) if paths else value)
    return out


def _kind(value: Any) -> str:
    """jq's kind name of a decoded JSON value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def _dump(value: Any) -> str:
    """Compact JSON as libjq 1.8 dumps a scalar in an error message.

    Numbers keep their literal (libjq 1.8 preserves number literals) in decNumber's canonical
    form: ``1e+16`` → ``1E+16``, ``1e-05`` → ``0.00001``, ``3.0`` stays ``3.0``; Python's
    ``Decimal`` implements the same specification. Strings escape ``"``, ``\\``, control
    characters and DEL; other characters, ``/`` included, stay raw.
    """
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        try:
            return str(Decimal(repr(value)))
        except InvalidOperation:  # inf/nan are not JSON; say something sensible
            return repr(value)
    if isinstance(value, str):
        return '"' + "".join(_escape(c) for c in value) + '"'
    raise TypeError(f"cannot describe {type(value).__name__} in a jq message")


def _escape(c: str) -> str:
    o = ord(c)
    if c == '"':
        return '\\"'
    if c == "\\":
        return "\\\\"
    if c in "\b\f\n\r\t":
        return {"\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}[c]
    if o < 0x20 or o == 0x7F:
        return f"\\u{o:04x}"
    if 0xD800 <= o < 0xE000:
        return "\ufffd"  # libjq replaces a lone surrogate
    return c


#: libjq copies the dump into a 30-byte buffer (29 bytes plus NUL).
_ERRBUF: Final = 30


def _trunc(text: str) -> str:
    """Truncate a dump as libjq 1.8 does in error messages.

    Up to 29 UTF-8 bytes are kept whole. Longer dumps keep 26 bytes then ``...``; a string
    (array, object) keeps 25 and closes with ``..."`` (``...]``, ``...}``). The cut backs off
    to a UTF-8 character boundary, so it never splits a character (it may split an escape).
    """
    raw = text.encode()
    if len(raw) <= _ERRBUF - 1:
        return text
    closer = {'"': '"', "[": "]", "{": "}"}.get(text[:1], "")
    cut = _ERRBUF - 5 if closer else _ERRBUF - 4
    while cut > 0 and (raw[cut] & 0xC0) == 0x80:
        cut -= 1
    return raw[:cut].decode() + "..." + closer
