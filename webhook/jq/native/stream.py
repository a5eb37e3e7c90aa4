"""Streams of the native evaluator, shared by both modes (:mod:`webhook.jq.native.values`,
:mod:`webhook.jq.native.paths`): compiled closures, the work budget, products of streams and
libjq's messages for indexing."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from webhook.jq.native import ops
from webhook.jq.native.ops import JqError, LimitError

__all__ = [
    "Compiled", "Env", "charge", "collect", "index_error", "iterate_error", "key_error",
    "object_key", "product",
]  # fmt: skip

Env = list[Any]
Fn = Callable[[Any, Env, list[Any]], None]
One = Callable[[Any, Env], Any]


class Compiled:
    """A compiled expression: ``fn`` always, ``one`` when it has exactly one output."""

    __slots__ = ("fn", "one")

    def __init__(self, fn: Fn | None = None, one: One | None = None) -> None:
        if fn is None:
            assert one is not None
            o = one

            def fn(x: Any, env: Env, out: list[Any]) -> None:
                out.append(o(x, env))

        self.fn: Fn = fn
        self.one: One | None = one


def charge(env: Env, n: int) -> None:
    env[0] -= n
    if env[0] < 0:
        raise LimitError("evaluation exceeded its work budget")


def collect(c: Compiled, x: Any, env: Env) -> tuple[list[Any], JqError | None]:
    """The outputs of ``c`` on ``x`` and the error that ended them, if any."""
    tmp: list[Any] = []
    try:
        c.fn(x, env, tmp)
    except JqError as e:
        return tmp, e
    return tmp, None


def key_error(v: Any, key: str) -> JqError:
    return JqError(f"Cannot index {ops.kind(v)} with string ({ops.trunc(ops.dump(key))})")


def index_error(v: Any, key: int) -> JqError:
    return JqError(f"Cannot index {ops.kind(v)} with number ({key})")


def iterate_error(v: Any) -> JqError:
    return JqError(f"Cannot iterate over {ops.desc(v)}")


def object_key(k: Any) -> str:
    if type(k) is not str:
        raise JqError(f"Cannot use {ops.desc(k)} as object key")
    return k


def product(
    streams: Sequence[tuple[list[Any], JqError | None]],
    env: Env,
    emit: Callable[[list[Any]], None],
    check: Callable[[int, list[Any]], None] | None = None,
) -> None:
    """Every combination of one value per stream, the first stream outermost; a stream's
    error is raised once its values are exhausted (as libjq's nested backtracking does).
    ``check(j, chosen)`` runs when stream ``j`` has chosen its value."""
    chosen: list[Any] = [None] * len(streams)

    def rec(j: int) -> None:
        if j == len(streams):
            charge(env, 1)
            emit(chosen)
            return
        vals, err = streams[j]
        for v in vals:
            chosen[j] = v
            if check is not None:
                check(j, chosen)
            rec(j + 1)
        if err is not None:
            raise err

    rec(0)
