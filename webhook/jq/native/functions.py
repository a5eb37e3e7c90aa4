"""The builtins of the native evaluator (:data:`webhook.jq.native.parse.BUILTINS`): their
values (shared by both modes, :data:`UNARY` and :data:`BINARY`) and their values-mode
closures (:func:`compile_call`)."""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any, Final

from webhook.jq.native import ops
from webhook.jq.native.ast import Call, Node
from webhook.jq.native.ops import JqError, truthy
from webhook.jq.native.stream import Compiled, Env, collect, iterate_error

__all__ = ["BINARY", "UNARY", "compile_call"]


# ------------------------------------------------------------------- value functions


def length(v: Any) -> Any:
    t = type(v)
    if t is str or t is list or t is dict:
        return len(v)
    if v is None:
        return 0
    if t is bool:
        raise JqError(f"{ops.desc(v)} has no length")
    return ops.num(abs(ops.to_float(v)))


def keys(v: Any, *, sort: bool) -> list[Any]:
    if type(v) is dict:
        return sorted(v) if sort else list(v)
    if type(v) is list:
        return list(range(len(v)))
    raise JqError(f"{ops.desc(v)} has no keys")


def to_entries(v: Any) -> list[Any]:
    if type(v) is dict:
        return [{"key": k, "value": e} for k, e in v.items()]
    if type(v) is list:
        return [{"key": i, "value": e} for i, e in enumerate(v)]
    raise JqError(f"{ops.desc(v)} has no keys")


_PLAIN_INT = re.compile(r"-?[1-9][0-9]{0,15}\Z|0\Z")


def tonumber(v: Any) -> Any:
    if ops.is_num(v):
        return v
    if type(v) is str:
        if _PLAIN_INT.match(v):
            return int(v)
        raise ops.NeedsLibjq("tonumber of a non-integer string")
    raise JqError(f"{ops.desc(v)} cannot be parsed as a number")


def floor(v: Any) -> Any:
    if not ops.is_num(v):
        raise JqError(f"{ops.desc(v)} number required")
    f = ops.to_float(v)
    if not math.isfinite(f) or abs(f) >= 2**53:
        raise ops.NeedsLibjq("floor of a number beyond 2**53")
    return ops.num(float(math.floor(f)))


def type_name(v: Any) -> str:
    return ops._KINDS[type(v)]


_DOWN: Final = {c: c + 32 for c in range(65, 91)}
_UP: Final = {c: c - 32 for c in range(97, 123)}


def ascii_case(v: Any, *, upper: bool) -> str:
    if type(v) is not str:
        raise JqError("explode input must be a string")
    return v.translate(_UP if upper else _DOWN)


def minmax(v: Any, *, is_min: bool) -> int | None:
    """Index of the element ``min``/``max`` returns (first minimum, last maximum); None for
    an empty array."""
    if type(v) is not list:
        raise JqError(f"{ops.desc(v)} and {ops.desc(v)} cannot be iterated over")
    if not v:
        return None
    best = 0
    for i in range(1, len(v)):
        c = ops.cmp(v[i], v[best])
        if (c < 0) if is_min else (c >= 0):
            best = i
    return best


def members(v: Any) -> list[Any]:
    """``.[]`` of an array or object (libjq's message otherwise)."""
    if type(v) is list:
        return v
    if type(v) is dict:
        return list(v.values())
    raise iterate_error(v)


def startswith(v: Any, s: Any, *, end: bool) -> bool:
    if type(v) is not str or type(s) is not str:
        raise JqError(f"{'endswith' if end else 'startswith'}() requires string inputs")
    return v.endswith(s) if end else v.startswith(s)


def trimmed(v: Any, s: Any, *, end: bool) -> str | None:
    """``ltrimstr``/``rtrimstr``: the trimmed string, or None when it is left as it is."""
    if not startswith(v, s, end=end):
        return None
    text: str = v
    return text[: len(text) - len(s)] if end else text[len(s) :]


def split(v: Any, sep: Any) -> list[str]:
    if type(v) is not str or type(sep) is not str:
        raise JqError("split input and separator must be strings")
    if not v:
        return []
    return list(v) if not sep else v.split(sep)


def has(v: Any, k: Any) -> bool:
    tv = type(v)
    if tv is dict and type(k) is str:
        return k in v
    if tv is list and ops.is_num(k):
        return 0 <= ops.to_float(k) < len(v)
    if v is None:
        return False
    raise JqError(f"Cannot check whether {ops.kind(v)} has a {ops.kind(k)} key")


def index_of(v: Any, x: Any) -> Any:
    """``index(x)`` for an array input and a non-array ``x`` (or null and a key)."""
    if v is None and (type(x) is str or ops.is_num(x)):
        return None  # null | .[$x] | .[0]
    if type(v) is list and type(x) is not list:
        for i, e in enumerate(v):
            if ops.equal(e, x):
                return i
        return None
    raise ops.NeedsLibjq("index of a string, object or sub-array")


