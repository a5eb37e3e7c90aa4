"""Checking a Karta definition before it is used: structure, jq, safety, and sample objects.

Upstream's validator checks structure and screens jq text; it never compiles an expression and
never runs one against a real object, so a misspelt path (``.spec.replicatedJob[]``) or a
computed one (``.spec.template | {spec: .spec}``) is accepted and then silently finds nothing,
or worse. :func:`check` adds what upstream lacks:

1. shape (:func:`webhook.definitions.parse`) and structure (:mod:`webhook.structure`), each
   problem at its field;
2. every expression compiled by libjq and passed through the safety screen;
3. every workload-side expression evaluated on each sample object of the root kind, the way
   :data:`webhook.fields.COMPONENT_FIELDS` says it is used: write paths must be jq paths that
   find something somewhere, templates must look like templates, ids and replica counts must
   have the right type and count, status expressions must run;
4. bounded: each definition-sample pair gets ``timeout`` seconds, and when a batch overruns,
   the culprit is found by re-running its expressions one at a time; with a ``budget``, the
   whole check ends by then, and whatever was left unevaluated is an error at its field.

Everything is reported as a :class:`FieldError` at its JSON field path, all at once. ``check``
never raises on bad input: the admission webhook and the CLI turn its :class:`Report` into a
denial or into lines of text (:meth:`Report.lines`, :meth:`Report.denial`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from webhook import jqsyntax
from webhook.definitions import JqField, Karta, jq_fields, parse
from webhook.errors import DefinitionError, FieldError
from webhook.fields import FRAGMENTED, Mode, Role
from webhook.gvk import GVK
from webhook.jqexpr import Engine, Outcome, pointer
from webhook.limits import COMPILE_TIMEOUT, EVAL_TIMEOUT
from webhook.samples import Sample
from webhook.structure import Findings, check_structure
from webhook.workload import as_count, creatable, parent_object

#: At most this many expressions are hunted down one by one after a batch timed out; each
#: costs a full ``timeout``. Past that, checking against further samples stops.
MAX_CULPRITS = 3

TIMED_OUT = "evaluation timed out"
NOT_EVALUATED = "not evaluated"
UNKNOWN = -1  # a component's instance count when its pod-spec path could not be evaluated
NO_SAMPLE = "no sample found: only structure and jq were checked"


@dataclass(frozen=True)
class Report:
    """The outcome of :func:`check` for one definition."""

    source: str
    name: str
    gvk: GVK | None
    errors: list[FieldError]
    warnings: list[str]
    samples: int  # how many samples were checked

    @property
    def ok(self) -> bool:
        return not self.errors

    def lines(self) -> list[str]:
        """The report as ``validate`` prints it: ``OK <name> (<group>/<version> <Kind>): …`` or
        ``INVALID <name>``, then one indented line per error and per warning."""
        name = self.name or self.source
        gvk = f" ({self.gvk})" if self.gvk else ""
        warnings = [w for w in self.warnings if not (self.samples == 0 and w == NO_SAMPLE)]
        if self.errors:
            head = f"INVALID {name}"
        elif self.samples:
            head = f"OK {name}{gvk}: checked against {self.samples} sample(s)"
        else:
            head = f"OK {name}{gvk}: no samples found; checked structure and jq only"
        return [head, *(f"  {e}" for e in self.errors), *(f"  warning: {w}" for w in warnings)]

    def denial(self, name: str) -> str:
        """The report as the validating webhook's denial message: every error, one line."""
        details = "; ".join(str(e) for e in self.errors)
        return f'Karta "{name}" is invalid: {details or "invalid definition"}'


