"""A memo bounded in bytes, for what is kept between requests (an expression's plain path or
native program in the jq engine, a location's JSON Pointer): its keys come from definitions and
objects.
"""

from __future__ import annotations

from typing import Generic, TypeVar

#: keys: text (an expression), or a location (:data:`webhook.base.pointers.Path_`)
K = TypeVar("K", str, tuple[str | int, ...])
V = TypeVar("V")


class Memo(Generic[K, V]):
    """A memo bounded in bytes: an entry's size is its key's length (or the ``size`` given);
    entries larger than ``max_key`` are never kept, and when ``max_bytes`` would be passed the
    memo starts over. Keys come from definitions and objects, so an attacker decides how many
    and how long they are."""

    def __init__(self, max_bytes: int, max_key: int) -> None:
        self.max_bytes = max_bytes
        self.max_key = max_key
        self.data: dict[K, V] = {}
        self.bytes = 0

    def get(self, key: K) -> V | None:
        return self.data.get(key)

    def put(self, key: K, value: V, size: int | None = None) -> None:
        n = len(key) if size is None else size
        if n > self.max_key:
            return
        if self.bytes + n > self.max_bytes:
            self.data.clear()
            self.bytes = 0
        self.data[key] = value
        self.bytes += n
