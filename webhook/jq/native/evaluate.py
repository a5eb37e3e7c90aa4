"""Native evaluation of the jq that Karta definitions use, with libjq 1.8's exact results.

libjq runs in a sandbox child (:mod:`webhook.jq.engine`): every call costs a round trip and a
libjq parse of the whole object. This module evaluates a subset of jq directly on the decoded
object instead, identical to libjq (outputs, their order, ``path()`` results and
"Invalid path expression" errors, error messages byte for byte), which
``tests/jq/test_jqnative.py`` checks against the real library: every catalog expression on every
sample in both modes, and generated expressions on generated objects.

API::

    prog = compile(expr)            # None: outside the subset, use libjq
    prog.values(obj)                # [value, ...]        like  [EXPR]
    prog.paths(obj)                 # [(path, value), ...] like [path(EXPR)], values in obj

Both raise :class:`JqError` (a :class:`webhook.jq.paths.WalkError`: ``iterates_null`` marks
"Cannot iterate over null (null)", which callers treat as absent) where libjq raises,
:class:`LimitError` (also a WalkError) past ``max_outputs`` results or the work ``budget``, and
:class:`NeedsLibjq` where only libjq can give the exact answer; re-run that one expression
there. NeedsLibjq cases: integers beyond 2**53 in arithmetic or comparisons, non-finite
numbers, ``tonumber`` of anything but a plain integer string, ``string * number``,
``string / string``, ``index`` of strings/objects/sub-arrays (or null with a non-key), values
nested more than 200 deep; in paths mode ``index``, a trimming ``ltrimstr``/``rtrimstr``, and
an identity check on an element of a built value whose origin is unknown (e.g. of ``keys``).

The subset (grammar in :mod:`webhook.jq.native.parse`): paths (``.a``, ``."a"``, ``.["a"]``,
``[N]``, ``[-N]``, ``[]``, each optionally ``?``), ``|``, ``,``, ``//``, ``and``/``or``,
comparisons, ``+ - * / %``, ``if/elif/else/end``, ``as $x |``, ``$x``, ``[...]``, ``{...}``,
string interpolation, ``?``, literals, and the builtins ``empty not length keys
keys_unsorted to_entries tostring tonumber type ascii_downcase ascii_upcase min max add
values first last first(f) last(f) select map any all (0-2 args) ltrimstr rtrimstr
startswith endswith split/1 has index``. Evaluation is bounded: no construct loops, the AST
depth is capped at parse time, and iterations/products draw on a work budget.

Survey (``python hack/jq_survey.py DIR``; counts are of distinct non-plain expressions using
a form). Bundled catalog: 248 expressions, 164 plain paths, 84 others; upstream definitions
(a folder of them, ``KARTA_UPSTREAM_DIR``): 334 expressions, 242 plain, 92 others::

    form                      catalog upstream    form                 catalog upstream
    .key steps                     83      77     select                    10      15
    literals                       81      59     as $x | (bind)             8      14
    // alternatives                77      54     , (comma)                  7       0
    comparisons                    54      31     min / max                5/3     0/0
    | (pipe)                       52      31     add                        4       1
    and / or                     28/3    20/3     {...}                      4       2
    if/elif/else/end               24       0     tostring / tonumber      3/3     0/0
    [] iteration / []?           24/1   30/13     any / all                1/0     4/4
    [...] collect (map too)        20      17     ltrimstr                   1       0
    empty                          16       0     string interpolation       1       2
    arithmetic (+ - * / %)         14       8     to_entries                 1       3
    length                         11       2     not / index          0/0    13/12
    [N] index                       0       4     split, type, map, ascii_downcase: 0/1

plus the status code's wrapping of each ``byExpression`` as ``(EXPR\n) | tostring``. Every
catalog expression is in the subset; of the upstream ones only 14 are not, and those are not
jq at all (``spec.templates[].metadata``, a path without its leading dot: a libjq compile
error). In the differential test no catalog or upstream expression needs libjq on any sample.

libjq 1.8 facts worth knowing (all checked by the tests): errors on the left of ``//`` are
*not* suppressed (``(5 | .a) // 7`` fails), ``as`` takes everything up to ``,`` as its source
(``1 + .a as $x | $x`` binds ``1 + .a``), the right operand of a binary operator is evaluated
first and is the outer loop (``[(1,2) + (10,20)]`` is ``[11,12,21,22]``), ``path(last)`` is
``[-1]``, ``path(.a and .b)`` fails, ``path(any)`` tracks the deciding element, ``ltrimstr``
of a non-string is an error, and constant object keys that are not strings are compile errors.
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
        #: Plain paths take jqsyntax's walk in paths mode (same results, about twice as fast);
        #: it recurses once per step, so only short ones.
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
