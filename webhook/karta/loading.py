"""Loading Karta definitions: the safety screen over every jq expression, one document, files
and directories (all or nothing, or each on its own with why one was not used), and where the
bundled catalog and its samples are.

The model and parsing a document into it are :mod:`webhook.karta.model`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from webhook.base.documents import document_files, read_documents
from webhook.base.errors import DefinitionError, FieldError, KartaError
from webhook.jq import syntax as jqsyntax
from webhook.karta.model import Karta, is_karta, jq_fields, parse


def screen_errors(karta: Karta) -> list[FieldError]:
    """The safety screen's reasons against every jq expression, at their fields."""
    return [
        FieldError(f.path, reason) for f in jq_fields(karta) for reason in jqsyntax.screen(f.expr)
    ]


def load_definition(doc: Any, source: str) -> Karta:
    """Parse a definition and apply the safety screen to every jq expression in it.

    The screen runs wherever a definition is loaded (files, catalog, cluster): an expression
    that could read the environment or files never reaches an evaluator. Whatever goes wrong
    with an untrusted document is a :class:`DefinitionError` naming it, never another
    exception (a server must not die, nor a sync loop retry forever, on one bad definition).
    """
    try:
        karta = parse(doc, source)
        errors = screen_errors(karta)
    except DefinitionError:
        raise
    except (RecursionError, MemoryError, ValueError, TypeError) as e:
        raise DefinitionError(
            source, [FieldError("", f"cannot be read: {type(e).__name__}: {e}")]
        ) from None
    if errors:
        raise DefinitionError(source, errors)
    return karta


def load_files(paths: Iterable[Path | str], *, recursive: bool = False) -> list[Karta]:
    """Load every Karta in the given files or directories (directories: top-level files only,
    unless ``recursive``; non-Karta documents are skipped). Raises on the first bad file with
    all its errors, since a half-loaded catalog would silently stop mutating a kind."""
    kartas: list[Karta] = []
    for f in document_files([Path(p) for p in paths], recursive=recursive):
        for source, doc in read_documents(f):
            if is_karta(doc):
                kartas.append(load_definition(doc, source))
    return kartas


#: A check a definition must pass before it is used (``doc``, ``source``) -> its problems,
#: none when fine: the server and the CLI pass the checks of ``/validate``
#: (:func:`webhook.admission.rulebook.definition_vet`).
Vet = Callable[[Any, str], list[FieldError]]


@dataclass(frozen=True)
class Loaded:
    """What :func:`load_each` read: the usable definitions, and each file or document that
    was not used, with why (each error names its file and document)."""

    kartas: tuple[Karta, ...] = ()
    rejected: tuple[KartaError, ...] = ()


def load_each(
    paths: Iterable[Path | str], *, recursive: bool = False, vet: Vet | None = None
) -> Loaded:
    """Like :func:`load_files`, but one bad file or definition does not stop the others: each
    is loaded, or rejected with its reasons (unreadable YAML, shape, safety screen, then
    ``vet``). A path that does not exist is still an :class:`InputError`: that is the
    command line's mistake, not a definition's."""
    kartas: list[Karta] = []
    rejected: list[KartaError] = []
    for f in document_files([Path(p) for p in paths], recursive=recursive):
        try:
            docs = read_documents(f)
        except KartaError as e:
            rejected.append(e)
            continue
        for source, doc in docs:
            if not is_karta(doc):
                continue
            try:
                karta = load_definition(doc, source)
                problems = vet(doc, source) if vet is not None else []
            except DefinitionError as e:
                rejected.append(e)
                continue
            if problems:
                rejected.append(DefinitionError(source, problems))
            else:
                kartas.append(karta)
    return Loaded(tuple(kartas), tuple(rejected))


def catalog_dir() -> Path:
    """The bundled catalog: package data when installed, the repository's ``catalog/`` when
    running from a checkout."""
    try:
        from importlib.resources import files

        installed = Path(str(files("webhook.catalog")))
        if installed.is_dir() and any(installed.glob("*.yaml")):
            return installed
    except (ModuleNotFoundError, TypeError):
        pass
    return Path(__file__).resolve().parents[2] / "catalog"


def samples_dir() -> Path:
    return catalog_dir() / "samples"
