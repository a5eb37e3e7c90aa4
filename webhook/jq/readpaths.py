"""The plain paths a jq expression of the forms definitions use reads, without running it.

A definition's paths are mostly plain (:func:`webhook.jq.paths.parse_plain`), but optional
parts are written in a few guarded forms that libjq alone can evaluate, and a typo in them
finds nothing on every sample, silently. :func:`read_paths` takes those forms apart into plain
paths a schema can judge:

* pipes of plain segments: ``.spec.tasks[] | .replicas``;
* alternatives: ``P // empty``, ``P // 0``, ``P // []``, ``P // .other`` (both sides read);
* groups followed by steps: ``(P // empty)[]``, ``(.status.conditions // [])``;
* conditionals: ``if P == null then empty else Q end`` (``P`` read, ``Q`` the result);
* a constant at the end: ``P // empty | "chief"`` (``P`` read; the value is the constant).

It returns the paths whose values are the expression's results and the paths it reads only
to decide (conditions, guards whose value is replaced by a constant), or None for anything
else: such an expression is judged on samples only.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from webhook.jq.paths import parse_plain
from webhook.jq.syntax import KEYWORD as _KEYWORD
from webhook.jq.syntax import NUMBER, OP, STRING, Token, TokenizeError, tokenize

__all__ = ["ReadPaths", "read_paths"]

_OPEN: Final = {"(": ")", "[": "]", "{": "}"}
_LITERALS: Final = frozenset({"null", "true", "false", "empty"})
_COMPARE: Final = frozenset({"==", "!="})


@dataclass
class ReadPaths:
    """``results``: plain paths whose values the expression yields; ``reads``: plain paths it
    only reads to decide. Paths are jq text relative to the input (``.`` is the input).
    ``defaulted``: a constant other than ``empty`` stands in when the results are absent
    (``(.status.conditions // [])``)."""

    results: list[str] = field(default_factory=list)
    reads: list[str] = field(default_factory=list)
    defaulted: bool = False


class _NotRecognised(Exception):
    pass


def read_paths(expr: str) -> ReadPaths | None:
    """The plain paths ``expr`` reads (module docstring), or None when its form is not one of
    those recognised."""
    try:
        toks = tokenize(expr)
    except TokenizeError:
        return None
    if not toks:
        return None
    try:
        found = _Reader(expr, toks).pipeline(0, len(toks))
    except _NotRecognised:
        return None
    return ReadPaths(
        list(dict.fromkeys(found.results)), list(dict.fromkeys(found.reads)), found.defaulted
    )


def _join(base: str, rel: str) -> str:
    if rel == ".":
        return base
    return rel if base == "." else base + rel


class _Reader:
    def __init__(self, text: str, toks: tuple[Token, ...]) -> None:
        self.text = text
        self.toks = toks
        self.close = self._matching()

    def _matching(self) -> dict[int, int]:
        """The index of each opening token's closing one (brackets, ``if`` … ``end``)."""
        stack: list[int] = []
        out: dict[int, int] = {}
        for i, t in enumerate(self.toks):
            if (t.kind == OP and t.text in _OPEN) or (t.kind == _KEYWORD and t.text == "if"):
                stack.append(i)
            elif (t.kind == OP and t.text in (")", "]", "}")) or (
                t.kind == _KEYWORD and t.text == "end"
            ):
                if not stack:
                    raise _NotRecognised
                out[stack.pop()] = i
        if stack:
            raise _NotRecognised
        return out

    def split(self, lo: int, hi: int, sep: str) -> list[tuple[int, int]]:
        """``[lo, hi)`` split at top-level tokens ``sep``."""
        parts, start, i = [], lo, lo
        while i < hi:
            t = self.toks[i]
            if i in self.close:
                i = self.close[i] + 1
                continue
            if t.text == sep and t.kind in (OP, _KEYWORD):
                parts.append((start, i))
                start = i + 1
            i += 1
        parts.append((start, hi))
        return parts

    def pipeline(self, lo: int, hi: int) -> ReadPaths:
        out = ReadPaths(results=["."])
        segments = self.split(lo, hi, "|")
        for n, (a, b) in enumerate(segments):
            if a >= b:
                raise _NotRecognised
            if self._constant(a, b):
                if n != len(segments) - 1:
                    raise _NotRecognised
                out.reads += out.results
                out.results = []
                break
            seg = self.alternative(a, b)
            out = ReadPaths(
                [_join(p, r) for p in out.results for r in seg.results],
                out.reads + [_join(p, r) for p in out.results for r in seg.reads],
                seg.defaulted,
            )
        return out

    def _constant(self, a: int, b: int) -> bool:
        t = self.toks[a]
        return b == a + 1 and (t.kind in (STRING, NUMBER) or t.text in _LITERALS)

    def alternative(self, a: int, b: int) -> ReadPaths:
        """``X // Y // …``: each side a term; constants contribute nothing."""
        out = ReadPaths()
        for x, y in self.split(a, b, "//"):
            if x >= y:
                raise _NotRecognised
            if self._constant(x, y) or self._empty_brackets(x, y):
                out.defaulted = out.defaulted or not self._is_empty(x, y)
                continue
            term = self.term(x, y)
            out.results += term.results
            out.reads += term.reads
            out.defaulted = out.defaulted or term.defaulted
        return out

    def _empty_brackets(self, x: int, y: int) -> bool:
        return y == x + 2 and self.close.get(x) == x + 1

    def term(self, a: int, b: int) -> ReadPaths:
        t = self.toks[a]
        if t.kind == _KEYWORD and t.text == "if" and self.close.get(a) == b - 1:
            return self.conditional(a, b - 1)
        if t.kind == OP and t.text == "(":
            end = self.close[a]
            inner = self.pipeline(a + 1, end)
            if end + 1 == b:
                return inner
            inner.defaulted = False
            rest = self.plain(end + 1, b, relative=True)
            return ReadPaths([p + rest for p in inner.results], inner.reads)
        return ReadPaths([self.plain(a, b)])

    def conditional(self, a: int, end: int) -> ReadPaths:
        """``if C then X (elif C then X)* else Y end``."""
        out = ReadPaths()
        i, want = a, "if"
        while i < end:
            t = self.toks[i]
            if t.text != want:
                raise _NotRecognised
            nxt = self._next_keyword(i + 1, end, ("then",) if want in ("if", "elif") else ())
            if want in ("if", "elif"):
                out.reads += self.condition(i + 1, nxt)
                j = self._next_keyword(nxt + 1, end, ("elif", "else"))
                branch = self.pipeline(nxt + 1, j) if not self._is_empty(nxt + 1, j) else None
                i, want = j, self.toks[j].text if j < end else "end"
            else:  # else
                branch = self.pipeline(i + 1, end) if not self._is_empty(i + 1, end) else None
                i = end
            if branch is not None:
                out.results += branch.results
                out.reads += branch.reads
        return out

    def _is_empty(self, a: int, b: int) -> bool:
        return b == a + 1 and self.toks[a].text == "empty"

    def _next_keyword(self, lo: int, hi: int, words: tuple[str, ...]) -> int:
        i = lo
        while i < hi:
            if i in self.close:
                i = self.close[i] + 1
                continue
            if self.toks[i].kind == _KEYWORD and self.toks[i].text in words:
                return i
            i += 1
        if words:
            raise _NotRecognised
        return hi

    def condition(self, a: int, b: int) -> list[str]:
        """``P``, ``P == literal`` or ``P != literal``: the paths P reads."""
        for i in range(a, b):
            t = self.toks[i]
            if t.kind == OP and t.text in _COMPARE and i not in self.close:
                if not self._constant(i + 1, b):
                    raise _NotRecognised
                found = self.alternative(a, i)
                return found.results + found.reads
        found = self.alternative(a, b)
        return found.results + found.reads

    def plain(self, a: int, b: int, *, relative: bool = False) -> str:
        """The text of tokens ``[a, b)`` when it is a plain path (``relative``: steps that
        follow a group, such as ``[]``, ``[0]`` or ``.key``)."""
        start = self.toks[a].pos
        stop = self.toks[b].pos if b < len(self.toks) else len(self.text)
        text = self.text[start:stop].strip()
        probe = "." + text if relative and text.startswith("[") else text
        if parse_plain(probe) is None:
            raise _NotRecognised
        return text
