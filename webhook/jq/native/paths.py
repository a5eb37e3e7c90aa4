"""Paths mode of the native evaluator: libjq's ``path(EXPR)``, interpreted on the AST.

libjq tracks one path while it evaluates ``path(f)``: index and iteration steps append to it,
and each step, like the end of ``f``, first checks that its input *is* the value at the
tracked path (``jv_identical``: the same jv; null, true and false are one jv each), raising
"Invalid path expression ..." otherwise. Sub-expressions that libjq evaluates as
"subexpressions" (conditions, operands, arguments, ``as`` sources, object entries) run with
tracking off and leave the path alone; ``[...]``, ``and``/``or`` operands, ``first(f)`` and
``last(f)`` run with tracking on.

Outputs here are ``(value, token, state)``: ``state`` is ``(path, value at path, its token)``
or None with tracking off; a token says which jv a value is
(:mod:`webhook.jq.native.paths_tokens`). Builtins whose path behaviour is intricate hand over to
libjq when tracked: ``index`` (libjq tracks an array as a path element) and
``ltrimstr``/``rtrimstr`` when they trim (it tracks a slice).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any, Final

from webhook.jq.native import ops
from webhook.jq.native.ast import (
    INDEX,
    ITER,
    KEY,
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
from webhook.jq.native.functions import BINARY, UNARY
from webhook.jq.native.ops import JqError, truthy
from webhook.jq.native.paths_tokens import (
    ROOT,
    Built,
    Out,
    binary,
    child_token,
    identical,
    plus_token,
    unary,
)
from webhook.jq.native.stream import (
    charge,
    index_error,
    iterate_error,
    key_error,
    object_key,
    product,
)

__all__ = ["run_paths"]

Env = list[Any]


def run_paths(node: Node, obj: Any, env: Env) -> tuple[list[tuple[Any, Any]], JqError | None]:
    """``path(node)`` on ``obj``: ``(path, value)`` pairs, and the error that ended them."""
    outs, err = _collect(node, obj, ROOT, ((), obj, ROOT), env)
    res: list[tuple[Any, Any]] = []
    for v, tok, st in outs:
        if not identical(v, tok, st):
            raise JqError(f"Invalid path expression with result {ops.trunc(ops.dump(v))}")
        res.append((st[0], st[1]))
    return res, err


def _collect(node: Node, v: Any, tok: Any, st: Any, env: Env) -> tuple[list[Out], JqError | None]:
    tmp: list[Out] = []
    try:
        _EVAL[type(node)](node, v, tok, st, env, tmp)
    except JqError as e:
        return tmp, e
    return tmp, None


def ev(node: Node, v: Any, tok: Any, st: Any, env: Env, out: list[Out]) -> None:
    _EVAL[type(node)](node, v, tok, st, env, out)


def _values(node: Node, v: Any, tok: Any, env: Env) -> tuple[list[Out], JqError | None]:
    """A subexpression: tracking off."""
    return _collect(node, v, tok, None, env)


# ------------------------------------------------------------------------------ nodes


def _identity(n: Identity, v: Any, tok: Any, st: Any, env: Env, out: list[Out]) -> None:
    out.append((v, tok, st))


def _literal(n: Literal, v: Any, tok: Any, st: Any, env: Env, out: list[Out]) -> None:
    out.append((n.value, None, st))


def _var(n: Var, v: Any, tok: Any, st: Any, env: Env, out: list[Out]) -> None:
    value, vtok = env[n.slot]
    out.append((value, vtok, st))


def _step(kind: int, key: Any, opt: bool, item: Out, env: Env, nxt: list[Out]) -> None:
    v, tok, st = item
    if st is not None and not identical(v, tok, st):
        if kind == ITER:
            raise JqError(
                f"Invalid path expression near attempt to iterate through {ops.trunc(ops.dump(v))}"
            )
        raise JqError(
            "Invalid path expression near attempt to access element "
            f"{ops.trunc(ops.dump(key))} of {ops.trunc(ops.dump(v))}"
        )
    t = type(v)
    if kind == ITER:
        if t is list:
            charge(env, len(v))
            pairs: Any = enumerate(v)
        elif t is dict:
            charge(env, len(v))
            pairs = v.items()
        elif opt:
            return
        else:
            raise iterate_error(v)
        for k, e in pairs:
            ctok = child_token(v, tok, k)
            nxt.append((e, ctok, (st[0] + (k,), e, ctok) if st is not None else None))
        return
    if kind == KEY and t is dict:
        child = v.get(key)
    elif kind == INDEX and t is list:
        k = key if key >= 0 else key + len(v)
        child = v[k] if 0 <= k < len(v) else None
    elif v is None:
        child = None
    elif opt:
        return
    else:
        raise key_error(v, key) if kind == KEY else index_error(v, key)
    ctok = child_token(v, tok, key)
    nxt.append((child, ctok, (st[0] + (key,), child, ctok) if st is not None else None))


def _path(n: Path, v: Any, tok: Any, st: Any, env: Env, out: list[Out]) -> None:
    err: JqError | None = None
    cur: list[Out]
    if n.base is None:
        cur = [(v, tok, st)]
    else:
        cur, err = _collect(n.base, v, tok, st, env)
    for s in n.steps:
        nxt: list[Out] = []
        try:
            for item in cur:
                _step(s.kind, s.key, s.opt, item, env, nxt)
        except JqError as e:
            err = e
        cur = nxt
    out.extend(cur)
    if err is not None:
        raise err


def _pipe(n: Pipe, v: Any, tok: Any, st: Any, env: Env, out: list[Out]) -> None:
    cur = [(v, tok, st)]
    err: JqError | None = None
    for stage in n.stages[:-1]:
        f = _EVAL[type(stage)]
        nxt: list[Out] = []
        try:
            for cv, ctok, cst in cur:
                f(stage, cv, ctok, cst, env, nxt)
        except JqError as e:
            err = e
        cur = nxt
    last = n.stages[-1]
    for cv, ctok, cst in cur:
        ev(last, cv, ctok, cst, env, out)
    if err is not None:
        raise err


def _comma(n: Comma, v: Any, tok: Any, st: Any, env: Env, out: list[Out]) -> None:
    charge(env, len(n.items))
    for item in n.items:
        ev(item, v, tok, st, env, out)


def _alt(n: Alt, v: Any, tok: Any, st: Any, env: Env, out: list[Out]) -> None:
    for item in n.items[:-1]:
        vals, err = _collect(item, v, tok, st, env)
        good = [o for o in vals if truthy(o[0])]
        if err is not None:
            out.extend(good)
            raise err
        if good:
            out.extend(good)
            return
    ev(n.items[-1], v, tok, st, env, out)


def _and_or(n: And | Or, v: Any, tok: Any, st: Any, env: Env, out: list[Out]) -> None:
    is_and = isinstance(n, And)
    avals, aerr = _collect(n.a, v, tok, st, env)
    for av, _, ast in avals:
        if truthy(av) != is_and:
            out.append((not is_and, None, ast))
            continue
        bvals, berr = _collect(n.b, v, tok, ast, env)  # b runs on the input, a's path kept
        charge(env, len(bvals))
        out.extend([(truthy(bv), None, bst) for bv, _, bst in bvals])
        if berr is not None:
            raise berr
    if aerr is not None:
        raise aerr


def _binop(n: Binop, v: Any, tok: Any, st: Any, env: Env, out: list[Out]) -> None:
    op = n.op
    arith = ops.ARITH.get(op)

    def f(a: Out, b: Out) -> Out:
        if arith is None:
            return (ops.compare(op, a[0], b[0]), None, st)
        r = arith(a[0], b[0])
        rtok = None
        if op == "+":
            rtok = plus_token(a, b)
        elif op == "*" and type(b[0]) is dict and not b[0]:
            rtok = a[1]
        return (r, rtok, st)

    bvals, berr = _values(n.b, v, tok, env)
    if bvals:
        avals, aerr = _values(n.a, v, tok, env)
        for b in bvals:
            charge(env, len(avals))
            for a in avals:
                out.append(f(a, b))
            if aerr is not None:
                raise aerr
    if berr is not None:
        raise berr


def _if(n: If, v: Any, tok: Any, st: Any, env: Env, out: list[Out]) -> None:
    cvals, cerr = _values(n.cond, v, tok, env)
    for c, _, _ in cvals:
        ev(n.then if truthy(c) else n.else_, v, tok, st, env, out)
    if cerr is not None:
        raise cerr


def _bind(n: Bind, v: Any, tok: Any, st: Any, env: Env, out: list[Out]) -> None:
    svals, serr = _values(n.source, v, tok, env)
    for sv, stok, _ in svals:
        env[n.slot] = (sv, stok)
        ev(n.body, v, tok, st, env, out)
    if serr is not None:
        raise serr


def _collect_node(n: Collect, v: Any, tok: Any, st: Any, env: Env, out: list[Out]) -> None:
    items: list[Out] = []
    if n.body is not None:
        ev(n.body, v, tok, st, env, items)  # tracked: its steps check, their paths are dropped
    out.append(([o[0] for o in items], Built([o[1] for o in items]), st))


def _object(n: Object, v: Any, tok: Any, st: Any, env: Env, out: list[Out]) -> None:
    streams: list[tuple[list[Any], JqError | None]] = []
    for k, e in n.entries:
        kvals, kerr = _values(k, v, tok, env)
        streams.append(([o[0] for o in kvals], kerr))
        streams.append(_values(e, v, tok, env))  # (value, token) pairs

    def emit(chosen: list[Any]) -> None:
        obj = {chosen[i]: chosen[i + 1][0] for i in range(0, len(chosen), 2)}
        toks = {chosen[i]: chosen[i + 1][1] for i in range(0, len(chosen), 2)}
        out.append((obj, Built(toks), st))

    def check(j: int, chosen: list[Any]) -> None:
        if j % 2:
            object_key(chosen[j - 1])

    product(streams, env, emit, check)


def _format(n: Format, v: Any, tok: Any, st: Any, env: Env, out: list[Out]) -> None:
    exprs = [p for p in n.parts if isinstance(p, Node)]
    streams = []
    for e in reversed(exprs):
        vals, err = _values(e, v, tok, env)
        streams.append(([o[0] for o in vals], err))

    def emit(chosen: list[Any]) -> None:
        it = iter(reversed(chosen))
        text = "".join(p if isinstance(p, str) else ops.tostring(next(it)) for p in n.parts)
        out.append((text, None, st))

    product(streams, env, emit)


def _try(n: Try, v: Any, tok: Any, st: Any, env: Env, out: list[Out]) -> None:
    with contextlib.suppress(JqError):
        ev(n.body, v, tok, st, env, out)


# ------------------------------------------------------------------------------ builtins


def _call(n: Call, v: Any, tok: Any, st: Any, env: Env, out: list[Out]) -> None:
    name = n.name
    if name == "empty":
        return
    if name in UNARY:
        out.append(unary(name, v, tok, st))
    elif name in BINARY:
        vals, err = _values(n.args[0], v, tok, env)
        for a, _, _ in vals:
            out.append(binary(name, v, tok, st, a))
        if err is not None:
            raise err
    elif name == "select":
        vals, err = _values(n.args[0], v, tok, env)
        out.extend([(v, tok, st) for c, _, _ in vals if truthy(c)])
        if err is not None:
            raise err
    elif name in ("first", "last"):
        vals, err = _collect(n.args[0], v, tok, st, env)
        if name == "first" and vals:
            out.append(vals[0])
            return
        if err is not None:
            raise err
        if vals:
            lv, ltok, _ = vals[-1]
            out.append((lv, ltok, st))  # last(f) is a reduction: libjq restores the path
    else:
        _any_all(n, v, tok, st, env, out)


def _any_all(n: Call, v: Any, tok: Any, st: Any, env: Env, out: list[Out]) -> None:
    """``any(g; c)`` is ``isempty(first(g | c or empty)) | not`` and ``all(g; c)`` is
    ``isempty(first(g | c and empty))`` in libjq: ``g`` and ``c`` are tracked, and the
    deciding output of ``c`` keeps the path ``c`` left."""
    is_any = n.name == "any"
    gen, cond = n.args
    gvals, gerr = _collect(gen, v, tok, st, env)
    for gv, gtok, gst in gvals:
        cvals, cerr = _collect(cond, gv, gtok, gst, env)
        for cv, _, cst in cvals:
            if truthy(cv) == is_any:
                out.append((is_any, None, cst))
                return
        if cerr is not None:
            raise cerr
    if gerr is not None:
        raise gerr
    out.append((not is_any, None, st))


_EVAL: Final[dict[type, Callable[..., None]]] = {
    Identity: _identity,
    Literal: _literal,
    Var: _var,
    Path: _path,
    Pipe: _pipe,
    Comma: _comma,
    Alt: _alt,
    And: _and_or,
    Or: _and_or,
    Binop: _binop,
    If: _if,
    Bind: _bind,
    Collect: _collect_node,
    Object: _object,
    Format: _format,
    Try: _try,
    Call: _call,
}
