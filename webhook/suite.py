"""Test suites for definitions: ``karta-webhook test PATH`` reads ``karta-test.yaml`` files.

A test suite says, for a definition and a few objects of its kind, what the webhook must find
and do, the way ``kyverno test`` does for policies::

    # karta-test.yaml (paths are relative to this file)
    name: volcano-job                  # optional; default: the directory's name
    definitions: [karta.yaml]          # Karta files or directories (required)
    catalog: false                     # also load the bundled catalog (default: false)
    crds: [crd.yaml]                   # optional: CRDs of the kinds (files, lists, directories)
    policy: policy.yaml                # optional: a policy file, or the policy inline
    cases:
    - name: two-tasks                  # optional; default: the object's file name
      object: job.yaml                 # one object: a file of one document, or inline
      templates:                       # every pod template the definition finds, as JSON
      - /spec/tasks/0/template         #   pointers (any order); [] for none
      - /spec/tasks/1/template
      gpus: 8                          # optional: the workload's GPU total
      mutated: job-mutated.yaml        # optional: the object after the policy, as a file or inline

Each definition is validated (as ``validate`` with the CRDs, the cases' objects as samples);
each case's object is defaulted from its kind's schema, as the API server stores it, then
resolved (``templates``, ``gpus``) and mutated under the policy (``mutated``). Every check is
one :class:`Row`, passed or failed with the reason; :func:`as_table` and :func:`as_json`
render them. A suite that cannot be used (a file that is missing or not YAML, a field of the
wrong type, an unknown field) is an :class:`~webhook.errors.InputError` naming the file and
field, never a failed row.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import jsonpatch

from webhook.admission import request_for
from webhook.crds import SchemaIndex, read_crds
from webhook.definitions import is_karta, load_definition
from webhook.documents import document_files, read_documents
from webhook.errors import DefinitionError, InputError, join_path
from webhook.gvk import GVK
from webhook.handlers import mutate_with, schema_for, validate
from webhook.jqexpr import Engine, pointer
from webhook.limits import MAX_SUITE_CASES, MAX_SUITE_FILES
from webhook.policy import EMPTY, Policy, load_policy, parse_policy
from webhook.reader import Reader, type_name
from webhook.registry import Registry, load_registry
from webhook.samples import SampleIndex
from webhook.schema_samples import apply_defaults
from webhook.workload import resolve

__all__ = [
    "SUITE_FILES",
    "Case",
    "Row",
    "Suite",
    "as_json",
    "as_table",
    "find_suites",
    "load_suite",
    "read_crd_files",
    "run_suite",
]

#: The file names a directory is searched for.
SUITE_FILES: Final = ("karta-test.yaml", "karta-test.yml")
_TOP: Final = frozenset({"name", "definitions", "catalog", "crds", "policy", "cases"})
_CASE: Final = frozenset({"name", "object", "templates", "gpus", "mutated"})
#: At most this many differences are named when a mutated object is not the expected one.
_DIFFS: Final = 3


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


@dataclass(frozen=True)
class Row:
    """One check's outcome."""

    test: str
    case: str
    check: str
    passed: bool
    reason: str = ""

    @property
    def result(self) -> str:
        return "pass" if self.passed else "fail"


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


# --------------------------------------------------------------------------- running


def run_suite(suite: Suite, engine: Engine, *, label: str | None = None) -> list[Row]:
    """Every check of ``suite``: each definition's validity, then each case's checks."""
    test = label or suite.name
    rows: list[Row] = []
    samples = SampleIndex(sources=[f"{suite.path} cases"])
    for case in suite.cases:
        samples.add(f"{case.name} ({case.source})", dict(case.obj))
    kartas = []
    for source, doc in suite.definitions:
        name = _karta_name(doc) or source
        result = validate(
            request_for(doc), samples, (), engine, source=source, schemas=suite.schemas
        )
        report = result.report
        if result.response.allowed:
            rows.append(
                Row(test, name, "valid", True, _summary(report.lines()[0] if report else ""))
            )
        else:
            errors = (
                [str(e) for e in report.errors]
                if report
                else [result.response.message or "invalid"]
            )
            rows.append(Row(test, name, "valid", False, "; ".join(errors)))
        with contextlib.suppress(DefinitionError):  # its "valid" row failed; so do its cases
            kartas.append(load_definition(doc, source))
    registry = (load_registry() if suite.catalog else Registry()).merged(kartas)
    for case in suite.cases:
        rows.extend(_run_case(test, case, suite, registry, engine))
    return rows


def _karta_name(doc: Any) -> str:
    meta = doc.get("metadata") if isinstance(doc, Mapping) else None
    name = meta.get("name") if isinstance(meta, Mapping) else None
    return name if isinstance(name, str) else ""


def _summary(head: str) -> str:
    """The reason of a passed validity row: what the OK line says after the name."""
    _, _, rest = head.partition("): ")
    return rest or head


def _checks(case: Case) -> list[str]:
    return [
        name
        for name, given in (
            ("templates", case.templates is not None),
            ("gpus", case.gpus is not None),
            ("mutated", case.mutated is not None),
        )
        if given
    ]


