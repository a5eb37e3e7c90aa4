"""Errors that carry the place they are about.

Modelled on Kubernetes' ``field.ErrorList``: every problem names its field path (JSON field
names, ``spec.structureDefinition.childComponents[0].name``) and all of them are reported
together, so a user fixes a definition in one round trip instead of one error at a time.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class FieldError:
    """One problem at one field path."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class KartaError(Exception):
    """Base class of the errors this package raises on bad input."""


class DefinitionError(KartaError):
    """A Karta definition that cannot be used; carries every field error found."""

    def __init__(self, source: str, errors: Iterable[FieldError]) -> None:
        self.source = source
        self.errors = list(errors)
        lines = "\n".join(f"  {e}" for e in self.errors)
        super().__init__(f"{source}: invalid Karta definition:\n{lines}")


class InputError(KartaError):
    """Unreadable input: a file that does not exist, bad YAML/JSON, a document of the wrong shape."""


def join_path(base: str, field: str | int) -> str:
    """Append a field name or list index to a field path (``a.b`` + ``c`` / ``a.b`` + ``0``)."""
    if isinstance(field, int):
        return f"{base}[{field}]"
    return f"{base}.{field}" if base else field
