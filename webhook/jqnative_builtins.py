"""The builtins of the native evaluator (:data:`webhook.jqnative_parse.BUILTINS`): their
values (shared by both modes, :data:`UNARY` and :data:`BINARY`) and their values-mode
closures (:func:`compile_call`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from webhook import jqnative_ops as ops
from webhook.jqnative_ops import JqError, truthy
from webhook.jqnative_parse import Call, Node
from webhook.jqnative_values import Compiled, Env, collect

__all__ = ["BINARY", "UNARY", "compile_call"]


def _add(v: Any) -> Any:
    acc = None
    for e in ops.members(v):
        acc = ops.plus(acc, e)
    return acc


def _pick(v: Any, *, is_min: bool) -> Any:
    i = ops.minmax(v, is_min=is_min)
    return None if i is None else v[i]


def _trim(v: Any, s: Any, *, end: bool) -> Any:
    r = ops.trimmed(v, s, end=end)
    return v if r is None else r


#: Builtins of the input alone: name -> function of the input.
UNARY: Final[dict[str, Callable[[Any], Any]]] = {
    "not": lambda v: not truthy(v),
    "length": ops.length,
    "keys": lambda v: ops.keys(v, sort=True),
    "keys_unsorted": lambda v: ops.keys(v, sort=False),
    "to_entries": ops.to_entries,
    "tostring": ops.tostring,
    "tonumber": ops.tonumber,
    "type": ops.type_name,
    "ascii_downcase": lambda v: ops.ascii_case(v, upper=False),
    "ascii_upcase": lambda v: ops.ascii_case(v, upper=True),
    "min": lambda v: _pick(v, is_min=True),
    "max": lambda v: _pick(v, is_min=False),
    "add": _add,
}

#: Builtins of the input and one argument value (one output per output of the argument).
BINARY: Final[dict[str, Callable[[Any, Any], Any]]] = {
    "ltrimstr": lambda v, s: _trim(v, s, end=False),
    "rtrimstr": lambda v, s: _trim(v, s, end=True),
    "startswith": lambda v, s: ops.startswith(v, s, end=False),
    "endswith": lambda v, s: ops.startswith(v, s, end=True),
    "split": ops.split,
    "has": ops.has,
    "index": ops.index_of,
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


def any_all(
    gen: Callable[[Any], tuple[list[Any], JqError | None]],
    cond: Callable[[Any], tuple[list[Any], JqError | None]],
    x: Any,
    *,
    is_any: bool,
) -> bool:
    """``any(gen; cond)`` / ``all(gen; cond)``: stops at the first output of ``gen | cond``
    that decides (truthy for any, falsy for all); errors before it are raised."""
    gvals, gerr = gen(x)
    for g in gvals:
        cvals, cerr = cond(g)
        for c in cvals:
            if truthy(c) == is_any:
                return is_any
        if cerr is not None:
            raise cerr
    if gerr is not None:
        raise gerr
    return not is_any


def _any_all(gen: Compiled, cond: Compiled, *, is_any: bool) -> Compiled:
    def one(x: Any, env: Env) -> Any:
        return any_all(
            lambda v: collect(gen, v, env), lambda v: collect(cond, v, env), x, is_any=is_any
        )

    return Compiled(one=one)