# ------------------------------------------------------------------- tables


def _add(v: Any) -> Any:
    acc = None
    for e in members(v):
        acc = ops.plus(acc, e)
    return acc


def _pick(v: Any, *, is_min: bool) -> Any:
    i = minmax(v, is_min=is_min)
    return None if i is None else v[i]


def _trim(v: Any, s: Any, *, end: bool) -> Any:
    r = trimmed(v, s, end=end)
    return v if r is None else r


#: Builtins of the input alone: name -> function of the input.
UNARY: Final[dict[str, Callable[[Any], Any]]] = {
    "not": lambda v: not truthy(v),
    "length": length,
    "keys": lambda v: keys(v, sort=True),
    "keys_unsorted": lambda v: keys(v, sort=False),
    "to_entries": to_entries,
    "tostring": ops.tostring,
    "tonumber": tonumber,
    "floor": floor,
    "type": type_name,
    "ascii_downcase": lambda v: ascii_case(v, upper=False),
    "ascii_upcase": lambda v: ascii_case(v, upper=True),
    "min": lambda v: _pick(v, is_min=True),
    "max": lambda v: _pick(v, is_min=False),
    "add": _add,
}

#: Builtins of the input and one argument value (one output per output of the argument).
BINARY: Final[dict[str, Callable[[Any, Any], Any]]] = {
    "ltrimstr": lambda v, s: _trim(v, s, end=False),
    "rtrimstr": lambda v, s: _trim(v, s, end=True),
    "startswith": lambda v, s: startswith(v, s, end=False),
    "endswith": lambda v, s: startswith(v, s, end=True),
    "split": split,
    "has": has,
    "index": index_of,
}


def compile_call(n: Call, compile_node: Callable[[Node], Compiled]) -> Compiled:
    name = n.name
    args = [compile_node(a) for a in n.args]
    if name == "empty":
        return Compiled(lambda x, env, out: None)
    if name in UNARY:
        f = UNARY[name]
        return Compiled(one=lambda x, env: f(x))
    if name in BINARY:
        return _binary(BINARY[name], args[0])
    if name == "select":
        return _select(args[0])
    if name in ("first", "last"):
        return _first_last(args[0], first=name == "first")
    if name in ("any", "all"):
        return _any_all(args[0], args[1], is_any=name == "any")
    raise AssertionError(f"unknown builtin {name}")  # the parser only admits BUILTINS


def _binary(f: Callable[[Any, Any], Any], arg: Compiled) -> Compiled:
    if arg.one is not None:
        a1 = arg.one
        return Compiled(one=lambda x, env: f(x, a1(x, env)))

    def fn(x: Any, env: Env, out: list[Any]) -> None:
        vals, err = collect(arg, x, env)
        for a in vals:
            out.append(f(x, a))
        if err is not None:
            raise err

    return Compiled(fn)


def _select(cond: Compiled) -> Compiled:
    if cond.one is not None:
        c1 = cond.one

        def sel(x: Any, env: Env, out: list[Any]) -> None:
            c = c1(x, env)
            if c is not None and c is not False:
                out.append(x)

        return Compiled(sel)

    def fn(x: Any, env: Env, out: list[Any]) -> None:
        vals, err = collect(cond, x, env)
        for c in vals:
            if c is not None and c is not False:
                out.append(x)
        if err is not None:
            raise err

    return Compiled(fn)


def _first_last(f: Compiled, *, first: bool) -> Compiled:
    def fn(x: Any, env: Env, out: list[Any]) -> None:
        vals, err = collect(f, x, env)
        if first:
            if vals:
                out.append(vals[0])  # what follows the first output is never evaluated
                return
        elif err is None and vals:
            out.append(vals[-1])
        if err is not None:
            raise err

    return Compiled(fn)


def _any_all(gen: Compiled, cond: Compiled, *, is_any: bool) -> Compiled:
    gfn, c1 = gen.fn, cond.one

    def one(x: Any, env: Env) -> Any:
        """Stops at the first output of ``gen | cond`` that decides (truthy for any, falsy
        for all); errors before it are raised."""
        gvals: list[Any] = []
        gerr: JqError | None = None
        try:
            gfn(x, env, gvals)
        except JqError as e:
            gerr = e
        for g in gvals:
            if c1 is not None:
                if truthy(c1(g, env)) == is_any:
                    return is_any
                continue
            cvals, cerr = collect(cond, g, env)
            for c in cvals:
                if truthy(c) == is_any:
                    return is_any
            if cerr is not None:
                raise cerr
        if gerr is not None:
            raise gerr
        return not is_any

    return Compiled(one=one)
