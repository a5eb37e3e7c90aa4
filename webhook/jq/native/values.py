"""Values mode of the native evaluator: an AST compiled once into Python closures.

Streams are evaluated eagerly: a closure ``fn(x, env, out)`` appends every output of its
expression for input ``x`` to ``out`` and raises :class:`~webhook.jq.native.ops.JqError` where
libjq's stream would end in an error (outputs before the error stay in ``out``). That is the
same stream libjq produces lazily, in the same order, with the same first error: there are no
side effects, and constructs that stop early (``first(f)``, ``any``) just ignore what follows.
Expressions that always give exactly one output (paths without ``[]``, ``//`` of such, literals,
comparisons, arithmetic, ``[...]``, most builtins) also get a direct ``one(x, env) -> value``
closure, which is the fast path of typical definitions.

``env[0]`` is the remaining work budget (outputs produced by iterations, ``,`` and products);
the other slots hold variables.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any, Final

from webhook.jq.native import ops
from webhook.jq.native.ast import (
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
from webhook.jq.native.functions import compile_call
from webhook.jq.native.ops import JqError, truthy
from webhook.jq.native.stream import (
    Compiled,
    Env,
    One,
    charge,
    collect,
    object_key,
    product,
)
from webhook.jq.native.values_steps import compile_path

__all__ = ["compile_node"]


def compile_node(n: Node) -> Compiled:
    return _COMPILERS[type(n)](n)


# ------------------------------------------------------------------------------ paths


def _path(n: Path) -> Compiled:
    return compile_path(n, compile_node)


def _identity(n: Identity) -> Compiled:
    return Compiled(one=lambda x, env: x)


def _literal(n: Literal) -> Compiled:
    value = n.value
    return Compiled(one=lambda x, env: value)


def _var(n: Var) -> Compiled:
    slot = n.slot
    return Compiled(one=lambda x, env: env[slot])


def _pipe(n: Pipe) -> Compiled:
    stages = [compile_node(s) for s in n.stages]
    ones = [s.one for s in stages]
    if all(o is not None for o in ones):
        fs: tuple[One, ...] = tuple(o for o in ones if o is not None)

        def one(x: Any, env: Env) -> Any:
            for f in fs:
                x = f(x, env)
            return x

        return Compiled(one=one)
    head = tuple(s.fn for s in stages[:-1])
    last = stages[-1].fn

    def fn(x: Any, env: Env, out: list[Any]) -> None:
        cur = [x]
        err: JqError | None = None
        for f in head:
            nxt: list[Any] = []
            try:
                for v in cur:
                    f(v, env, nxt)
            except JqError as e:
                err = e  # raised by an earlier input than any pending error: it comes first
            cur = nxt
        for v in cur:
            last(v, env, out)
        if err is not None:
            raise err

    return Compiled(fn)


def _comma(n: Comma) -> Compiled:
    fns = tuple(compile_node(i).fn for i in n.items)
    count = len(fns)

    def fn(x: Any, env: Env, out: list[Any]) -> None:
        charge(env, count)
        for f in fns:
            f(x, env, out)

    return Compiled(fn)


def _alt(n: Alt) -> Compiled:
    items = [compile_node(i) for i in n.items]
    if all(i.one is not None for i in items):
        ones: tuple[One, ...] = tuple(i.one for i in items if i.one is not None)
        *firsts, final = ones

        def one(x: Any, env: Env) -> Any:
            for f in firsts:
                v = f(x, env)
                if v is not None and v is not False:
                    return v
            return final(x, env)

        return Compiled(one=one)
    heads, last = items[:-1], items[-1].fn

    def fn(x: Any, env: Env, out: list[Any]) -> None:
        for c in heads:
            vals, err = collect(c, x, env)
            good = [v for v in vals if v is not None and v is not False]
            if err is not None:
                out.extend(good)
                raise err
            if good:
                out.extend(good)
                return
        last(x, env, out)

    return Compiled(fn)


def _and_or(n: And | Or) -> Compiled:
    a, b = compile_node(n.a), compile_node(n.b)
    is_and = isinstance(n, And)
    if a.one is not None and b.one is not None:
        a1, b1 = a.one, b.one
        if is_and:
            return Compiled(one=lambda x, env: truthy(a1(x, env)) and truthy(b1(x, env)))
        return Compiled(one=lambda x, env: truthy(a1(x, env)) or truthy(b1(x, env)))

    def fn(x: Any, env: Env, out: list[Any]) -> None:
        avals, aerr = collect(a, x, env)
        bres: tuple[list[Any], JqError | None] | None = None
        for av in avals:
            if truthy(av) != is_and:
                out.append(not is_and)
                continue
            if bres is None:
                bres = collect(b, x, env)
            charge(env, len(bres[0]))
            out.extend([truthy(bv) for bv in bres[0]])
            if bres[1] is not None:
                raise bres[1]
        if aerr is not None:
            raise aerr

    return Compiled(fn)


def _binop(n: Binop) -> Compiled:
    op = n.op
    f: Callable[[Any, Any], Any]
    if op in ops.COMPARISONS:
        if op == "==":
            f = ops.equal
        elif op == "!=":
            f = lambda a, b: not ops.equal(a, b)  # noqa: E731
        else:
            f = lambda a, b: ops.compare(op, a, b)  # noqa: E731
    else:
        f = ops.ARITH[op]
    a, b = compile_node(n.a), compile_node(n.b)
    if a.one is not None and b.one is not None:
        a1, b1 = a.one, b.one

        def one(x: Any, env: Env) -> Any:
            vb = b1(x, env)  # libjq evaluates the right operand first
            return f(a1(x, env), vb)

        return Compiled(one=one)

    def fn(x: Any, env: Env, out: list[Any]) -> None:
        bvals, berr = collect(b, x, env)
        if bvals:
            avals, aerr = collect(a, x, env)
            for vb in bvals:  # the right operand is the outer loop
                charge(env, len(avals))
                for va in avals:
                    out.append(f(va, vb))
                if aerr is not None:
                    raise aerr
        if berr is not None:
            raise berr

    return Compiled(fn)


def _if(n: If) -> Compiled:
    cond, then, other = compile_node(n.cond), compile_node(n.then), compile_node(n.else_)
    if cond.one is not None and then.one is not None and other.one is not None:
        c1, t1, o1 = cond.one, then.one, other.one
        return Compiled(one=lambda x, env: t1(x, env) if truthy(c1(x, env)) else o1(x, env))

    def fn(x: Any, env: Env, out: list[Any]) -> None:
        cvals, cerr = collect(cond, x, env)
        for c in cvals:
            (then if truthy(c) else other).fn(x, env, out)
        if cerr is not None:
            raise cerr

    return Compiled(fn)


def _bind(n: Bind) -> Compiled:
    source, body, slot = compile_node(n.source), compile_node(n.body), n.slot
    if source.one is not None and body.one is not None:
        s1, b1 = source.one, body.one

        def one(x: Any, env: Env) -> Any:
            env[slot] = s1(x, env)
            return b1(x, env)

        return Compiled(one=one)

    def fn(x: Any, env: Env, out: list[Any]) -> None:
        svals, serr = collect(source, x, env)
        for s in svals:
            env[slot] = s
            body.fn(x, env, out)
        if serr is not None:
            raise serr

    return Compiled(fn)


def _collect(n: Collect) -> Compiled:
    if n.body is None:
        return Compiled(one=lambda x, env: [])
    body = compile_node(n.body)
    if body.one is not None:
        b1 = body.one
        return Compiled(one=lambda x, env: [b1(x, env)])
    bfn = body.fn

    def one(x: Any, env: Env) -> Any:
        tmp: list[Any] = []
        bfn(x, env, tmp)
        return tmp

    return Compiled(one=one)


def _object(n: Object) -> Compiled:
    entries = [(compile_node(k), compile_node(v)) for k, v in n.entries]
    if all(k.one is not None and v.one is not None for k, v in entries):
        pairs: tuple[tuple[One, One], ...] = tuple(
            (k.one, v.one) for k, v in entries if k.one is not None and v.one is not None
        )

        def one(x: Any, env: Env) -> Any:
            o: dict[str, Any] = {}
            for k1, v1 in pairs:
                k = k1(x, env)
                v = v1(x, env)  # libjq inserts after evaluating both: value errors come first
                o[object_key(k)] = v
            return o

        return Compiled(one=one)

    def fn(x: Any, env: Env, out: list[Any]) -> None:
        streams: list[tuple[list[Any], JqError | None]] = []
        for k, v in entries:
            streams += [collect(k, x, env), collect(v, x, env)]

        def emit(chosen: list[Any]) -> None:
            out.append({chosen[i]: chosen[i + 1] for i in range(0, len(chosen), 2)})

        def check(j: int, chosen: list[Any]) -> None:
            if j % 2:  # an entry is inserted (its key checked) before the next is evaluated
                object_key(chosen[j - 1])

        product(streams, env, emit, check)

    return Compiled(fn)


def _format(n: Format) -> Compiled:
    parts = [p if isinstance(p, str) else compile_node(p) for p in n.parts]
    exprs = [p for p in parts if isinstance(p, Compiled)]
    if all(e.one is not None for e in exprs):
        plan: list[str | One] = []
        for p in parts:
            if isinstance(p, str):
                plan.append(p)
            elif p.one is not None:
                plan.append(p.one)

        def one(x: Any, env: Env) -> Any:
            vals: list[str] = [""] * len(plan)
            for i in range(len(plan) - 1, -1, -1):  # the last interpolation is evaluated first
                p = plan[i]
                vals[i] = p if isinstance(p, str) else ops.tostring(p(x, env))
            return "".join(vals)

        return Compiled(one=one)

    def fn(x: Any, env: Env, out: list[Any]) -> None:
        streams = [collect(e, x, env) for e in reversed(exprs)]

        def emit(chosen: list[Any]) -> None:
            it = iter(reversed(chosen))
            out.append("".join(p if isinstance(p, str) else ops.tostring(next(it)) for p in parts))

        product(streams, env, emit)

    return Compiled(fn)


def _try(n: Try) -> Compiled:
    body = compile_node(n.body).fn

    def fn(x: Any, env: Env, out: list[Any]) -> None:
        with contextlib.suppress(JqError):
            body(x, env, out)

    return Compiled(fn)


def _call(n: Call) -> Compiled:
    return compile_call(n, compile_node)


_COMPILERS: Final[dict[type, Callable[[Any], Compiled]]] = {
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
    Collect: _collect,
    Object: _object,
    Format: _format,
    Try: _try,
    Call: _call,
}
