"""Test suites for definitions: ``karta-webhook test PATH`` reads ``karta-test.yaml`` files.

What the webhook must find and do, as ``kyverno test`` for policies (paths relative to the file)::

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

Each definition is validated as by ``validate``: with the CRDs, the cases' objects as samples.
Each case's object is defaulted from its kind's schema, as the API server stores it. It is then
resolved (``templates``, ``gpus``) and mutated under the policy (``mutated``). Every check is
one :class:`Row`, passed or failed with its reason (:func:`as_table`, :func:`as_json`). An
unusable suite (a missing or non-YAML file, a wrong type, an unknown field) is an
:class:`~webhook.base.errors.InputError` naming the file and field, never a failed row.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import jsonpatch

from webhook.admission.handlers import mutate_with, validate
from webhook.admission.registry import Registry, load_registry
from webhook.admission.review import request_for
from webhook.admission.rulebook import schema_for
from webhook.base.errors import DefinitionError, InputError
from webhook.base.gvk import GVK
from webhook.base.pointers import pointer
from webhook.cli.suitefile import SUITE_FILES, Case, Suite, find_suites, load_suite, read_crd_files
from webhook.jq.engine import Engine
from webhook.karta.loading import load_definition
from webhook.karta.samples import SampleIndex
from webhook.mutation.policy import Policy
from webhook.schema.defaulting import apply_defaults
from webhook.workload.locator import resolve

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

#: At most this many differences are named when a mutated object is not the expected one.
_DIFFS: Final = 3


@dataclass(frozen=True)
class Row:
    """One check's outcome."""

    test: str
    case: str
    check: str
    passed: bool
    reason: str = ""
    #: every difference, when a mutated object is not the expected one (``reason`` names
    #: the first :data:`_DIFFS`; ``-o json`` lists them all)
    differences: tuple[str, ...] = ()
    #: the mutated object the check computed and the file its expectation came from (None
    #: when given inline), for ``test --update``
    computed: tuple[Path | None, Any] | None = field(default=None, compare=False, repr=False)

    @property
    def result(self) -> str:
        return "pass" if self.passed else "fail"


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
    every = _describe_diff(diff, actual)
    more = f" (and {len(every) - _DIFFS} more)" if len(every) > _DIFFS else ""
    return Row(
        test,
        case.name,
        "mutated",
        False,
        "; ".join(every[:_DIFFS]) + more,
        tuple(every),
        (case.mutated_file, actual),
    )


def _describe_diff(diff: Sequence[Mapping[str, Any]], actual: Any) -> list[str]:
    """Every difference between the mutated object and the expected one, in words."""
    out = []
    for op in diff:
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
    return out


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
                "reason": "; ".join(r.differences) if r.differences else r.reason,
                **({"differences": list(r.differences)} if r.differences else {}),
            }
            for r in rows
        ],
        "passed": passed,
        "failed": len(rows) - passed,
    }
