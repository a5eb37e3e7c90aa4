"""The AST of the native jq evaluator (:mod:`webhook.jq.native.evaluate`), built by
:mod:`webhook.jq.native.parse`. Every node records its depth (1 + its deepest child), which the
parser caps so that evaluation, which recurses on nodes, stays shallow."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from webhook.jq.syntax import KEYWORD, OP, Token

__all__ = [
    "BUILTINS",
    "INDEX",
    "ITER",
    "KEY",
    "Alt",
    "And",
    "Bind",
    "Binop",
    "Call",
    "Collect",
    "Comma",
    "Format",
    "Identity",
    "If",
    "Literal",
    "Node",
    "Object",
    "Or",
    "Path",
    "Pipe",
    "Step",
    "Try",
    "Var",
    "children",
]  # fmt: skip


@dataclass(slots=True, eq=False)
class Node:
    depth: int = field(init=False, default=1)


@dataclass(slots=True, eq=False)
class Identity(Node):
    pass


#: Path step kinds: object key, array index, iteration.
KEY, INDEX, ITER = 0, 1, 2


@dataclass(frozen=True, slots=True)
class Step:
    kind: int
    key: str | int | None
    opt: bool


@dataclass(slots=True, eq=False)
class Path(Node):
    """``base`` (None: the input) followed by index/iterate steps."""

    base: Node | None
    steps: tuple[Step, ...]


@dataclass(slots=True, eq=False)
class Literal(Node):
    value: Any


@dataclass(slots=True, eq=False)
class Format(Node):
    """A string with interpolations: text chunks and expressions, in order."""

    parts: tuple[str | Node, ...]


@dataclass(slots=True, eq=False)
class Var(Node):
    slot: int


@dataclass(slots=True, eq=False)
class Pipe(Node):
    stages: tuple[Node, ...]


@dataclass(slots=True, eq=False)
class Comma(Node):
    items: tuple[Node, ...]


@dataclass(slots=True, eq=False)
class Alt(Node):
    """``a // b // c`` (right associative)."""

    items: tuple[Node, ...]


@dataclass(slots=True, eq=False)
class And(Node):
    a: Node
    b: Node


@dataclass(slots=True, eq=False)
class Or(Node):
    a: Node
    b: Node


@dataclass(slots=True, eq=False)
class Binop(Node):
    """Arithmetic (``+ - * / %``) and comparisons."""

    op: str
    a: Node
    b: Node


@dataclass(slots=True, eq=False)
class If(Node):
    cond: Node
    then: Node
    else_: Node


@dataclass(slots=True, eq=False)
class Bind(Node):
    """``source as $var | body``."""

    source: Node
    slot: int
    body: Node


@dataclass(slots=True, eq=False)
class Collect(Node):
    """``[body]`` (``[]`` when body is None)."""

    body: Node | None


@dataclass(slots=True, eq=False)
class Object(Node):
    entries: tuple[tuple[Node, Node], ...]


@dataclass(slots=True, eq=False)
class Try(Node):
    """``body?``."""

    body: Node


@dataclass(slots=True, eq=False)
class Call(Node):
    """A builtin (after desugaring, see :data:`BUILTINS`)."""

    name: str
    args: tuple[Node, ...]


def children(n: Node) -> list[Node]:
    """The sub-expressions of a node (for depth and for callers that walk the AST)."""
    if isinstance(n, Path):
        return [n.base] if n.base else []
    if isinstance(n, Format):
        return [p for p in n.parts if isinstance(p, Node)]
    if isinstance(n, Pipe):
        return list(n.stages)
    if isinstance(n, Comma | Alt):
        return list(n.items)
    if isinstance(n, And | Or | Binop):
        return [n.a, n.b]
    if isinstance(n, If):
        return [n.cond, n.then, n.else_]
    if isinstance(n, Bind):
        return [n.source, n.body]
    if isinstance(n, Collect):
        return [n.body] if n.body else []
    if isinstance(n, Object):
        return [x for kv in n.entries for x in kv]
    if isinstance(n, Try):
        return [n.body]
    if isinstance(n, Call):
        return list(n.args)
    return []


#: Builtins of the subset: name -> arities. ``first``/``last``/``values``/``map``/``IN`` and the
#: one- and zero-argument ``any``/``all`` are desugared to other nodes.
BUILTINS: Final[dict[str, frozenset[int]]] = {
    **{n: frozenset({0}) for n in (
        "empty", "not", "length", "keys", "keys_unsorted", "to_entries", "tostring",
        "tonumber", "type", "ascii_downcase", "ascii_upcase", "min", "max", "add", "values",
        "floor",
    )},
    **{n: frozenset({1}) for n in (
        "select", "ltrimstr", "rtrimstr", "startswith", "endswith", "split", "has", "index",
        "map", "IN",
    )},
    "first": frozenset({0, 1}),
    "last": frozenset({0, 1}),
    "any": frozenset({0, 1, 2}),
    "all": frozenset({0, 1, 2}),
}  # fmt: skip


@dataclass(frozen=True, slots=True)
class Parsed:
    """A parsed expression and the size of its variable environment (slot 0: the budget)."""

    node: Node
    nslots: int


def nesting(toks: Sequence[Token]) -> int:
    """How deeply brackets, ``if``/``end`` and interpolations nest in a token stream."""
    depth = deepest = 0
    for t in toks:
        if (t.kind == OP and t.text in "([{") or (t.kind == KEYWORD and t.text == "if"):
            depth += 1
        elif (t.kind == OP and t.text in ")]}") or (t.kind == KEYWORD and t.text == "end"):
            depth -= 1
        for inner in t.interpolations:
            deepest = max(deepest, depth + 1 + nesting(inner))
        deepest = max(deepest, depth)
    return deepest


def constant(n: Node) -> bool:
    """What libjq's parser folds into a constant (literals and operators on them)."""
    if isinstance(n, Literal):
        return True
    if isinstance(n, Collect):
        return n.body is None or constant(n.body)
    if isinstance(n, Comma):
        return all(constant(i) for i in n.items)
    if isinstance(n, Object):
        return all(constant(k) and constant(v) for k, v in n.entries)
    return isinstance(n, Binop) and constant(n.a) and constant(n.b)
