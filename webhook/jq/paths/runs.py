"""Plain paths of object keys and iterations walked level by level, several at once.

:func:`segments` cuts a path into the runs of keys between its iterations;
:func:`walk_objects` and :func:`walk_shared` follow those runs on an object where nothing can
fail, and decline (None) wherever :func:`~webhook.jq.paths.walk` would have more to say.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from webhook.base.pointers import PathToken
from webhook.jq.paths.steps import GStep, Guard, Iterate, Key

__all__ = ["GuardedRun", "Run", "segments", "walk_objects", "walk_shared"]


@dataclass(frozen=True, slots=True)
class GuardedRun:
    """A run of keys (:func:`segments`) with guards in it: ``items`` are its keys and, for
    each :class:`~webhook.jq.paths.Guard`, the tuple of the keys it covers; ``keys`` are all
    of them in order (the location's tokens)."""

    items: tuple[str | tuple[str, ...], ...]
    keys: tuple[str, ...]


#: a run of keys between two iterations: a tuple of keys, or one with guards
Run = tuple[str, ...] | GuardedRun


def segments(steps: Sequence[GStep]) -> tuple[Run, ...] | None:
    """A path of object keys and iterations as the runs of keys between its iterations
    (``.spec.jobs[].template`` → ``(("spec", "jobs"), ("template",))``; a run with a guard
    is a :class:`GuardedRun`); None when a step is an index."""
    out: list[Run] = []
    run: list[str | tuple[str, ...]] = []
    k, last = 0, len(steps)

    def close() -> Run:
        if all(type(item) is str for item in run):
            return tuple(run)  # type: ignore[arg-type]  # keys only
        keys = tuple(k for item in run for k in ((item,) if isinstance(item, str) else item))
        return GuardedRun(tuple(run), keys)

    while k < last:
        step = steps[k]
        if isinstance(step, Key):
            run.append(step.name)
        elif isinstance(step, Iterate):
            out.append(close())
            run = []
        elif isinstance(step, Guard):
            chain = steps[k + 1 : k + 1 + step.n]
            if not all(isinstance(s, Key) for s in chain):
                return None
            run.append(tuple(s.name for s in chain))  # type: ignore[union-attr]
            k += step.n
        else:
            return None
        k += 1
    out.append(close())
    return tuple(out)


def walk_objects(segs: tuple[Run, ...], obj: Any) -> list[tuple[tuple[PathToken, ...], Any]] | None:
    """What :func:`~webhook.jq.paths.walk` gives for the path of :func:`segments` ``segs``, on
    an object where every key is looked up in an object (or null) and every iteration is over
    a list or an object; None otherwise, and then the walk says what happens (an error, or
    nothing there). Level by level: each location is replaced by its children in order, which
    is the walk's depth-first order."""
    found = walk_shared(segs[:-1], ((segs[-1], True),), obj)
    return found[0] if found is not None else None


def walk_shared(
    prefix: tuple[Run, ...], tails: tuple[tuple[Run, bool], ...], obj: Any
) -> list[list[Any]] | None:
    """For each ``(tail, paths)`` of ``tails``: what :func:`walk_objects` gives for the path
    ``prefix + (tail,)`` (its values only, unless ``paths``), walking their common ``prefix``
    once; None when it would decline any of them. Each list is as long as the prefix's, but
    for a tail with a guard, which leaves out the locations where it yields nothing."""
    level: list[tuple[tuple[PathToken, ...], Any]] = [((), obj)]
    for keys in prefix:  # each run of keys, then an iteration
        run = _run(level, keys, True) if type(keys) is tuple else _run_guarded(level, keys, True)
        if run is None:
            return None
        nxt: list[tuple[tuple[PathToken, ...], Any]] = []
        for path, value in run:
            if type(value) is list:
                nxt.extend([((*path, i), item) for i, item in enumerate(value)])
            elif type(value) is dict:
                nxt.extend([((*path, k), item) for k, item in value.items()])
            else:
                return None
        level = nxt
    out: list[list[Any]] = []
    for keys, paths in tails:
        if type(keys) is tuple:
            found = _run(level, keys, paths)
        else:
            found = _run_guarded(level, keys, paths)
        if found is None:
            return None
        out.append(found)
    return out


def _run(
    level: list[tuple[tuple[PathToken, ...], Any]], keys: tuple[str, ...], paths: bool
) -> list[Any] | None:
    """Each location of ``level`` followed by the run of keys ``keys`` (as a location, or
    only its value unless ``paths``), in a list of its own; None when a key meets what is
    neither an object nor null."""
    out: list[Any] = []
    for path, value in level:
        for key in keys:
            if type(value) is dict:
                value = value.get(key)
            elif value is not None:
                return None
        out.append((path + keys, value) if paths else value)
    return out


def _run_guarded(
    level: list[tuple[tuple[PathToken, ...], Any]], run: Run, paths: bool
) -> list[Any] | None:
    """:func:`_run` of a :class:`GuardedRun`: a location whose guard yields nothing is left
    out."""
    assert isinstance(run, GuardedRun)
    out: list[Any] = []
    keys = run.keys
    for path, value in level:
        for item in run.items:
            if type(item) is str:
                if type(value) is dict:
                    value = value.get(item)
                elif value is not None:
                    return None
                continue
            for key in item:
                if type(value) is dict:
                    value = value.get(key)
                elif value is not None:
                    return None
            if value is None or value is False:
                break
        else:
            out.append((path + keys, value) if paths else value)
    return out
