"""The jq engine: evaluates a definition's expressions on an object, natively or in the sandbox.

Definitions are untrusted and libjq cannot be bounded from the calling thread, so expressions
are split three ways:

* **Plain paths** (``.a.b``, ``.a[]``, ``.a[0]``, ``.["k"]`` and pipes of them — nearly every
  path a definition writes through) are walked by :mod:`webhook.jq.paths`: microseconds,
  bounded by the object's size, exactly libjq's answers.
* **The subset real definitions use** beyond that (``//``, ``select``, ``to_entries``,
  comparisons, arithmetic, ``if``, … see :mod:`webhook.jq.native.evaluate`) is evaluated natively too,
  identical to libjq and bounded by a work budget — every bundled catalog expression.
* **Everything else** (and what the native evaluator hands back: numbers past 2**53, a spent
  work budget) runs in libjq inside the :class:`~webhook.jq.sandbox.Sandbox` an :class:`Engine`
  owns, all of one object's remaining expressions in one round trip.

Results are :class:`Outcome` values; iterating over an absent (null) list or map — a RayCluster
without ``workerGroupSpecs`` meeting ``.spec.workerGroupSpecs[].template`` — is reported as
``absent``, which callers treat as "nothing here", not as a failure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from webhook.base.limits import (
    COMPILE_TIMEOUT,
    EVAL_TIMEOUT,
    MAX_EXPRESSION_BYTES,
    MAX_RESULTS,
    PLAIN_CACHE_BYTES,
)
from webhook.base.memo import Memo
from webhook.base.pointers import PathToken, getpath
from webhook.base.waits import may_wait
from webhook.jq import paths as jqpath
from webhook.jq.native import evaluate as jqnative
from webhook.jq.native.evaluate import JqError, LimitError, NeedsLibjq, Program
from webhook.jq.paths import GStep, Step
from webhook.jq.sandbox import Reply, Sandbox

Mode = Literal["paths", "values", "compile"]

ITERATE_NULL = "Cannot iterate over null"

__all__ = [
    "Engine",
    "Mode",
    "Outcome",
    "Prepared",
    "plain",
    "prepare",
]


@dataclass(slots=True)
class Outcome:
    """What one expression gave on one object (not to be changed once made; not frozen only
    because one is made per expression per request, and frozen dataclasses are slow to build).

    ``items`` are values (mode ``values``) or ``(path, value)`` pairs (mode ``paths``).
    ``absent`` is set when evaluation stopped on iterating over null: there is nothing there.
    ``error`` is any other failure (not a path expression, wrong type, timeout, compile error).
    """

    items: list[Any] = field(default_factory=list)
    error: str | None = None
    absent: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None


#: A plain path as evaluated: its steps (guards too: :func:`~webhook.jq.paths.parse_guarded`),
#: the names when every step is an object key (most write paths: followed in a loop), the runs
#: of keys between iterations when it has no index (walked level by level), its constant tail
#: (``P // empty | "name"``: values only) and whether it is a plain path (no guard, no
#: constant: what :func:`plain` gives); boxed, so that "not plain" (None) is kept too.
_Plain = (
    tuple[
        tuple[GStep, ...],
        tuple[str, ...] | None,
        tuple[jqpath.Run, ...] | None,
        str | None,
        bool,
    ]
    | None
)
_plain_cache: Memo[str, tuple[_Plain]] = Memo(PLAIN_CACHE_BYTES, MAX_EXPRESSION_BYTES // 16)


#: Plain paths longer than this go to the native evaluator (the walk recurses once per step).
_PLAIN_STEPS = 64


def _plain(expr: str) -> _Plain:
    box = _plain_cache.get(expr)
    if box is None:
        found = jqpath.parse_guarded(expr)
        if found is None or len(found[0]) > _PLAIN_STEPS:
            box = (None,)
        else:
            steps, const = found
            names = tuple(s.name for s in steps if isinstance(s, jqpath.Key))
            chain = names if len(names) == len(steps) and const is None else None
            segs = jqpath.segments(steps) if chain is None else None
            is_plain = const is None and not any(isinstance(s, jqpath.Guard) for s in steps)
            box = ((steps, chain, segs, const, is_plain),)
        _plain_cache.put(expr, box)
    return box[0]


def plain(expr: str) -> tuple[Step, ...] | None:
    """The parsed steps of a plain path expression (:func:`~webhook.jq.paths.parse_plain`:
    no guard, no constant), or None (memoised: definitions repeat)."""
    found = _plain(expr)
    if found is None or not found[4]:
        return None
    return found[0]  # type: ignore[return-value]  # no Guard in a plain path


_native_cache: Memo[str, tuple[Program | None]] = Memo(PLAIN_CACHE_BYTES, MAX_EXPRESSION_BYTES)


def native(expr: str) -> Program | None:
    """The native program of an expression outside the plain paths, or None when only libjq
    can evaluate it (memoised)."""
    box = _native_cache.get(expr)
    if box is None:
        box = (jqnative.compile(expr),)
        _native_cache.put(expr, box)
    return box[0]


def _native(
    steps: tuple[GStep, ...],
    chain: tuple[str, ...] | None,
    segs: tuple[jqpath.Run, ...] | None,
    const: str | None,
    is_plain: bool,
    mode: Mode,
    obj: Any,
) -> Outcome:
    if chain is not None:  # one location: follow the keys (errors: the walk says them)
        cur = obj
        for name in chain:
            if type(cur) is dict:
                cur = cur.get(name)
            elif cur is not None:
                break
        else:
            return Outcome([cur] if mode == "values" else [(chain, cur)])
    pairs = jqpath.walk_objects(segs, obj) if segs is not None else None
    if pairs is None:  # an index, or something the level walk leaves to the walk
        try:
            pairs = jqpath.walk(steps, obj)
        except jqpath.WalkError as e:
            return Outcome([], None if e.iterates_null else str(e), e.iterates_null)
    if len(pairs) > MAX_RESULTS:
        return Outcome([], f"more than {MAX_RESULTS} results")
    if const is not None:  # values only (see prepare)
        return Outcome([const] * len(pairs))
    if mode == "values":
        return Outcome([v for _, v in pairs])
    return Outcome(pairs)  # a list of its own; the walks' paths are tuples already


def _positive(obj: Any, path: tuple[PathToken, ...]) -> tuple[PathToken, ...]:
    """``path`` with negative list indices (libjq's ``path(last)`` is ``[-1]``) counted from the
    end as JSON Pointer needs them."""
    if not any(isinstance(t, int) and t < 0 for t in path):
        return path
    out: list[PathToken] = []
    cur = obj
    for t in path:
        if isinstance(t, int) and t < 0 and isinstance(cur, list):
            t += len(cur)
        out.append(t)
        cur = getpath(cur, (t,))
    return tuple(out)


def _run_native(prog: Program, mode: Mode, obj: Any) -> Outcome | None:
    """The outcome of a native program, or None when libjq must answer instead."""
    try:
        if mode == "values":
            return Outcome(prog.values(obj, max_outputs=MAX_RESULTS))
        pairs = prog.paths(obj, max_outputs=MAX_RESULTS)
    except NeedsLibjq:
        return None
    except LimitError as e:
        # A spent work budget is the evaluator's limit, not the expression's fault: libjq
        # (bounded by its deadline) decides. Too many results is the expression's.
        return None if "budget" in str(e) else Outcome([], str(e))
    except JqError as e:
        return Outcome([], None if e.iterates_null else str(e), e.iterates_null)
    return Outcome([(_positive(obj, p), v) for p, v in pairs])


def _from_remote(res: Reply, mode: Mode, obj: Any) -> Outcome:
    err = res.get("error")
    items = res.get("out") or []
    if err is not None:
        absent = isinstance(err, str) and err.startswith(ITERATE_NULL)
        return Outcome([], None if absent else str(err), absent)
    if mode == "paths":
        located = [_positive(obj, tuple(p)) for p in items]
        return Outcome([(p, getpath(obj, p)) for p in located])
    return Outcome(list(items))


#: the common part of a batch's paths and each one's last run of keys (:attr:`Prepared.shared`)
_Shared = tuple[tuple[jqpath.Run, ...], tuple[tuple[jqpath.Run, bool], ...]]


@dataclass(frozen=True)
class Prepared:
    """A batch of ``(expression, mode)`` requests with each expression's evaluator looked up:
    its plain path, else its native program, else neither (libjq in the sandbox)."""

    requests: tuple[tuple[str, Mode], ...]
    forms: tuple[tuple[_Plain, Program | None, Mode], ...]
    #: when every request is a plain path of keys and iterations (guards too), and all
    #: iterate the same places (the template and id paths of ``(.spec.replicatedJobs //
    #: empty)[]``; one path alone; paths that do not iterate): that common part (the paths'
    #: :func:`~webhook.jq.paths.segments` but the last) and each path's last run of keys, for
    #: :func:`~webhook.jq.paths.walk_shared`
    shared: _Shared | None = None
    #: the place and text of each request with a constant tail (``P // empty | "name"``), whose
    #: values :func:`walked` replaces by the text
    consts: tuple[tuple[int, str], ...] = ()


def prepare(batch: Sequence[tuple[str, Mode]]) -> Prepared:
    """The batch ready to :meth:`Engine.evaluate` on any number of objects."""
    forms: list[tuple[_Plain, Program | None, Mode]] = []
    consts: list[tuple[int, str]] = []
    for i, (expr, mode) in enumerate(batch):
        if mode == "compile":
            forms.append((None, None, mode))
            continue
        found = _plain(expr)
        if found is not None and (text := found[3]) is not None:
            if mode == "paths":  # ``path("name")`` is an error: the evaluator says which
                found = None
            else:
                consts.append((i, text))
        forms.append((found, native(expr) if found is None else None, mode))
    return Prepared(tuple(batch), tuple(forms), _shared(forms), tuple(consts))


def _shared(forms: list[tuple[_Plain, Program | None, Mode]]) -> _Shared | None:
    """:attr:`Prepared.shared` of a batch of these forms."""
    segs: list[tuple[jqpath.Run, ...]] = []
    for found, _, mode in forms:
        if found is None or mode == "compile":
            return None
        _, chain, runs, _, _ = found
        if runs is None:  # keys only (a chain): one run, no iteration
            if chain is None:
                return None
            runs = (chain,)
        segs.append(runs)
    if not segs:
        return None
    prefix = segs[0][:-1]
    if any(s[:-1] != prefix for s in segs):
        return None
    return prefix, tuple((s[-1], f[2] == "paths") for s, f in zip(segs, forms, strict=True))


def walked(prepared: Prepared, obj: Any) -> list[list[Any]] | None:
    """Every expression's items (values, or ``(path, value)`` pairs), when the batch's paths
    are walked together (:attr:`Prepared.shared`) and the walk gives ``obj`` an answer within
    :data:`MAX_RESULTS`: what :meth:`Engine.evaluate` gives then, without an :class:`Outcome`
    around each; else None (then it evaluates each)."""
    if prepared.shared is None:
        return None
    shared = jqpath.walk_shared(*prepared.shared, obj)
    if shared is None or any(len(found) > MAX_RESULTS for found in shared):
        return None
    for i, text in prepared.consts:
        shared[i] = [text] * len(shared[i])
    return shared


_NOT_EVALUATED = Outcome([], "not evaluated")


class Engine:
    """Evaluates jq on objects: plain paths natively, the rest in its sandbox.

    One engine per process that evaluates (the server's app owns one; the CLI makes its own);
    ``timeout`` bounds each batch that goes to the sandbox unless a call gives its own.
    """

    def __init__(self, sandbox: Sandbox | None = None, *, timeout: float = EVAL_TIMEOUT) -> None:
        self.sandbox = sandbox if sandbox is not None else Sandbox()
        self.timeout = timeout

    def evaluate(
        self,
        batch: Sequence[tuple[str, Mode]] | Prepared,
        obj: Any,
        *,
        timeout: float | None = None,
    ) -> list[Outcome]:
        """Evaluate every ``(expression, mode)`` of ``batch`` against ``obj``.

        Plain paths are walked, the native subset evaluated in process; the rest go to the
        sandbox in a single round trip with a wall-clock bound for all of them together. Never
        raises on bad expressions or objects: every failure is an :class:`Outcome` with
        ``error`` set. A batch evaluated on every request is prepared once (:func:`prepare`).
        """
        prepared = batch if isinstance(batch, Prepared) else prepare(batch)
        if (shared := walked(prepared, obj)) is not None:
            return list(map(Outcome, shared))
        out: list[Outcome] = []
        remote: list[int] = []
        for i, (plain_, prog, mode) in enumerate(prepared.forms):
            if plain_ is not None:
                out.append(_native(*plain_, mode, obj))
                continue
            done = _run_native(prog, mode, obj) if prog is not None else None
            if done is None:
                remote.append(i)
                done = _NOT_EVALUATED  # until the sandbox answers, below
            out.append(done)
        if remote:
            may_wait("the jq sandbox")  # on a worker's poller: a request thread evaluates it
            budget = self.timeout if timeout is None else timeout
            requests = prepared.requests
            results = self.sandbox.run([requests[i] for i in remote], obj, budget)
            for i, res in zip(remote, results, strict=True):
                out[i] = _from_remote(res, requests[i][1], obj)
        return out

    def compile_errors(
        self, exprs: Sequence[str], *, timeout: float = COMPILE_TIMEOUT
    ) -> list[str | None]:
        """Compile each expression with libjq (in the sandbox) without running it; None where
        it compiles. Plain paths are compiled too, so this is the full syntax check."""
        outcomes = self.evaluate([(e, "compile") for e in exprs], None, timeout=timeout)
        return [o.error for o in outcomes]

    def locations(self, expr: str, obj: Any, *, timeout: float | None = None) -> Outcome:
        return self.evaluate([(expr, "paths")], obj, timeout=timeout)[0]

    def values(self, expr: str, obj: Any, *, timeout: float | None = None) -> Outcome:
        return self.evaluate([(expr, "values")], obj, timeout=timeout)[0]

    def warm(self) -> None:
        """Start the sandbox's children ahead of the first request that needs one."""
        self.sandbox.start()

    def close(self) -> None:
        self.sandbox.close()
