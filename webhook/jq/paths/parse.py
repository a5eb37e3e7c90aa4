"""Recognising plain jq paths, from jq's tokens (:func:`webhook.jq.syntax.tokenize`).

:func:`parse_plain` reads a plain path, :func:`parse_guarded` one that may also guard a
segment with ``// empty`` and end in a constant string; anything else is None, for libjq.
Whitespace and comments are treated as jq treats them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Final

from webhook.jq.paths.steps import GStep, Guard, Index, Iterate, Key, Step
from webhook.jq.syntax import FIELD, IDENT, NUMBER, OP, STRING, Token, TokenizeError, tokenize

__all__ = ["chain_expression", "parse_guarded", "parse_plain"]

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
    an error inside P stays an error, as in libjq 1.8. It is the step
    :class:`~webhook.jq.paths.Guard` before P's steps.
    The constant is a last segment ``| "text"`` (a string without interpolation): each
    location's value is that string (values only; ``path()`` of it is an error).
    """
    return _parse(expr, True)


def chain_expression(keys: Sequence[str]) -> str:
    """The plain path expression of a run of object keys (``."spec"."components"``): what
    :func:`parse_plain` reads back as those keys, and jq evaluates as they are followed."""
    return "".join("." + json.dumps(k) for k in keys) or "."


def _parse(expr: str, guards: bool) -> tuple[tuple[GStep, ...], str | None] | None:
    """The segments of ``expr`` separated by ``|`` (with ``guards``: guarded ones too, and a
    constant string last); None as soon as something is not plain."""
    try:
        toks = tokenize(expr)
    except TokenizeError:
        return None
    if not toks:
        return None
    reader = _Reader(toks)
    i, n = 0, len(toks)
    while True:
        found = reader.guarded_segment(i) if guards else reader.segment(i)
        if found is None:
            return None
        i = found
        if i == n:
            return tuple(reader.steps), None
        if not reader.at(i, OP, "|"):
            return None
        i += 1
        if guards and reader.at(i, STRING) and i + 1 == n:
            text = toks[i].value
            return (tuple(reader.steps), text) if text is not None else None


class _Reader:
    """The tokens of one expression and the steps read from them so far. Each method reads
    at a token index and returns the index after what it read, or None if that is not plain
    (the steps are then of no use)."""

    def __init__(self, toks: Sequence[Token]) -> None:
        self.toks = toks
        self.steps: list[GStep] = []

    def at(self, j: int, kind: str, text: str | None = None) -> bool:
        """Whether token ``j`` is of ``kind`` (and reads ``text``)."""
        toks = self.toks
        return j < len(toks) and toks[j].kind == kind and (text is None or toks[j].text == text)

    def segment(self, i: int) -> int | None:
        """A segment: its head, then its postfix steps."""
        found = self.head(i)
        return self.postfix(found) if found is not None else None

    def guarded_segment(self, i: int) -> int | None:
        """A segment that may be guarded: ``(P // empty)`` then postfix steps, or a segment
        that may end in ``// empty``."""
        start = len(self.steps)
        if self.at(i, OP, "("):
            found = self.segment(i + 1)
            found = self.guard(start, found) if found is not None else None
            if found is None or not self.at(found, OP, ")"):
                return None
            return self.postfix(found + 1)
        found = self.segment(i)
        if found is not None and self.at(found, OP, "//"):
            return self.guard(start, found)
        return found

    def head(self, i: int) -> int | None:
        """A segment head (``.name``, ``."str"``, ``.[...]``, a bare ``.``)."""
        toks = self.toks
        if self.at(i, FIELD):
            self.steps.append(Key(toks[i].text[1:]))
            return i + 1
        if not self.at(i, OP, "."):
            return None
        i += 1
        if self.at(i, STRING):
            if toks[i].value is None:
                return None
            self.steps.append(Key(toks[i].value or ""))
            return i + 1
        if self.at(i, OP, "["):
            return self.bracket(i)
        return i

    def postfix(self, i: int) -> int | None:
        """The postfix steps (``.name``, ``[...]``, ``.[...]``, ``."str"``), as many as there are."""
        toks, at = self.toks, self.at
        while i < len(toks):
            if at(i, FIELD):
                self.steps.append(Key(toks[i].text[1:]))
                i += 1
            elif at(i, OP, "[") or (at(i, OP, ".") and at(i + 1, OP, "[")):
                j = self.bracket(i if toks[i].text == "[" else i + 1)
                if j is None:
                    return None
                i = j
            elif at(i, OP, ".") and at(i + 1, STRING):
                if toks[i + 1].value is None:
                    return None
                self.steps.append(Key(toks[i + 1].value or ""))
                i += 2
            else:
                break
        return i

    def bracket(self, j: int) -> int | None:
        """``[`` ... ``]`` at ``j``: an iteration, an index or a key."""
        if self.at(j + 1, OP, "]"):
            self.steps.append(Iterate())
            return j + 2
        if self.at(j + 2, OP, "]"):
            t = self.toks[j + 1]
            if t.kind == NUMBER and t.text.isdigit() and int(t.text) <= _MAX_PLAIN_INDEX:
                self.steps.append(Index(int(t.text)))
                return j + 3
            if t.kind == STRING and t.value is not None:
                self.steps.append(Key(t.value))
                return j + 3
        return None

    def guard(self, start: int, i: int) -> int | None:
        """``// empty`` at ``i`` after the segment that began at step ``start``: the guard
        inserted before it; None when the segment iterates."""
        if not (self.at(i, OP, "//") and self.at(i + 1, IDENT, "empty")):
            return None
        steps = self.steps
        if any(not isinstance(s, Key | Index) for s in steps[start:]):
            return None
        steps.insert(start, Guard(len(steps) - start))
        return i + 2
