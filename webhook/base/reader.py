"""Typed reading of a JSON-like document that records shape problems instead of raising them.

Parsers of untrusted documents (Karta definitions, their instructions) read every field through
a :class:`Reader`, so a document with ten problems yields ten :class:`FieldError` s at once, each
at its JSON field path, and never a ``KeyError`` or ``TypeError``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from webhook.base.errors import FieldError, join_path


def type_name(value: Any) -> str:
    """A JSON value's type in words, for messages (``an object``, ``a list``, ``null``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    return type(value).__name__


class Reader:
    """Typed access to a JSON-like document that records, not raises, shape errors (each
    problem once, however often its field is read)."""

    def __init__(self) -> None:
        self.errors: list[FieldError] = []

    def error(self, path: str, message: str) -> None:
        e = FieldError(path, message)
        if e not in self.errors:
            self.errors.append(e)

    def missing(self, path: str) -> None:
        self.error(path, "required field is missing")

    def _typed(self, value: Any, path: str, want: type, what: str, required: bool) -> Any:
        """``value`` when it is a ``want``; else None, with an error unless it is an absent
        optional field."""
        if value is None:
            if required:
                self.missing(path)
            return None
        if not isinstance(value, want) or (want is not bool and isinstance(value, bool)):
            self.error(path, f"must be {what}, got {type_name(value)}")
            return None
        return value

    def obj(self, value: Any, path: str, *, required: bool = False) -> dict[str, Any] | None:
        out: dict[str, Any] | None = self._typed(value, path, dict, "an object", required)
        return out

    def items(self, value: Any, path: str) -> list[Any]:
        out: list[Any] = self._typed(value, path, list, "a list", False) or []
        return out

    def string(self, value: Any, path: str, *, required: bool = False) -> str | None:
        out: str | None = self._typed(value, path, str, "a string", required)
        return out

    def scalar_text(self, value: Any, path: str) -> str | None:
        """A YAML scalar as the string a user means where upstream wants a string holding JSON
        (``value: true``) or compares to jq's ``tostring`` (``expectedResult: true``). Objects
        and lists are not scalars: upstream's schema says string, and they would have to be
        encoded."""
        if value is None or isinstance(value, str):
            return value
        if isinstance(value, bool | int | float):
            return json.dumps(value)
        self.error(path, f"must be a string, got {type_name(value)}")
        return None

    def at(self, d: Mapping[str, Any], keys: Sequence[str], path: str) -> Mapping[str, Any] | None:
        """The object ``keys`` below ``d`` (``d`` itself for no keys), None when a step is
        absent or not an object (which is recorded)."""
        cur: Mapping[str, Any] | None = d
        for key in keys:
            if cur is None:
                return None
            path = join_path(path, key)
            cur = self.obj(cur.get(key), path)
        return cur
