"""Definitions by group/version/kind, and loading catalogs into them.

A :class:`Registry` is an immutable snapshot of the definitions: the server swaps it whole
(with the policy, in :class:`webhook.admission.state.Snapshot`) when definitions change, so a
request always sees one consistent set. Later sources win for the same group/version/kind: the
bundled catalog, then each ``--catalog`` directory in order, then the cluster.
:class:`FileLoads` reads again only the catalog files whose bytes changed. Each definition's
mutation locator is compiled as it enters a registry.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from pathlib import Path

from webhook.base.documents import document_files
from webhook.base.errors import KartaError
from webhook.base.gvk import GVK
from webhook.karta.loading import Loaded, Vet, catalog_dir, load_each, load_files
from webhook.karta.model import Karta
from webhook.workload.locator import locator


class Registry:
    """The definitions by kind, each with its mutation's locator compiled
    (:func:`webhook.workload.locator.locator`: kept with the definition, so a snapshot made
    again from the same definitions compiles nothing, and the server's master compiles them
    before it forks its workers)."""

    def __init__(self, kartas: Iterable[Karta] = ()) -> None:
        by_gvk: dict[GVK, Karta] = {}
        for k in kartas:
            if k.gvk is not None:
                by_gvk[k.gvk] = k
                locator(k)
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
    return Registry(_load_catalogs(extra, bundled=bundled))


def _load_catalogs(extra: Sequence[Path | str], *, bundled: bool) -> list[Karta]:
    sources: list[Path | str] = [catalog_dir()] if bundled else []
    return load_files([*sources, *extra])


def load_catalogs(
    extra: Sequence[Path | str] = (), *, bundled: bool = True, vet: Vet | None = None
) -> Loaded:
    """The bundled catalog (unless ``bundled`` is false) and each directory or file of
    ``extra``, one definition at a time: a bad one is rejected (with its reasons) and the
    others load. ``vet`` is the check a definition of ``extra`` must pass before it is used
    (the server's and the CLI's: ``/validate``'s, :func:`webhook.admission.rulebook.definition_vet`).
    The bundled catalog is not vetted here: it ships with this code and passes the same check
    in the test suite (``tests/karta/test_catalog.py``), so checking it again at every start would
    only cost time (about a second for 31 definitions)."""
    own = load_each([catalog_dir()]) if bundled else Loaded()
    more = load_each(extra, vet=vet) if extra else Loaded()
    return Loaded((*own.kartas, *more.kartas), (*own.rejected, *more.rejected))


class FileLoads:
    """What each catalog file loaded, kept by the file's path and the digest of its bytes, so
    that a reload reads and checks again only the files whose bytes changed and keeps the very
    objects of the others.

    This is what keeps a reload from doubling a server's memory. The definitions the master
    loaded before forking are shared with the workers, page by page, until a process writes
    to a page; in CPython merely taking a reference to an object writes its reference count.
    A worker that re-read every file would hold a private copy of all of them while the
    master keeps its own; one that kept them but looked at each would still copy most of
    their pages. So the question "is this file as it was?" is asked of a set of
    ``path NUL digest`` strings (a set lookup of a string writes nothing), and when every
    file is as it was (a ConfigMap update writes every file anew, behind a new ``..data``
    link, mostly with the same bytes) the previous result is returned as it is and nothing
    else is touched. When some files changed, those are read and checked; the others'
    definitions are taken as they are (each one referenced: a page or so per definition).
    """

    def __init__(self) -> None:
        self._by_file: dict[str, Loaded] = {}
        self._seen: frozenset[str] = frozenset()
        self._last: Loaded | None = None

    def load(self, paths: Sequence[Path | str], vet: Vet | None) -> Loaded:
        """The definitions in ``paths`` (files, or directories' top-level files) as
        :func:`~webhook.karta.loading.load_each` reads them, reusing what an earlier call read
        from a file with the same bytes (the very same :class:`Loaded` when no file changed,
        appeared or went). A path that does not exist raises as it does."""
        if not paths:
            return Loaded()
        marks: list[tuple[str, str | None]] = []
        for f in document_files([Path(p) for p in paths]):
            try:
                digest = hashlib.blake2b(f.read_bytes(), digest_size=16).hexdigest()
                marks.append((str(f), f"{f}\0{digest}"))
            except OSError:  # unreadable: load_each says why, and it is read again next time
                marks.append((str(f), None))
        seen = self._seen
        if (
            self._last is not None
            and len(marks) == len(seen)
            and all(mark is not None and mark in seen for _, mark in marks)
        ):
            return self._last
        by_file: dict[str, Loaded] = {}
        kartas: list[Karta] = []
        rejected: list[KartaError] = []
        for path, mark in marks:
            loaded = self._by_file.get(path) if mark is not None and mark in seen else None
            if loaded is None:
                loaded = load_each([Path(path)], vet=vet)
            if mark is not None:
                by_file[path] = loaded
            kartas.extend(loaded.kartas)
            rejected.extend(loaded.rejected)
        self._by_file = by_file
        self._seen = frozenset(mark for _, mark in marks if mark is not None)
        self._last = Loaded(tuple(kartas), tuple(rejected))
        return self._last