def check(
    doc: Any,
    samples: Sequence[Sample],
    engine: Engine,
    *,
    source: str = "<input>",
    timeout: float = EVAL_TIMEOUT,
    budget: float | None = None,
) -> Report:
    """Check one Karta document; ``samples`` are ``(label, object)`` of its root kind
    (others are skipped with a warning). ``timeout`` bounds each evaluation in the sandbox,
    ``budget`` (seconds, None for none) the whole check. Never raises on bad input."""
    meta = doc.get("metadata") if isinstance(doc, dict) else None
    name = str(meta.get("name") or "") if isinstance(meta, dict) else ""
    try:
        karta = parse(doc, source)
    except DefinitionError as e:
        return Report(source, name, None, list(e.errors), [], 0)
    c = _Checker(karta, engine, timeout, budget)
    try:
        c.run(samples)
    except Exception as e:  # a validator bug must not become a 500 or a traceback
        c.err("", f"internal error while validating: {type(e).__name__}: {e}")
    gvk = karta.gvk if karta.gvk and karta.gvk.version and karta.gvk.kind else None
    return Report(source, karta.name, gvk, c.found.errors, c.found.warnings, c.checked)


def _mode(f: JqField) -> Mode:
    return f.field.mode


class _Checker:
    def __init__(self, karta: Karta, engine: Engine, timeout: float, budget: float | None) -> None:
        self.k = karta
        self.engine = engine
        self.timeout = timeout
        self.budget = budget
        self.deadline = time.monotonic() + budget if budget is not None else None
        self.found = Findings()
        self.checked = 0
        self._seen: set[tuple[str, str]] = set()
        self._slow: set[str] = set()  # expressions known to overrun
        self._culprits = 0
        self.unrunnable: set[str] = set()
        self.written = {c.name for c in karta.components if c.patterns}

    def err(self, path: str, message: str, kind: str | None = None) -> None:
        """Record an error; with ``kind``, only the first of that kind per field (a broken
        path would otherwise repeat itself once per sample)."""
        if kind is not None:
            if (path, kind) in self._seen:
                return
            self._seen.add((path, kind))
        self.found.err(path, message)

    def warn(self, message: str) -> None:
        self.found.warn(message)

    def time_left(self, bound: float) -> float:
        """Seconds the next evaluation may take: ``bound``, or less when the budget ends
        sooner (0 when it has ended)."""
        if self.deadline is None:
            return bound
        return max(0.0, min(bound, self.deadline - time.monotonic()))

    def spent(self) -> Outcome:
        return Outcome([], f"{NOT_EVALUATED}: the validation budget of {self.budget:g}s ran out")

    def run(self, samples: Sequence[Sample]) -> None:
        structure = check_structure(self.k)
        self.found.errors.extend(structure.errors)
        for w in structure.warnings:
            self.warn(w)
        fields = self.jq()
        mine = self.filter_samples(samples)
        if not mine:
            self.warn(NO_SAMPLE)
            return
        self.against_samples(fields, mine)

    # ----------------------------------------------------------------- jq

    def jq(self) -> list[JqField]:
        """Screen and compile every expression; return the fields fit to run."""
        fields = list(jq_fields(self.k))
        screened = []
        for f in fields:
            reasons = jqsyntax.screen(f.expr)
            for reason in reasons:
                self.err(f.path, reason)
            if not reasons:
                screened.append(f)
        exprs = sorted({f.expr for f in screened})
        left = self.time_left(COMPILE_TIMEOUT)
        if left > 0:
            errors = self.engine.compile_errors(exprs, timeout=left)
        else:
            errors = [self.spent().error for _ in exprs]
        compiled = dict(zip(exprs, errors, strict=True))
        good = []
        for f in screened:
            problem = compiled.get(f.expr)
            if problem:
                self.err(f.path, f"does not compile: {problem.removeprefix('compile error: ')}")
            else:
                good.append(f)
        return good

    # ----------------------------------------------------------------- samples

    def filter_samples(self, samples: Sequence[Sample]) -> list[Sample]:
        gvk = self.k.gvk
        if samples and (gvk is None or not gvk.version or not gvk.kind):
            self.warn("samples not used: the root component has no full kind to match them by")
            return []
        mine = []
        for label, obj in samples:
            if not isinstance(obj, Mapping):
                self.warn(f"sample {label}: not an object; skipped")
            elif gvk is not None and GVK.of(obj) != gvk:
                self.warn(f"sample {label}: a {GVK.of(obj)}, not a {gvk}; skipped")
            else:
                mine.append((label, obj))
        return mine

    def against_samples(self, fields: list[JqField], samples: list[Sample]) -> None:
        runnable = {f.path for f in fields}
        self.unrunnable = {
            f.component
            for f in jq_fields(self.k)
            if f.field.primary and f.component is not None and f.path not in runnable
        }
        workload = [f for f in fields if f.subject == "workload"]
        # per write field: samples where it found something / found nothing
        found: dict[str, list[str]] = {f.path: [] for f in workload if f.field.write}
        missing: dict[str, list[str]] = {p: [] for p in found}
        evaluated: dict[str, int] = dict.fromkeys(found, 0)
        suspend_hits: dict[str, int] = {}
        for label, obj in samples:
            if self._culprits >= MAX_CULPRITS:
                self.warn(
                    f"sample {label} and later ones not checked: too many expressions timed out"
                )
                break
            self.checked += 1
            outs = self.evaluate(workload, obj)
            self.one_sample(workload, outs, label, obj, found, missing, evaluated, suspend_hits)
        for f in workload:
            if f.path not in found or not evaluated[f.path]:
                continue
            if not found[f.path]:
                self.err(
                    f.path,
                    f"finds nothing in any of {evaluated[f.path]} sample(s) "
                    f"({', '.join(missing[f.path][:3])}{', …' if len(missing[f.path]) > 3 else ''}); "
                    "is the path misspelt?",
                    "nothing",
                )
            elif missing[f.path]:
                self.warn(
                    f"{f.path}: finds nothing in sample(s) {', '.join(missing[f.path])} "
                    f"(found in {', '.join(found[f.path])})"
                )
        for f in workload:
            if f.role == Role.SUSPEND_ACTION and suspend_hits.get(f.path) == 0:
                self.warn(f"{f.path}: finds no location in any sample; the action does nothing")

    def evaluate(self, fields: list[JqField], obj: Any) -> dict[tuple[str, str], Outcome]:
        """One batch per sample; on a timeout, find the culprit(s) one expression at a time."""
        requests: list[tuple[str, Mode]] = []
        for f in fields:
            req = (f.expr, _mode(f))
            if req not in requests:
                requests.append(req)
        outs: dict[tuple[str, str], Outcome] = {}
        todo = []
        for req in requests:
            if req[0] in self._slow:
                outs[req] = Outcome([], f"{TIMED_OUT} after {self.timeout:g}s")
            else:
                todo.append(req)
        results = self.bounded(todo, obj)
        if any(_timed_out(o) for o in results):
            for i, req in enumerate(todo):
                if not _timed_out(results[i]):
                    continue
                if self._culprits >= MAX_CULPRITS:
                    results[i] = Outcome(
                        [],
                        f"{NOT_EVALUATED}: the time budget went to other expressions that timed out",
                    )
                    continue
                results[i] = self.bounded([req], obj)[0]
                if _timed_out(results[i]):
                    self._slow.add(req[0])
                    self._culprits += 1
        outs.update(zip(todo, results, strict=True))
        return outs

    def bounded(self, batch: list[tuple[str, Mode]], obj: Any) -> list[Outcome]:
        """One engine call within what is left of the budget; nothing runs once it has ended.
        A batch cut short by the budget (not by its own timeout) is not evaluated."""
        left = self.time_left(self.timeout)
        if left <= 0:
            return [self.spent() for _ in batch]
        results = self.engine.evaluate(batch, obj, timeout=left)
        if left < self.timeout:
            results = [self.spent() if _timed_out(o) else o for o in results]
        return results

    def one_sample(
        self,
        fields: list[JqField],
        outs: dict[tuple[str, str], Outcome],
        label: str,
        obj: Mapping[str, Any],
        found: dict[str, list[str]],
        missing: dict[str, list[str]],
        evaluated: dict[str, int],
        suspend_hits: dict[str, int],
    ) -> None:
        # How many locations each component's pod-spec path finds here (UNKNOWN when the path
        # failed or was not run); instance ids and replica counts pair up with them. A
        # component without a pod-spec path pairs its counts with its instance ids.
        counts: dict[str, int] = dict.fromkeys(self.unrunnable, UNKNOWN)
        ids: dict[str | None, int] = {}
        for f in fields:
            if f.role == Role.INSTANCE_ID and f.component not in self.written:
                got = outs[(f.expr, _mode(f))]
                if got.ok:
                    ids[f.component] = len(got.items)
        for f in fields:
            if f.component is None or not f.field.primary:
                continue
            out = outs[(f.expr, _mode(f))]
            if out.error or counts.get(f.component, 0) == UNKNOWN:
                counts[f.component] = UNKNOWN
            else:
                counts[f.component] = max(counts.get(f.component, 0), len(out.items))
        for f in fields:
            out = outs[(f.expr, _mode(f))]
            n = counts.get(f.component, 0) if f.component in self.written else None
            if out.error:
                self.run_error(f, out.error, label, n)
                continue
            if f.field.write:
                evaluated[f.path] += 1
                if out.absent:
                    self.warn(
                        f"{f.path}: iterates over an absent (null) value in sample {label}: "
                        "no location there"
                    )
                root = f.component == self.k.root.name
                hits = [p for p, v in out.items if _exists(f, obj, p, v, root)]
                (found if hits else missing)[f.path].append(label)
                self.contents(f, out.items, label)
            elif f.role == Role.SUSPEND_ACTION:
                suspend_hits[f.path] = suspend_hits.get(f.path, 0) + len(out.items)
            elif f.role == Role.CONDITIONS:
                for v in out.items:
                    if v is not None and not isinstance(v, list):
                        self.err(
                            f.path,
                            f"must yield the conditions list (or null); gave {_short(v)} "
                            f"on sample {label}",
                            "conditions",
                        )
                        break
            elif f.role == Role.INSTANCE_ID:
                self.instance_ids(f, out, n, label)
            elif f.role in _SCALE:
                self.scale(f, out, n, ids.get(f.component), label)

    def run_error(self, f: JqField, error: str, label: str, n: int | None) -> None:
        if error.startswith(TIMED_OUT):
            self.err(f.path, f"{error} on sample {label} (endless or too costly?)", "run")
        elif error.startswith(NOT_EVALUATED):
            self.err(f.path, f"{error} (sample {label})", "run")
        elif f.role == Role.INSTANCE_ID and n == 0:
            # `.spec.m | to_entries[]` fails on an absent map where `.spec.m[]` finds nothing
            self.warn(f"{f.path}: fails on sample {label}, which has no instances: {error}")
        elif f.role in _SCALE:
            # Counts feed describe and GPU totals, not the writes: an unknown count is no reason
            # to refuse every mutation of the kind (upstream's JobSet reads an unset field).
            self.warn(f"{f.path}: fails on sample {label}: {error}; the count is unknown there")
        elif error.startswith("Invalid path expression") and f.field.mode == "paths":
            self.err(
                f.path,
                f"must be a path expression (it is written to), but on sample {label}: {error}",
                "run",
            )
        else:
            self.err(f.path, f"fails on sample {label}: {error}", "run")

    def contents(self, f: JqField, items: list[tuple[Any, Any]], label: str) -> None:
        for p, v in items:
            if v is None:
                continue
            where = f"{pointer(p) or '/'} in sample {label}"
            problem = _shape_problem(f.role, v)
            if problem:
                self.err(f.path, f"{where} is not {problem}: {_short(v)}", "shape")
                return

    def instance_ids(self, f: JqField, out: Outcome, n: int | None, label: str) -> None:
        ids = out.items
        bad = [i for i in ids if not isinstance(i, str) or not i]
        if bad:
            self.err(
                f.path,
                f"must yield non-empty strings; gave {_short(bad[0])} on sample {label}",
                "ids",
            )
            return
        dups = sorted({i for i in ids if ids.count(i) > 1})
        if dups:
            self.err(f.path, f"yields duplicate id(s) {', '.join(dups)} on sample {label}", "ids")
            return
        if n is not None and n != UNKNOWN and len(ids) != n:
            self.err(
                f.path,
                f"yields {len(ids)} id(s) but the component's pod template path finds "
                f"{n} location(s) on sample {label}; they must pair up one to one",
                "ids",
            )

    def scale(self, f: JqField, out: Outcome, n: int | None, ids: int | None, label: str) -> None:
        for v in out.items:
            if isinstance(v, int) and not isinstance(v, bool) and v < 0:
                # Milvus's -1: the replicas are an HPA's to decide; the count is unknown.
                self.warn(
                    f"{f.path}: gave {v} on sample {label}; a negative count is read as unknown"
                )
            elif v is not None and as_count(v) is None:
                self.err(
                    f.path,
                    f"must yield non-negative integers (or numeric strings); gave {_short(v)} "
                    f"on sample {label}",
                    "scale",
                )
                return
        got = len(out.items)
        if n == UNKNOWN:
            return
        if n is None and ids is not None and got > 1:
            if got != ids:
                self.err(
                    f.path,
                    f"yields {got} value(s) but instanceIdPath yields {ids} id(s) on sample "
                    f"{label}; the component has no pod template path, so they must pair up",
                    "scale",
                )
            else:
                self.warn(
                    f"{f.path}: the component has no pod template path; its {got} values pair "
                    f"with its instance ids (sample {label})"
                )
            return
        if n is not None and got not in (0, 1, n):
            self.err(
                f.path,
                f"yields {got} value(s) but the component has {n} instance(s) on sample "
                f"{label}; give one per instance or one for all",
                "scale",
            )
        elif n is None and got > 1:
            self.err(
                f.path,
                f"yields {got} values on sample {label}, but the component has no pod template "
                "path to pair them with; give one value",
                "scale",
            )


