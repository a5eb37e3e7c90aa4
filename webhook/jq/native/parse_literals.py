"""The reader under the native evaluator's parser (:mod:`webhook.jq.native.parse`, which holds
the grammar): the token cursor (``peek``, ``at``, ``expect``, ``mk`` with the depth bound) and
the literal pieces of the subset: numbers, string literals (escapes, interpolations), literal
keys in brackets, variables in scope. :class:`Refuse` says "outside the subset".
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final

from webhook.jq.native.ast import (
    INDEX,
    ITER,
    KEY,
    Format,
    Literal,
    Node,
    Step,
    children,
)
from webhook.jq.syntax import NUMBER, OP, STRING, Token

__all__ = ["Reader", "Refuse"]

_DECIMAL = re.compile(r"[0-9]+\.[0-9]+\Z")
_MAX_INT: Final = 2**53
_ESCAPES: Final = {
    '"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t",
}  # fmt: skip


class Refuse(Exception):
    pass


class Reader:
    """The token cursor and the literals; :class:`~webhook.jq.native.parse._Parser` adds the
    grammar (:meth:`parse_pipe`, which an interpolation is parsed with)."""

    def __init__(
        self, toks: Sequence[Token], max_depth: int, scope: list[tuple[str, int]], slots: list[int]
    ) -> None:
        self.toks = toks
        self.i = 0
        self.max_depth = max_depth
        self.scope = scope
        self.slots = slots  # [next free slot]; slot 0 of an env is the work budget

    def mk(self, node: Node) -> Node:
        node.depth = 1 + max((c.depth for c in children(node)), default=0)
        if node.depth > self.max_depth:
            raise Refuse
        return node

    def peek(self, k: int = 0) -> Token | None:
        j = self.i + k
        return self.toks[j] if j < len(self.toks) else None

    def at(self, kind: str, text: str | None = None, k: int = 0) -> bool:
        t = self.peek(k)
        return t is not None and t.kind == kind and (text is None or t.text == text)

    def expect(self, kind: str, text: str) -> None:
        if not self.at(kind, text):
            raise Refuse
        self.i += 1

    def lookup(self, name: str) -> int:
        for n, slot in reversed(self.scope):
            if n == name:
                return slot
        raise Refuse  # unbound ($ENV, $__loc__, ...): libjq decides

    def string_key(self) -> str:
        t = self.toks[self.i]
        if t.value is None:
            raise Refuse  # interpolated key: a computed index
        self.i += 1
        return t.value

    def bracket(self) -> Step:
        """``[ ... ]`` after a term: iteration or a literal key."""
        self.expect(OP, "[")
        if self.at(OP, "]"):
            self.i += 1
            return Step(ITER, None, False)
        t = self.peek()
        key: str | int
        if t is not None and t.kind == STRING:
            key = self.string_key()
        elif t is not None and (t.kind == NUMBER or (t.kind == OP and t.text == "-")):
            lit = self.number()
            if not isinstance(lit, int):
                raise Refuse
            key = lit
        else:
            raise Refuse
        self.expect(OP, "]")
        return Step(KEY if isinstance(key, str) else INDEX, key, False)

    def number(self) -> int | float:
        neg = self.at(OP, "-")
        if neg:
            self.i += 1
        t = self.peek()
        if t is None or t.kind != NUMBER:
            raise Refuse
        self.i += 1
        value: int | float
        if t.text.isdigit() and int(t.text) <= _MAX_INT:
            value = int(t.text)
        elif not neg and _DECIMAL.match(t.text) and repr(float(t.text)) == t.text:
            value = float(t.text)
        else:
            raise Refuse
        if neg and not value:
            raise Refuse  # -0 is a computed negative zero in jq
        return -value if neg else value

    def string(self) -> Node:
        """A string literal; with interpolations, a :class:`Format`."""
        t = self.toks[self.i]
        self.i += 1
        if not t.interpolations:
            if t.value is None:
                raise Refuse  # an escape jq rejects or rewrites (lone surrogate)
            return Literal(t.value)
        return self.mk(Format(tuple(self.string_parts(t))))

    def string_parts(self, t: Token) -> list[str | Node]:
        """Text chunks and interpolations of a string token, in order. An interpolation's
        tokens come from the tokenizer; its end is found from its last token's position."""
        text, parts, chunk = t.text, list[str | Node](), list[str]()
        interpolations = iter(t.interpolations)
        i = 1  # after the opening quote
        while text[i] != '"':
            c = text[i]
            if c != "\\":
                chunk.append(c)
                i += 1
                continue
            e = text[i + 1]
            if e == "(":
                inner = next(interpolations)
                if not inner:
                    raise Refuse
                j = inner[-1].pos + len(inner[-1].text) - t.pos
                while text[j] in " \t\r\n":
                    j += 1
                if text[j] != ")":
                    raise Refuse  # a comment before the ")": not worth handling
                i = j + 1
                sub = type(self)(inner, self.max_depth, self.scope, self.slots)
                node = sub.parse_pipe()
                if sub.i != len(inner):
                    raise Refuse
                if chunk:
                    parts.append("".join(chunk))
                    chunk = []
                parts.append(node)
            elif e in _ESCAPES:
                chunk.append(_ESCAPES[e])
                i += 2
            elif e == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", text[i + 2 : i + 6]):
                cp = int(text[i + 2 : i + 6], 16)
                if 0xD800 <= cp < 0xE000:
                    raise Refuse  # surrogates: not worth mirroring
                chunk.append(chr(cp))
                i += 6
            else:
                raise Refuse
        if chunk:
            parts.append("".join(chunk))
        return parts

    def parse_pipe(self) -> Node:
        raise NotImplementedError  # the grammar: webhook.jq.native.parse._Parser
