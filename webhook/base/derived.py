"""What an immutable model keeps of what other modules derive from it once."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")


class Derives:
    """A mixin for an immutable model (a definition's component, a policy's rule) whose
    ``derived`` dict keeps what other modules derive from it: derived once, on the first
    request that needs it, instead of on every request's path."""

    derived: dict[Any, Any]

    def derive(self, key: Any, make: Callable[..., T], *args: Any) -> T:
        """What ``make(*args)`` gives, made once for this model and ``key``; None is an
        answer like any other."""
        try:
            return self.derived[key]  # type: ignore[no-any-return]
        except KeyError:
            made = self.derived[key] = make(*args)
            return made
