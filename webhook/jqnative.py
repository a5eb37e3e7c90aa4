"""Native evaluation of the jq that Karta definitions use, with libjq 1.8's exact results.

libjq runs in a sandbox child (:mod:`webhook.jqexpr`): every call costs a round trip and a
libjq parse of the whole object. This module evaluates a subset of jq directly on the decoded
object instead, identical to libjq (outputs, their order, ``path()`` results and
"Invalid path expression" errors, error messages byte for byte), which
``tests/test_jqnative.py`` checks against the real library: every catalog expression on every
sample in both modes, and generated expressions on generated objects.

API::

    prog = compile(expr)            # None: outside the subset, use libjq
    prog.values(obj)                # [value, ...]        like  [EXPR]
    prog.paths(obj)                 # [(path, value), ...] like [path(EXPR)], values in obj

Both raise :class:`JqError` (a :class:`webhook.jqsyntax.WalkError`: ``iterates_null`` marks
"Cannot iterate over null (null)", which callers treat as absent) where libjq raises,
:class:`LimitError` (also a WalkError) past ``max_outputs`` results or the work ``budget``, and
:class:`NeedsLibjq` where only libjq can give the exact answer; re-run that one expression
there. NeedsLibjq cases: integers beyond 2**53 in arithmetic or comparisons, non-finite
numbers, ``tonumber`` of anything but a plain integer string, ``string * number``,
``string / string``, ``index`` of strings/objects/sub-arrays, values nested more than 200
deep; in paths mode ``any``/``all``/``index``, a trimming ``ltrimstr``/``rtrimstr``, and an
identity check on an element of a constructed array or object.

The subset (grammar in :mod:`webhook.jqnative_parse`): paths (``.a``, ``."a"``, ``.["a"]``,
``[N]``, ``[-N]``, ``[]``, each optionally ``?``), ``|``, ``,``, ``//``, ``and``/``or``,
comparisons, ``+ - * / %``, ``if/elif/else/end``, ``as $x |``, ``$x``, ``[...]``, ``{...}``,
string interpolation, ``?``, literals, and the builtins ``empty not length keys
keys_unsorted to_entries tostring tonumber type ascii_downcase ascii_upcase min max add
values first last first(f) last(f) select map any all (0-2 args) ltrimstr rtrimstr
startswith endswith split/1 has index``. Evaluation is bounded: no construct loops, the AST
depth is capped at parse time, and iterations/products draw on a work budget.

Survey (catalog/*.yaml: 248 distinct expressions, 164 plain paths; /work/upstream-karta, the
upstream definitions: 334 distinct, 242 plain). Non-plain forms, by number of distinct
expressions using them (catalog / upstream)::

    //  66/66   and  36/27   comparisons 44/40   as $x  10/4   select  9/9   if  26/0
    arithmetic (* -) 27/10   [...]  16/5    length 6/2   .[]? 1/2   to_entries 1/4
    min/max 7/0   add 4/1   any 1/4 all 0/4   map 0/1   tostring/tonumber 3/0
    ltrimstr 1/0   string interpolation 1/2   {...} 1/1   empty 14/0   not 0/2  type 0/1
    index 0/10   split 0/1   ascii_downcase 0/1   keys 0/0

plus the status code's wrapping of every ``byExpression`` as ``(EXPR\\n) | tostring``. All of
them are in the subset except six upstream expressions that are not valid jq (``spec.x``
without the leading dot: libjq reports the compile error).
"""

from __future__ import annotations

from typing import Any, Final

from webhook.jqnative_ops import JqError, LimitError, NeedsLibjq, export
from webhook.jqnative_parse import Parsed, parse
from webhook.jqnative_paths import run_paths
from webhook.jqnative_stream import Compiled
from webhook.jqnative_values import compile_node

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


class Program:
    """A compiled expression; thread-safe (evaluation state lives in each call)."""

    __slots__ = ("_compiled", "_parsed", "expr")

    def __init__(self, expr: str, parsed: Parsed) -> None:
        self.expr = expr
        self._parsed = parsed
        self._compiled: Compiled = compile_node(parsed.node)

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
