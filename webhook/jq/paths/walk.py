"""The walk of a plain path, step by step, as libjq's ``path()`` gives it: locations, values
and errors (messages: :mod:`webhook.jq.paths.messages`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from webhook.base.pointers import PathToken
from webhook.jq.paths.messages import dump, kind, trunc
from webhook.jq.paths.steps import GStep, Guard, Index, Iterate, Key

__all__ = ["WalkError", "walk"]


class WalkError(ValueError):
    """A plain path failed on this object; the message is libjq's, byte for byte.

    ``iterates_null`` is True exactly for ``Cannot iterate over null (null)``: callers treat a
    path through an absent list or map as "no locations" rather than as an error.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.iterates_null = message == "Cannot iterate over null (null)"


def walk(steps: Sequence[GStep], obj: Any) -> list[tuple[tuple[PathToken, ...], Any]]:
    """Evaluate plain ``steps`` on ``obj``: ``(path, value)`` pairs as libjq's ``path()`` gives.

    Order is libjq's (depth first; objects in insertion order), which also decides which error
    is raised first. Values are the objects inside ``obj``, not copies. A missing key or
    out-of-range index yields None at that location; indexing or iterating a value of the wrong
    type raises :class:`WalkError` with libjq's message. A :class:`Guard` yields nothing where
    its chain ends at null or false. Iterative but for guards: any number of steps.
    """
    out: list[tuple[tuple[PathToken, ...], Any]] = []
    last = len(steps)
    # Depth first with an explicit stack: (next step, value, path so far); children are
    # pushed in reverse so that they come off in libjq's order.
    todo: list[tuple[int, Any, tuple[PathToken, ...]]] = [(0, obj, ())]
    while todo:
        k, value, path = todo.pop()
        while k < last:
            step = steps[k]
            if isinstance(step, Key):
                if isinstance(value, dict):
                    value = value.get(step.name)
                elif value is not None:
                    raise WalkError(
                        f"Cannot index {kind(value)} with string ({trunc(dump(step.name))})"
                    )
                path += (step.name,)
            elif isinstance(step, Index):
                if isinstance(value, list):
                    value = value[step.i] if step.i < len(value) else None
                elif value is not None:
                    raise WalkError(f"Cannot index {kind(value)} with number ({step.i})")
                path += (step.i,)
            elif isinstance(step, Iterate):
                if isinstance(value, list):
                    items: list[tuple[PathToken, Any]] = list(enumerate(value))
                elif isinstance(value, dict):
                    items = list(value.items())
                else:
                    raise WalkError(f"Cannot iterate over {kind(value)} ({trunc(dump(value))})")
                todo.extend((k + 1, item, (*path, tok)) for tok, item in reversed(items))
                break
            elif isinstance(step, Guard):
                # P has no iteration: one location, or the error any walk of it raises
                ((sub, value),) = walk(steps[k + 1 : k + 1 + step.n], value)
                if value is None or value is False:
                    break  # nothing here
                path += sub
                k += step.n
            else:
                raise TypeError(f"not a plain path step: {step!r}")
            k += 1
        else:
            out.append((path, value))
    return out