_SCALE = (Role.REPLICAS, Role.MIN_REPLICAS, Role.MAX_REPLICAS)


def _exists(f: JqField, obj: Any, path: tuple[Any, ...], value: Any, root: bool) -> bool:
    """A write location counts as found when it has a value, or (for a field the mutation
    creates) when its parent object exists, or for the root's fragments can be created — by
    the rules resolution writes by."""
    if value is not None:
        return True
    if not f.field.created:
        return False
    if parent_object(obj, path) is not None:
        return True
    return root and f.field.pattern == FRAGMENTED and creatable(obj, path) is not None


def _shape_problem(role: Role, v: Any) -> str | None:
    """What a write location's value should be and is not, or None."""
    if role == Role.POD_TEMPLATE_SPEC:
        spec = v.get("spec") if isinstance(v, dict) else None
        if not isinstance(spec, dict) or not isinstance(spec.get("containers"), list):
            return "a pod template (an object with spec.containers)"
    elif role == Role.POD_SPEC:
        if not isinstance(v, dict) or not isinstance(v.get("containers"), list):
            return "a pod spec (an object with containers)"
    elif role in (Role.METADATA, Role.LABELS, Role.ANNOTATIONS):
        if not isinstance(v, dict):
            return "an object"
    elif role == Role.SCHEDULER_NAME and not isinstance(v, str):
        return "a string"
    return None


def _timed_out(o: Outcome) -> bool:
    return bool(o.error and o.error.startswith(TIMED_OUT))


def _short(v: Any, limit: int = 60) -> str:
    text = json.dumps(v, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"
