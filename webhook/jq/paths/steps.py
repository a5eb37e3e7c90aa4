"""The steps of a plain jq path: what :mod:`webhook.jq.paths.parse` reads and the walks follow."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["GStep", "Guard", "Index", "Iterate", "Key", "Step"]


@dataclass(frozen=True, slots=True)
class Key:
    """``.name`` / ``."name"`` / ``.["name"]``: object member (null stays null)."""

    name: str


@dataclass(frozen=True, slots=True)
class Index:
    """``[N]`` / ``.[N]`` with a non-negative integer literal: array element."""

    i: int


@dataclass(frozen=True, slots=True)
class Iterate:
    """``[]`` / ``.[]``: every element of an array, every value of an object."""


Step = Key | Index | Iterate


@dataclass(frozen=True, slots=True)
class Guard:
    """``(P // empty)``: the next ``n`` steps (keys and indices: P) are followed, and where
    they end at null or false there is nothing (not an error, not "absent"). A wrong type
    inside P is the same error as without the guard: libjq 1.8's ``//`` does not suppress
    the errors of its left side (``.a // empty`` on ``3`` fails; tests/jq/test_jqpath.py).
    Only :func:`~webhook.jq.paths.parse_guarded` gives it, never
    :func:`~webhook.jq.paths.parse_plain`."""

    n: int


GStep = Step | Guard
