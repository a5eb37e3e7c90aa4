"""Values mode's paths (:mod:`webhook.jq.native.values`): the steps ``.a``, ``.[0]``, ``.[]``
and their ``?``, compiled into closures; a path of keys and indices alone into a ``one``
closure, the fast path of typical definitions.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from webhook.jq.native.ast import ITER, KEY, Node, Path
from webhook.jq.native.ops import JqError
from webhook.jq.native.stream import (
    Compiled,
    Env,
    charge,
    collect,
    index_error,
    iterate_error,
    key_error,
)

__all__ = ["compile_path"]


def _step_one(kind: int, key: Any) -> Callable[[Any], Any]:
    if kind == KEY:

        def get(v: Any) -> Any:
            if type(v) is dict:
                return v.get(key)
            if v is None:
                return None
            raise key_error(v, key)

        return get

    def nth(v: Any) -> Any:
        if type(v) is list:
            k = key if key >= 0 else key + len(v)
            return v[k] if 0 <= k < len(v) else None
        if v is None:
            return None
        raise index_error(v, key)

    return nth


def compile_path(n: Path, compile_node: Callable[[Node], Compiled]) -> Compiled:
    """Values mode of a path (``.a.b``, ``.[0]``, ``.[]``, ``?``); ``compile_node`` compiles its
    base."""
    base = compile_node(n.base) if n.base is not None else None
    simple = all(s.kind != ITER and not s.opt for s in n.steps)
    if simple and (base is None or base.one is not None):
        bone = base.one if base is not None else None
        if all(s.kind == KEY for s in n.steps):
            names = tuple(s.key for s in n.steps)

            def one(x: Any, env: Env) -> Any:
                v = bone(x, env) if bone is not None else x
                for k in names:
                    if type(v) is dict:
                        v = v.get(k)
                    elif v is not None:
                        raise key_error(v, k)  # type: ignore[arg-type]
                return v

            return Compiled(one=one)
        getters = tuple(_step_one(s.kind, s.key) for s in n.steps)

        def one_mixed(x: Any, env: Env) -> Any:
            v = bone(x, env) if bone is not None else x
            for g in getters:
                v = g(v)
            return v

        return Compiled(one=one_mixed)

    steps = tuple((s.kind, s.key, s.opt, _step_one(s.kind, s.key)) for s in n.steps)

    def fn(x: Any, env: Env, out: list[Any]) -> None:
        err: JqError | None = None
        if base is None:
            cur = [x]
        else:
            cur, err = collect(base, x, env)
        for kind, _key, opt, get in steps:
            nxt: list[Any] = []
            try:
                for v in cur:
                    if kind == ITER:
                        t = type(v)
                        if t is list:
                            charge(env, len(v))
                            nxt.extend(v)
                        elif t is dict:
                            charge(env, len(v))
                            nxt.extend(v.values())
                        elif not opt:
                            raise iterate_error(v)
                    elif opt:
                        with contextlib.suppress(JqError):
                            nxt.append(get(v))
                    else:
                        nxt.append(get(v))
            except JqError as e:
                err = e
            cur = nxt
        out.extend(cur)
        if err is not None:
            raise err

    return Compiled(fn)


# ------------------------------------------------------------------------------ structure
