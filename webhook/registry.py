"""Definitions by group/version/kind.

A :class:`Registry` is an immutable snapshot: the server swaps the whole snapshot atomically
when definitions change (files on disk, Kartas in the cluster), so a request always sees one
consistent set. Later sources win for the same group/version/kind: the bundled catalog, then
each ``--catalog`` directory in order, then the cluster.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from webhook.definitions import GVK, Karta, catalog_dir, load_files


class Registry:
    def __init__(self, kartas: Iterable[Karta] = ()) -> None:
        by_gvk: dict[GVK, Karta] = {}
        for k in kartas:
            if k.gvk is not None:
                by_gvk[k.gvk] = k
        self._by_gvk = by_gvk

    def lookup(self, gvk: GVK | None) -> Karta | None:
        return self._by_gvk.get(gvk) if gvk is not None else None

    def kinds(self) -> list[GVK]:
        return sorted(self._by_gvk)

    def definitions(self) -> list[Karta]:
        return [self._by_gvk[g] for g in self.kinds()]

    def __len__(self) -> int:
        return len(self._by_gvk)

    def merged(self, kartas: Iterable[Karta]) -> Registry:
        """A new snapshot with ``kartas`` over this one."""
        return Registry([*self._by_gvk.values(), *kartas])


def load_registry(extra: Sequence[Path | str] = (), *, bundled: bool = True) -> Registry:
    """The bundled catalog (unless ``bundled`` is false) with each directory of ``extra`` on top."""
    sources: list[Path | str] = [catalog_dir()] if bundled else []
    return Registry(load_files([*sources, *extra]))
