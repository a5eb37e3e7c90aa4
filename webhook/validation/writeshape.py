"""Write locations that follow the workload's shape, never the values its author writes.

A definition's write paths (``podTemplateSpecPath``, ``podSpecPath``, ``metadataPath``, the
fragmented ``schedulerNamePath``, ``labelsPath``, ...) may depend on the object's *shape*:
which keys exist, whether a field is present (``has("x")``, ``.spec.x // empty``), how long a
list is. They may compare its values with constants the definition names
(``select(.name == "launcher")``, ``to_entries[] | select(.key == "x")``). No other use of the
author's strings and numbers is allowed: ``error``, regular expressions, ordering comparisons
(``.spec.x > 3``), string functions (``startswith``, ``ascii_downcase``), arithmetic,
interpolation, comparisons of two values of the object. Otherwise whoever names a replicated
job decides whether its pods are stamped.

Two checks, both pure:

* :func:`problems` reads a write path's AST (:mod:`webhook.jq.native.parse`) and follows where
  the object's values flow. It is an abstract interpretation over four kinds: a constant of the
  definition, a shape fact, a value of the object, and something computed from such a value.
  Every use that is not allowed is a problem. An expression outside the parser's subset
  (``reduce``, ``def``, ``try``/``catch``, slices, other builtins) is refused as a write path:
  nothing can be said of it.
* :func:`substituted` is the run-time complement, for what the text cannot tell (``length`` of
  a list is shape, of a string is a value). It copies a sample, changing its strings and numbers
  except those equal to one of the expressions' constants, so every comparison with a constant
  keeps its result. A write path whose locations move on the copy depends on values.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from webhook.jq.native.ast import (
    BUILTINS,
    Alt,
    And,
    Bind,
    Binop,
    Call,
    Collect,
    Comma,
    Format,
    Identity,
    If,
    Literal,
    Node,
    Object,
    Or,
    Path,
    Pipe,
    Try,
    Var,
)
from webhook.jq.native.parse import parse
from webhook.jq.syntax import FORMAT, IDENT, KEYWORD, NUMBER, STRING, Token, TokenizeError, tokenize

__all__ = ["REGEX_FUNCTIONS", "constants", "problems", "substituted"]

#: jq's regular-expression builtins (libjq's ``_match_impl`` underlies them all).
REGEX_FUNCTIONS: Final = frozenset(
    {"test", "match", "capture", "scan", "splits", "sub", "gsub", "_match_impl"}
)
#: Builtins that look at a value's content: on a value of the object they make a value-derived
#: condition (on the definition's constants they are constants).
_VALUE_FUNCTIONS: Final = frozenset(
    {
        "tostring", "tonumber", "ascii_downcase", "ascii_upcase", "ltrimstr", "rtrimstr",
        "startswith", "endswith", "split", "index", "min", "max", "add", "floor",
    }
)  # fmt: skip
#: Keywords outside the analysed subset, named when a write path uses them.
_UNSUPPORTED_KEYWORDS: Final = frozenset({"reduce", "foreach", "def", "try", "catch", "label"})
_LITERALS: Final = frozenset({"true", "false", "null"})
_ORDERING: Final = frozenset({"<", "<=", ">", ">="})
_EQUALITY: Final = frozenset({"==", "!="})

_RULE: Final = (
    "a write location may depend only on the object's shape (keys, presence, list lengths) "
    "and on == / != comparisons of its values with the definition's constants"
)

# The kinds of what an expression produces, in increasing order of concern.
_CONST, _SHAPE, _VALUE, _DERIVED = 0, 1, 2, 3


@dataclass(frozen=True, slots=True)
class _V:
    """What an expression produces: its kind, and whether it is known to be a list or an
    object (then ``length`` counts entries, which is shape)."""

    kind: int
    coll: bool = False


def _join(*vs: _V) -> _V:
    if not vs:
        return _V(_CONST)
    return _V(max(v.kind for v in vs), all(v.coll for v in vs))


def problems(expr: str) -> list[str]:
    """Why the write path ``expr`` lets the workload's values steer its locations ([] when
    it does not). Each problem names the construct."""
    try:
        tokens = tokenize(expr)
    except TokenizeError as e:
        return [f"cannot tokenize: {e}"]
    named = _named_problems(tokens)
    parsed = parse(expr)
    if parsed is None:
        if named:
            return named
        return [
            "uses jq beyond what a write path may use (paths, select, if, //, ==, !=, has, "
            "length, keys, to_entries, any, all, first, last, as-bindings, ...): "
            f"{_unsupported(tokens) or 'slices, computed keys or destructuring'}; so its "
            f"independence from the workload's values cannot be shown ({_RULE})"
        ]
    out: list[str] = list(named)
    _Flow(out).run(parsed.node, _V(_VALUE), {})
    return list(dict.fromkeys(out))


def _named_problems(tokens: Iterable[Token]) -> list[str]:
    """``error`` and the regex builtins, wherever they appear (interpolations included)."""
    out: list[str] = []
    for t in tokens:
        if t.kind == IDENT and t.text == "error":
            out.append(
                f"'error' in a write path lets the workload's values decide whether its pods "
                f"are stamped ({_RULE})"
            )
        elif t.kind == IDENT and t.text in REGEX_FUNCTIONS:
            out.append(
                f"regular expression function {t.text!r} in a write path: a write location "
                f"must not depend on matching the workload's values ({_RULE})"
            )
        for inner in t.interpolations:
            out.extend(_named_problems(inner))
    return out


def _unsupported(tokens: Iterable[Token]) -> str:
    """The identifiers, keywords and formats of ``tokens`` outside the analysed subset."""
    found: dict[str, None] = {}
    for t in tokens:
        unknown_call = t.kind == IDENT and t.text not in BUILTINS and t.text not in _LITERALS
        if (
            unknown_call
            or t.kind == FORMAT
            or (t.kind == KEYWORD and t.text in _UNSUPPORTED_KEYWORDS)
        ):
            found.setdefault(repr(t.text))
        for inner in t.interpolations:
            if (more := _unsupported(inner)) and more not in found:
                found.setdefault(more)
    return ", ".join(found)


class _Flow:
    """The abstract interpretation: what each node produces from what it is given."""

    def __init__(self, out: list[str]) -> None:
        self.out = out

    def bad(self, what: str) -> _V:
        self.out.append(f"{what} ({_RULE})")
        return _V(_DERIVED)

    def run(self, n: Node, inp: _V, env: Mapping[int, _V]) -> _V:
        if isinstance(n, Identity):
            return inp
        if isinstance(n, Literal):
            return _V(_CONST, isinstance(n.value, list | dict))
        if isinstance(n, Var):
            return env.get(n.slot, _V(_VALUE))
        if isinstance(n, Path):
            base = self.run(n.base, inp, env) if n.base is not None else inp
            return _V(base.kind)  # an entry of a constant is constant; of a value, a value
        if isinstance(n, Pipe):
            cur = inp
            for stage in n.stages:
                cur = self.run(stage, cur, env)
            return cur
        if isinstance(n, Comma | Alt):
            # ``a // b``: the truthiness of a value (null or false) is its presence
            return _join(*(self.run(i, inp, env) for i in n.items))
        if isinstance(n, And | Or):
            a, b = self.run(n.a, inp, env), self.run(n.b, inp, env)
            return _V(_DERIVED if _DERIVED in (a.kind, b.kind) else _SHAPE)
        if isinstance(n, Binop):
            return self.binop(n, inp, env)
        if isinstance(n, If):
            self.run(n.cond, inp, env)  # truthiness is presence; a derived one is reported
            return _join(self.run(n.then, inp, env), self.run(n.else_, inp, env))
        if isinstance(n, Bind):
            inner = dict(env)
            inner[n.slot] = self.run(n.source, inp, env)
            return self.run(n.body, inp, inner)
        if isinstance(n, Collect):
            body = self.run(n.body, inp, env) if n.body is not None else _V(_CONST)
            return _V(body.kind, True)
        if isinstance(n, Object):
            kinds = []
            for k, v in n.entries:
                key = self.run(k, inp, env)
                if key.kind == _VALUE:
                    key = self.bad("an object key made from a value of the workload")
                kinds.append(key)
                kinds.append(self.run(v, inp, env))
            return _V(_join(*kinds).kind, True)
        if isinstance(n, Format):
            parts = [self.run(p, inp, env) for p in n.parts if isinstance(p, Node)]
            if any(p.kind == _VALUE for p in parts):
                return self.bad("a string interpolating a value of the workload")
            return _V(_join(*parts).kind)
        if isinstance(n, Try):
            return self.run(n.body, inp, env)
        if isinstance(n, Call):
            return self.call(n, inp, env)
        return self.bad(f"an unexpected construct {type(n).__name__}")  # pragma: no cover

    def binop(self, n: Binop, inp: _V, env: Mapping[int, _V]) -> _V:
        a, b = self.run(n.a, inp, env), self.run(n.b, inp, env)
        if _DERIVED in (a.kind, b.kind):
            return _V(_DERIVED)  # reported where it was derived
        values = (a.kind == _VALUE) + (b.kind == _VALUE)
        if n.op in _EQUALITY:
            if values == 2:
                return self.bad(f"'{n.op}' between two values of the workload")
            if values == 1 and _SHAPE in (a.kind, b.kind):
                return self.bad(f"'{n.op}' between a value of the workload and a computed one")
            return _V(_SHAPE)
        if values:
            if n.op in _ORDERING:
                return self.bad(f"ordering comparison '{n.op}' on a value of the workload")
            return self.bad(f"arithmetic '{n.op}' on a value of the workload")
        return _V(max(a.kind, b.kind), a.coll and b.coll)

    def call(self, n: Call, inp: _V, env: Mapping[int, _V]) -> _V:
        name = n.name
        if name == "select":
            self.run(n.args[0], inp, env)  # truthiness is presence; a derived one is reported
            return inp
        if name == "empty":
            return _V(_CONST)
        if name in ("first", "last"):
            return self.run(n.args[0], inp, env)
        if name in ("any", "all"):
            gen = self.run(n.args[0], inp, env)
            cond = self.run(n.args[1], gen, env)
            return _V(_DERIVED if _DERIVED in (gen.kind, cond.kind) else _SHAPE)
        args = [self.run(a, inp, env) for a in n.args]
        if any(a.kind == _DERIVED for a in args) or inp.kind == _DERIVED:
            return _V(_DERIVED)
        if name == "has":
            if args[0].kind == _VALUE:
                return self.bad("'has' with a key taken from a value of the workload")
            return _V(_SHAPE)
        if name in ("not", "type"):
            return _V(min(inp.kind, _SHAPE))
        if name == "length":
            # of a list or an object: a count (shape); of a string or a number: a value, which
            # the text cannot tell apart, so :func:`substituted` judges it on the samples
            return _V(min(inp.kind, _SHAPE))
        if name in ("keys", "keys_unsorted", "to_entries"):
            return _V(inp.kind, True)
        if name in _VALUE_FUNCTIONS:
            if inp.kind == _VALUE or any(a.kind == _VALUE for a in args):
                return self.bad(f"{name!r} applied to a value of the workload")
            return _V(max((inp.kind, *(a.kind for a in args))))
        return self.bad(f"function {name!r}")


# --------------------------------------------------------------------------- run-time check


def constants(expressions: Iterable[str]) -> tuple[frozenset[str], frozenset[float]]:
    """The string and number constants of ``expressions`` (interpolations included)."""
    strings: set[str] = set()
    numbers: set[float] = set()

    def collect(tokens: Iterable[Token]) -> None:
        for t in tokens:
            if t.kind == STRING and t.value is not None:
                strings.add(t.value)
            elif t.kind == NUMBER:
                numbers.add(float(t.text))
            for inner in t.interpolations:
                collect(inner)

    for expr in expressions:
        try:
            collect(tokenize(expr))
        except TokenizeError:
            continue
    return frozenset(strings), frozenset(numbers)


#: How :func:`substituted` changes a string: a prefix that keeps label-like syntax and makes it
#: longer than 63 characters... or shorter (the second variant).
_LONG: Final = "karta-value-probe-" + "v" * 48


def substituted(obj: Any, strings: frozenset[str], numbers: frozenset[float], variant: int) -> Any:
    """A copy of ``obj`` whose string and number values (not keys, not booleans or nulls) are
    changed, except those equal to one of the constants: every ``==``/``!=`` with a constant
    keeps its result, everything else a value decides may change. ``variant`` 0 makes strings
    long and numbers large, 1 makes them short and small. Iterative: any depth."""

    def scalar(v: Any) -> Any:
        if isinstance(v, str):
            if v in strings:
                return v
            new = _LONG + v if variant == 0 else ("" if v else "k")
            return new if new not in strings else new + "-"
        if isinstance(v, bool) or not isinstance(v, int | float):
            return v
        if float(v) in numbers:
            return v
        changed = v + 1_000_003 if variant == 0 else (-1 - abs(v))
        while float(changed) in numbers:
            changed += 1
        return changed

    def fresh(v: Any) -> Any:
        return {} if isinstance(v, Mapping) else [] if isinstance(v, list) else scalar(v)

    top = fresh(obj)
    stack: list[tuple[Any, Any]] = [(obj, top)]
    while stack:
        src, dst = stack.pop()
        items = src.items() if isinstance(src, Mapping) else enumerate(src)
        for k, v in items:
            new = fresh(v)
            if isinstance(dst, dict):
                dst[k] = new
            else:
                dst.append(new)
            if isinstance(v, Mapping | list):
                stack.append((v, new))
    return top