def _run_case(test: str, case: Case, suite: Suite, registry: Registry, engine: Engine) -> list[Row]:
    gvk = GVK.of(case.obj)
    karta = registry.lookup(gvk)
    if karta is None:
        why = f"no usable definition for {gvk} (among the suite's definitions)"
        return [Row(test, case.name, check, False, why) for check in _checks(case)]
    found = schema_for(gvk, suite.schemas)
    try:
        obj = apply_defaults(found.schema, case.obj) if found.schema is not None else case.obj
    except InputError as e:
        return [Row(test, case.name, check, False, str(e)) for check in _checks(case)]
    rows: list[Row] = []
    if case.templates is not None or case.gpus is not None:
        try:
            w = resolve(karta, obj, engine)
        except Exception as e:  # a definition meeting an object it cannot read
            why = f"cannot resolve: {type(e).__name__}: {e}"
            rows.extend(
                Row(test, case.name, c, False, why) for c in _checks(case) if c != "mutated"
            )
        else:
            if case.templates is not None:
                got = [pointer(i.location) for _, i in w.instances if i.location is not None]
                rows.append(_templates_row(test, case, got))
            if case.gpus is not None:
                ok = w.gpus == case.gpus
                why = f"{w.gpus} GPU(s)" if ok else f"want {case.gpus}, got {w.gpus}"
                rows.append(Row(test, case.name, "gpus", ok, why))
    if case.mutated is not None:
        rows.append(_mutated_row(test, case, karta, suite.policy, obj, engine))
    return rows


def _templates_row(test: str, case: Case, got: Sequence[str]) -> Row:
    want = list(case.templates or ())
    missing = [p for p in want if p not in got]
    extra = [p for p in got if p not in want]
    if not missing and not extra:
        return Row(test, case.name, "templates", True, f"{len(got)} template(s)")
    parts = []
    if missing:
        parts.append("missing " + ", ".join(missing))
    if extra:
        parts.append("unexpected " + ", ".join(extra))
    return Row(test, case.name, "templates", False, "; ".join(parts))


def _mutated_row(
    test: str,
    case: Case,
    karta: Any,
    policy: Policy,
    obj: Mapping[str, Any],
    engine: Engine,
) -> Row:
    try:
        m = mutate_with(karta, policy, obj, engine)
        actual = jsonpatch.apply_patch(dict(obj), m.ops) if m.ops else obj
    except Exception as e:  # a definition or policy meeting an object it cannot handle
        return Row(test, case.name, "mutated", False, f"cannot mutate: {type(e).__name__}: {e}")
    diff = jsonpatch.make_patch(actual, dict(case.mutated or {})).patch
    if not diff:
        return Row(test, case.name, "mutated", True, f"{len(m.ops)} patch op(s)")
    return Row(test, case.name, "mutated", False, _describe_diff(diff, actual))


def _describe_diff(diff: Sequence[Mapping[str, Any]], actual: Any) -> str:
    """The first differences between the mutated object and the expected one, in words."""
    out = []
    for op in diff[:_DIFFS]:
        path = str(op.get("path", ""))
        got = _at(actual, path)
        if op.get("op") == "remove":
            out.append(f"{path}: not expected, got {_short(got)}")
        elif op.get("op") == "add":
            out.append(f"{path}: want {_short(op.get('value'))}, got nothing")
        elif op.get("op") == "replace":
            out.append(f"{path}: want {_short(op.get('value'))}, got {_short(got)}")
        else:  # move/copy: jsonpatch found the same value elsewhere
            out.append(f"{path}: differs ({op.get('op')} from {op.get('from')})")
    more = f" (and {len(diff) - _DIFFS} more)" if len(diff) > _DIFFS else ""
    return "; ".join(out) + more


def _at(obj: Any, path: str) -> Any:
    try:
        return jsonpatch.JsonPointer(path).resolve(obj)
    except Exception:
        return None


def _short(v: Any, limit: int = 60) -> str:
    text = json.dumps(v, default=str, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --------------------------------------------------------------------------- rendering


def as_table(rows: Sequence[Row]) -> str:
    """A table of every check, one per line, then a summary line."""
    header = ("ID", "TEST", "CASE", "CHECK", "RESULT", "REASON")
    body = [
        (str(i), r.test, r.case, r.check, r.result, r.reason) for i, r in enumerate(rows, start=1)
    ]
    widths = [max(len(row[c]) for row in [header, *body]) for c in range(len(header) - 1)]
    lines = [
        "  ".join(
            [*(cell.ljust(w) for cell, w in zip(row[:-1], widths, strict=True)), row[-1]]
        ).rstrip()
        for row in [header, *body]
    ]
    passed = sum(r.passed for r in rows)
    lines.append(f"\n{passed} passed, {len(rows) - passed} failed")
    return "\n".join(lines)


def as_json(rows: Sequence[Row]) -> dict[str, Any]:
    """The ``-o json`` shape: every check, and the counts."""
    passed = sum(r.passed for r in rows)
    return {
        "results": [
            {
                "test": r.test,
                "case": r.case,
                "check": r.check,
                "result": r.result,
                "reason": r.reason,
            }
            for r in rows
        ],
        "passed": passed,
        "failed": len(rows) - passed,
    }
