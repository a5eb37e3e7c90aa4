"""Native evaluation of the jq that Karta definitions use, with libjq 1.8's exact results.

libjq runs in a sandbox child (:mod:`webhook.jq.engine`): every call costs a round trip and a
libjq parse of the whole object. This module evaluates a subset of jq on the decoded object
instead. Outputs, their order, ``path()`` results and error messages are libjq's, byte for
byte, as ``tests/jq/test_jqnative.py`` checks against the real library. API::

    prog = compile(expr)            # None: outside the subset, use libjq
    prog.values(obj)                # [value, ...]        like  [EXPR]
    prog.paths(obj)                 # [(path, value), ...] like [path(EXPR)], values in obj

Both may raise:

* :class:`JqError` (a :class:`webhook.jq.paths.WalkError`) where libjq raises;
  ``iterates_null`` marks "Cannot iterate over null (null)", which callers treat as absent;
* :class:`LimitError` (also a WalkError) past ``max_outputs`` results or the work ``budget``;
* :class:`NeedsLibjq` where only libjq gives the exact answer: run that one expression there.

The subset's grammar is :mod:`webhook.jq.native.parse`'s. Evaluation is bounded: no construct
loops, the AST depth is capped at parse time, and iterations and products draw on a budget.
docs/architecture.md ("The native jq evaluator") lists the builtins, the cases that need
libjq and the libjq 1.8 facts followed; see docs/performance.md for what it covers and costs.
"""

from __future__ import annotations

from typing import Any, Final

from webhook.jq import paths as jqpath
from webhook.jq.native.ops import JqError, LimitError, NeedsLibjq, export
from webhook.jq.native.parse import Parsed, parse
from webhook.jq.native.paths import run_paths
from webhook.jq.native.stream import Compiled
from webhook.jq.native.values import compile_node

__all__ = [
    "DEFAULT_BUDGET",
    "DEFAULT_MAX_DEPTH",
    "JqError",
    "LimitError",
    "NeedsLibjq",
    "Program",
    "compile",
]

#: Nesting (brackets, ``if``, interpolations, operators) deeper than this is refused.
DEFAULT_MAX_DEPTH: Final = 64
#: Values produced by iterations, ``,`` and products in one evaluation.
DEFAULT_BUDGET: Final = 200_000
#: Results per evaluation (jqexpr.MAX_RESULTS).
DEFAULT_MAX_OUTPUTS: Final = 1000

PathToken = str | int
_WALK_STEPS: Final = 64


class Program:
    """A compiled expression; thread-safe (evaluation state lives in each call)."""

    __slots__ = ("_compiled", "_parsed", "_plain", "expr")

    def __init__(self, expr: str, parsed: Parsed) -> None:
        self.expr = expr
        self._parsed = parsed
        self._compiled: Compiled = compile_node(parsed.node)
        #: Plain paths of up to ``_WALK_STEPS`` steps take :func:`webhook.jq.paths.walk` in
        #: paths mode: the same results, faster (see docs/performance.md).
        plain = jqpath.parse_plain(expr)
        self._plain = plain if plain is not None and len(plain) <= _WALK_STEPS else None

    def _env(self, budget: int) -> list[Any]:
        env: list[Any] = [None] * (self._parsed.nslots)
        env[0] = budget
        return env

    def values(
        self, obj: Any, *, max_outputs: int = DEFAULT_MAX_OUTPUTS, budget: int = DEFAULT_BUDGET
    ) -> list[Any]:
        """The outputs of the expression on ``obj`` as the ``jq`` binding returns them
        (integral numbers as ``int``). Unchanged parts of ``obj`` are returned as they are,
        not copied: do not modify them."""
        env = self._env(budget)
        one = self._compiled.one
        if one is not None:
            return [export(one(obj, env))]
        out: list[Any] = []
        err: JqError | None = None
        try:
            self._compiled.fn(obj, env, out)
        except JqError as e:
            err = e
        _check(len(out), max_outputs)
        if err is not None:
            raise err
        return [export(v) for v in out]

    def paths(
        self, obj: Any, *, max_outputs: int = DEFAULT_MAX_OUTPUTS, budget: int = DEFAULT_BUDGET
    ) -> list[tuple[tuple[PathToken, ...], Any]]:
        """``path(EXPR)`` on ``obj``: each location and the value there (the object inside
        ``obj``, not a copy; None where nothing is)."""
        if self._plain is not None:
            try:
                walked = jqpath.walk(self._plain, obj)
            except jqpath.WalkError as e:
                raise JqError(str(e)) from None
            _check(len(walked), max_outputs)
            return walked
        pairs, err = run_paths(self._parsed.node, obj, self._env(budget))
        _check(len(pairs), max_outputs)
        if err is not None:
            raise err
        return pairs


def _check(n: int, max_outputs: int) -> None:
    if n > max_outputs:
        raise LimitError(f"more than {max_outputs} results")


def compile(expr: str, *, max_depth: int = DEFAULT_MAX_DEPTH) -> Program | None:
    """The native program of ``expr``, or None when it is outside the subset (use libjq).
    Never raises on any text."""
    parsed = parse(expr, max_depth=max_depth)
    return Program(expr, parsed) if parsed is not None else None
