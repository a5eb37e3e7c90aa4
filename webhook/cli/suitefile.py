"""Reading ``karta-test.yaml`` test suites (see :mod:`webhook.cli.suite` for the format): the
files, the definitions, CRDs, policy and cases they name, every problem an
:class:`~webhook.base.errors.InputError` naming the file and field."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from webhook.base.documents import document_files, read_documents
from webhook.base.errors import InputError, join_path
from webhook.base.gvk import GVK
from webhook.base.limits import MAX_SUITE_CASES, MAX_SUITE_FILES
from webhook.base.reader import Reader, type_name
from webhook.karta.model import is_karta
from webhook.mutation.policy import EMPTY, Policy
from webhook.mutation.policyfile import load_policy, parse_policy
from webhook.schema.crds import SchemaIndex, read_crds

#: The file names a directory is searched for.
SUITE_FILES: Final = ("karta-test.yaml", "karta-test.yml")
_TOP: Final = frozenset({"name", "definitions", "catalog", "crds", "policy", "cases"})
_CASE: Final = frozenset({"name", "object", "templates", "gpus", "mutated"})


@dataclass(frozen=True)
class Case:
    """One object and what the webhook must find and do with it."""

    name: str
    where: str  # its field path in the suite, for messages
    source: str  # the object's file (or the suite's, when inline)
    obj: Mapping[str, Any]
    templates: tuple[str, ...] | None = None
    gpus: int | None = None
    mutated: Mapping[str, Any] | None = None
    #: the file ``mutated`` was read from (None: inline or not given)
    mutated_file: Path | None = None


@dataclass(frozen=True)
class Suite:
    """A test-suite file, read and checked; every file it names is loaded."""

    path: Path
    name: str
    definitions: tuple[tuple[str, Any], ...]  # (source, document) of every Karta
    catalog: bool
    schemas: SchemaIndex | None
    policy: Policy
    cases: tuple[Case, ...]


# --------------------------------------------------------------------------- finding, reading


def find_suites(path: Path) -> list[Path]:
    """The suite files of ``path``: the file itself, or every :data:`SUITE_FILES` under the
    directory (recursively, sorted). Raises :class:`InputError` when there is none."""
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise InputError(f"{path}: no such file or directory")
    found = sorted(p for p in path.rglob("*") if p.name in SUITE_FILES and p.is_file())
    if not found:
        raise InputError(f"{path}: no {SUITE_FILES[0]} found under it")
    if len(found) > MAX_SUITE_FILES:
        raise InputError(f"{path}: more than {MAX_SUITE_FILES} test-suite files under it")
    return found


def read_crd_files(paths: Iterable[Path | str], what: str = "--crd") -> SchemaIndex | None:
    """The CRDs in files and directories (recursively); None when no path is given. Raises
    :class:`InputError` for an unreadable file, an unusable CRD, or paths without any CRD."""
    given = [Path(p) for p in paths]
    if not given:
        return None
    files = document_files(given, recursive=True, what=what)
    index = read_crds([d for f in files for d in read_documents(f)])
    if not len(index):
        names = ", ".join(str(p) for p in given)
        raise InputError(f"{names}: no served CustomResourceDefinition found ({what})")
    return index


class _SuiteReader(Reader):
    """A :class:`Reader` that also resolves the suite's relative file names."""

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        self.base = path.parent

    def file(self, value: Any, where: str) -> Path | None:
        name = self.string(value, where)
        if name is None:
            return None
        p = Path(name)
        return p if p.is_absolute() else self.base / p

    def files(self, value: Any, where: str) -> list[tuple[str, Path]]:
        if isinstance(value, str):
            value = [value]
        out = []
        for i, item in enumerate(self.items(value, where)):
            p = self.file(item, join_path(where, i))
            if p is not None:
                if not p.exists():
                    self.error(join_path(where, i), f"{p}: no such file or directory")
                else:
                    out.append((join_path(where, i), p))
        return out

    def unknown(self, d: Mapping[str, Any], allowed: frozenset[str], where: str) -> None:
        for key in d:
            if key not in allowed:
                self.error(
                    join_path(where, str(key)),
                    f"unknown field (known: {', '.join(sorted(allowed))})",
                )

    def fail(self) -> InputError:
        lines = "\n".join(f"  {e}" for e in self.errors)
        return InputError(f"{self.path}: unusable test suite:\n{lines}")


def load_suite(path: Path) -> Suite:
    """Read one suite file and everything it names. Raises :class:`InputError` listing every
    problem with its field (``cases[1].templates``), or the file that cannot be read."""
    docs = read_documents(path)
    r = _SuiteReader(path)
    if len(docs) != 1:
        r.error("", f"a test suite is one YAML document, not {len(docs)}")
        raise r.fail()
    doc = r.obj(docs[0][1], "", required=True)
    if doc is None:
        raise r.fail()
    r.unknown(doc, _TOP, "")
    name = r.string(doc.get("name"), "name") or path.parent.name or str(path)
    catalog = doc.get("catalog", False)
    if not isinstance(catalog, bool):
        r.error("catalog", f"must be true or false, got {type_name(catalog)}")
        catalog = False
    definitions = _definitions(r, doc.get("definitions"))
    if not definitions and not catalog and not r.errors:
        r.error("definitions", "required: the Karta files to test (or catalog: true)")
    crd_files = r.files(doc.get("crds"), "crds")
    cases = _cases(r, doc.get("cases"))
    if r.errors:
        raise r.fail()
    schemas = read_crd_files([p for _, p in crd_files], what=f"{path}: crds")
    return Suite(
        path=path,
        name=name,
        definitions=tuple(definitions),
        catalog=catalog,
        schemas=schemas,
        policy=_policy(r, doc.get("policy")),
        cases=tuple(cases),
    )


def _definitions(r: _SuiteReader, value: Any) -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for where, p in r.files(value, "definitions"):
        found = [
            (source, doc)
            for f in document_files([p])
            for source, doc in read_documents(f)
            if is_karta(doc)
        ]
        if not found:
            r.error(where, f"{p}: no Karta definition in it")
        out.extend(found)
    return out


def _policy(r: _SuiteReader, value: Any) -> Policy:
    if value is None:
        return EMPTY
    if isinstance(value, Mapping):
        return parse_policy(dict(value), f"{r.path}: policy")
    p = r.file(value, "policy")
    if p is None:
        raise r.fail()
    return load_policy(p)


def _cases(r: _SuiteReader, value: Any) -> list[Case]:
    items = r.items(value, "cases")
    if value is None:
        r.missing("cases")
    if len(items) > MAX_SUITE_CASES:
        r.error("cases", f"more than {MAX_SUITE_CASES} cases")
        return []
    out = []
    for i, item in enumerate(items):
        where = join_path("cases", i)
        d = r.obj(item, where)
        if d is None:
            continue
        r.unknown(d, _CASE, where)
        obj, source = _object(r, d.get("object"), join_path(where, "object"), required=True)
        mutated, _ = _object(r, d.get("mutated"), join_path(where, "mutated"))
        given = d.get("mutated")
        mutated_file = (
            r.file(given, join_path(where, "mutated")) if isinstance(given, str) else None
        )
        templates = _pointers(r, d.get("templates"), join_path(where, "templates"))
        gpus = d.get("gpus")
        if gpus is not None and (not isinstance(gpus, int) or isinstance(gpus, bool) or gpus < 0):
            r.error(join_path(where, "gpus"), f"must be a non-negative integer, got {gpus!r:.40}")
            gpus = None
        if templates is None and gpus is None and mutated is None:
            r.error(where, "give what to check: templates, gpus or mutated")
        name = r.string(d.get("name"), join_path(where, "name"))
        if obj is not None:
            out.append(
                Case(
                    name=name
                    or (where if isinstance(d.get("object"), Mapping) else Path(source).name),
                    where=where,
                    source=source,
                    obj=obj,
                    templates=templates,
                    gpus=gpus,
                    mutated=mutated,
                    mutated_file=mutated_file,
                )
            )
    return out


def _object(
    r: _SuiteReader, value: Any, where: str, *, required: bool = False
) -> tuple[Mapping[str, Any] | None, str]:
    """An object given inline or as a file of exactly one document."""
    if value is None:
        if required:
            r.missing(where)
        return None, str(r.path)
    if isinstance(value, Mapping):
        doc: Any = value
        source = f"{r.path}: {where}"
    else:
        p = r.file(value, where)
        if p is None:
            return None, str(r.path)
        try:
            docs = read_documents(p)
        except InputError as e:
            r.error(where, str(e))
            return None, str(p)
        if len(docs) != 1:
            r.error(where, f"{p}: holds {len(docs)} documents; give one object per case")
            return None, str(p)
        source, doc = docs[0]
    if not isinstance(doc, Mapping) or GVK.of(doc) is None:
        r.error(where, "must be a Kubernetes object (with apiVersion and kind)")
        return None, source
    return doc, source


def _pointers(r: _SuiteReader, value: Any, where: str) -> tuple[str, ...] | None:
    if value is None:
        return None
    out = []
    for i, p in enumerate(r.items(value, where)):
        text = r.string(p, join_path(where, i))
        if text is not None and text and not text.startswith("/"):
            r.error(join_path(where, i), f"{text!r} is not a JSON pointer (/spec/template)")
        elif text is not None:
            out.append(text)
    return tuple(out)
