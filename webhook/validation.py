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
4. with the root kind's structural ``schema`` (a CRD's, or a built-in kind's): every path
   judged against it (:mod:`webhook.schemacheck`: unknown fields with the closest names, the
   shape each field needs); samples defaulted from it as the API server stores them, and a
   sample synthesised from it when there is no real one (findings that depend on the data
   are then warnings, since the data is made up);
5. writes go where pod templates are (:mod:`webhook.writes`): no write location is the root
   object, its ``metadata`` or its ``spec`` (a Pod excepted), and no write location moves when
   the workload's name, namespace, labels or annotations change;
6. bounded: each definition-sample pair gets ``timeout`` seconds, and when a batch overruns,
   the culprit is found by re-running its expressions one at a time; with a ``budget``, the
   whole check ends by then, and whatever was left unevaluated is an error at its field.

Everything is reported as a :class:`FieldError` at its JSON field path, all at once. ``check``
never raises on bad input: the admission webhook and the CLI turn its :class:`Report` into a
denial or into lines of text (:meth:`Report.lines`, :meth:`Report.denial`).
"""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from webhook import jqsyntax, writes
from webhook.builtin_schemas import builtin_schema
from webhook.definitions import JqField, Karta, jq_fields, parse
from webhook.errors import DefinitionError, FieldError, InputError
from webhook.fields import FRAGMENTED, Mode, Role
from webhook.gvk import GVK
from webhook.jqexpr import Engine, Outcome, Path_, plain, pointer
from webhook.jqpath import Index, Iterate, Key, Step
from webhook.limits import COMPILE_TIMEOUT, EVAL_TIMEOUT, MAX_SYNTHESISED_NODES
from webhook.reader import type_name
from webhook.samples import Sample
from webhook.schema_nodes import Schema
from webhook.schema_samples import apply_defaults, synthesize
from webhook.schemacheck import check_fields, check_locations
from webhook.structure import Findings, check_structure
from webhook.workload import as_count, creatable, parent_object

#: At most this many expressions are hunted down one by one after a batch timed out; each
#: costs a full ``timeout``. Past that, checking against further samples stops.
MAX_CULPRITS = 3

TIMED_OUT = "evaluation timed out"
NOT_EVALUATED = "not evaluated"
UNKNOWN = -1  # a component's instance count when its pod-spec path could not be evaluated
NO_SAMPLE = "no sample found: only structure and jq were checked"
#: The label of the sample synthesised from the schema when no real one exists.
SYNTHESISED = "<synthesised from the schema>"
#: Findings that depend on a sample's data: on a synthesised sample they are warnings.
_DATA_KINDS = frozenset({"shape", "conditions", "ids", "scale", "fails"})
#: At most this many real sample labels are named in the report's note.
_NAMED_SAMPLES = 5
_POD = GVK("", "v1", "Pod")


@dataclass(frozen=True)
class Report:
    """The outcome of :func:`check` for one definition."""

    source: str
    name: str
    gvk: GVK | None
    errors: list[FieldError]
    warnings: list[str]
    samples: int  # how many real samples were checked
    #: what was checked how (the schema used, which samples were real, which synthesised)
    notes: list[str] = field(default_factory=list)
    synthesised: int = 0  # how many samples synthesised from the schema were checked

    @property
    def ok(self) -> bool:
        return not self.errors

    def lines(self) -> list[str]:
        """The report as ``validate`` prints it: ``OK <name> (<group>/<version> <Kind>): …`` or
        ``INVALID <name>``, then one indented line per error, per warning and per note."""
        name = self.name or self.source
        gvk = f" ({self.gvk})" if self.gvk else ""
        warnings = [w for w in self.warnings if not (self.samples == 0 and w == NO_SAMPLE)]
        if self.errors:
            head = f"INVALID {name}"
        elif self.samples:
            head = f"OK {name}{gvk}: checked against {self.samples} sample(s)"
        elif self.synthesised:
            head = f"OK {name}{gvk}: no samples found; checked against a sample synthesised from the schema"
        else:
            head = f"OK {name}{gvk}: no samples found; checked structure and jq only"
        return [
            head,
            *(f"  {e}" for e in self.errors),
            *(f"  warning: {w}" for w in warnings),
            *(f"  note: {n}" for n in self.notes),
        ]

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
    schema: Schema | None = None,
) -> Report:
    """Check one Karta document; ``samples`` are ``(label, object)`` of its root kind
    (others are skipped with a warning). ``timeout`` bounds each evaluation in the sandbox,
    ``budget`` (seconds, None for none) the whole check, synthesis and metadata probes
    included. ``schema`` is the root kind's structural schema (a CRD's
    ``openAPIV3Schema`` or :func:`webhook.builtin_schemas.builtin_schema`'s), None when none is
    known. Never raises on bad input."""
    meta = doc.get("metadata") if isinstance(doc, dict) else None
    name = str(meta.get("name") or "") if isinstance(meta, dict) else ""
    try:
        karta = parse(doc, source)
    except DefinitionError as e:
        return Report(source, name, None, list(e.errors), [], 0)
    c = _Checker(karta, engine, timeout, budget, schema)
    try:
        c.run(samples)
    except Exception as e:  # a validator bug must not become a 500 or a traceback
        c.err("", f"internal error while validating: {type(e).__name__}: {e}")
    gvk = karta.gvk if karta.gvk and karta.gvk.version and karta.gvk.kind else None
    real = c.checked - c.synthesised
    return Report(
        source, karta.name, gvk, c.found.errors, c.found.warnings, real, c.notes, c.synthesised
    )


def _mode(f: JqField) -> Mode:
    return f.field.mode


class _Checker:
    def __init__(
        self,
        karta: Karta,
        engine: Engine,
        timeout: float,
        budget: float | None,
        schema: Schema | None = None,
    ) -> None:
        self.k = karta
        self.schema = schema
        full = karta.gvk is not None and bool(karta.gvk.version and karta.gvk.kind)
        self.gvk = karta.gvk if full else None
        self.notes: list[str] = []
        self.synthesised = 0
        self.on_synthetic = False  # the sample being judged is synthesised
        self.deferred: list[JqField] = []  # non-plain paths judged at their locations
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
        path would otherwise repeat itself once per sample). On a synthesised sample, a
        finding that depends on the data (:data:`_DATA_KINDS`) is a warning."""
        if self.on_synthetic and kind in _DATA_KINDS:
            self.warn(f"{path}: {message}" if path else message)
            return
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
        self.plain_writes(fields)
        hints = self.against_schema(fields)
        mine = self.filter_samples(samples)
        if self.schema is not None and mine:
            mine = self.defaulted(mine)
            if mine:
                self.note_real(mine)
        elif self.schema is not None:
            mine = self.synthesise(hints)
        if not mine:
            self.warn(NO_SAMPLE)
            return
        self.against_samples(fields, mine)

    # ----------------------------------------------------------------- schema

    def against_schema(self, fields: list[JqField]) -> tuple[list[str], list[str], list[str]]:
        """Judge the plain paths against the schema; keep the others for the samples. Returns
        the plain template, pod-spec and instance-id paths a synthesised sample should hold."""
        if self.schema is None or self.gvk is None:
            return [], [], []
        live = [f for f in fields if self.used(f)]
        found = check_fields(live, self.schema, self.gvk.kind, lambda: builtin_schema(_POD))
        self.found.errors.extend(found.errors)
        for w in found.warnings:
            self.warn(w)
        self.deferred = found.deferred
        return found.template_paths, found.pod_spec_paths, found.id_paths

    def defaulted(self, samples: list[Sample]) -> list[Sample]:
        """The samples with the schema's defaults applied, as the API server stores objects."""
        assert self.schema is not None
        out: list[Sample] = []
        for i, (label, obj) in enumerate(samples):
            if self.time_left(self.timeout) <= 0:
                self.warn(
                    f"sample {label} and {len(samples) - i - 1} later one(s) not checked: "
                    f"the validation budget of {self.budget:g}s ran out"
                )
                break
            try:
                out.append((label, apply_defaults(self.schema, obj)))
            except InputError as e:
                self.warn(f"sample {label}: {e}; skipped")
        return out

    def note_real(self, samples: list[Sample]) -> None:
        names = [label for label, _ in samples]
        shown = ", ".join(names[:_NAMED_SAMPLES])
        more = f" and {len(names) - _NAMED_SAMPLES} more" if len(names) > _NAMED_SAMPLES else ""
        self.notes.append(f"real sample(s), with the schema's defaults applied: {shown}{more}")

    def synthesise(self, hints: tuple[list[str], list[str], list[str]]) -> list[Sample]:
        """One sample made from the schema: required fields, one entry per list and map,
        defaults, a minimal pod template wherever a plain template path points, and an id
        wherever a plain instance-id path points (ids are often optional fields)."""
        if self.schema is None or self.gvk is None:
            return []
        templates, specs, ids = ([s for s in map(plain, h) if s is not None] for h in hints)
        try:
            obj = synthesize(
                self.schema,
                self.gvk,
                pod_template_paths=templates,
                pod_spec_paths=specs,
                max_nodes=MAX_SYNTHESISED_NODES,
            )
        except InputError as e:
            self.warn(f"no sample could be synthesised from the schema: {e}")
            return []
        for steps in ids:
            _plant_ids(obj, steps)
        self.synthesised = 1
        self.notes.append(
            "no real sample: checked against one synthesised from the schema (required "
            "fields, one entry per list and map, defaults); findings that depend on the data "
            "are warnings"
        )
        return [(SYNTHESISED, obj)]

    def schema_locations(self, outs: Mapping[tuple[str, str], Outcome]) -> None:
        """Judge the non-plain paths at the locations they found on this sample."""
        if self.schema is None or self.gvk is None:
            return
        for f in self.deferred:
            out = outs.get((f.expr, _mode(f)))
            if out is None or not out.ok:
                continue
            found = check_locations(f, self.schema, self.gvk.kind, [p for p, _ in out.items])
            for e in found.errors:
                self.err(e.path, e.message, "schema:" + e.message)
            for w in found.warnings:
                self.warn(w)

    def used(self, f: JqField) -> bool:
        """Whether resolution uses ``f``: not a field of a spec pattern its component does not
        follow (a ``metadataPath`` without ``podSpecPath`` is ignored, so it writes nothing)."""
        if f.field.pattern is None:
            return True
        comp = next((c for c in self.k.components if c.name == f.component), None)
        return comp is None or comp.pattern == f.field.pattern

    # ----------------------------------------------------------------- writes

    def plain_writes(self, fields: list[JqField]) -> None:
        """Plain write paths that end at the root, its metadata or its spec (without samples)."""
        for f in fields:
            if f.field.write and self.used(f):
                problem = writes.misdirected_steps(plain(f.expr), self.gvk)
                if problem:
                    self.err(f.path, problem, "misdirected")

    def write_rules(
        self,
        fields: list[JqField],
        outs: Mapping[tuple[str, str], Outcome],
        label: str,
        obj: Mapping[str, Any],
    ) -> None:
        """On one sample: no write location at the root, its metadata or its spec; and the
        same write locations when the workload's metadata values change."""
        mine = [f for f in fields if f.field.write and self.used(f) and outs[(f.expr, _mode(f))].ok]
        for f in mine:
            for p, _ in outs[(f.expr, _mode(f))].items:
                problem = writes.misdirected(p, self.gvk)
                if problem:
                    self.err(f.path, f"{problem} (sample {label})", "misdirected")
                    break
        probed = [f for f in mine if (f.path, "metadata-dependent") not in self._seen]
        if probed:  # (a field found to depend on one sample is not probed again)
            self.metadata_probes(probed, outs, label, obj)

    def metadata_probes(
        self,
        fields: list[JqField],
        outs: Mapping[tuple[str, str], Outcome],
        label: str,
        obj: Mapping[str, Any],
    ) -> None:
        """Evaluate the write paths on copies of the sample with other metadata values (the
        expressions' own constants among them); refuse locations that move."""
        batch = list(dict.fromkeys((f.expr, _mode(f)) for f in fields))
        base = {req: _locations(outs[req]) for req in batch}
        values, keys = writes.constants(expr for expr, _ in batch)
        for probe in writes.probes(obj, values, keys):
            moved = self.moved(batch, base, probe.obj)
            if moved is None:
                return  # the budget ran out: reported at the fields
            for f in fields:
                req = (f.expr, _mode(f))
                if req in moved:
                    self.depends(f, req, base[req], probe, moved[req], obj, keys, label)
            batch = [req for req in batch if req not in moved]
            fields = [f for f in fields if (f.expr, _mode(f)) not in moved]
            if not batch:
                return

    def moved(
        self,
        batch: list[tuple[str, Mode]],
        base: Mapping[tuple[str, Mode], frozenset[Path_]],
        obj: Mapping[str, Any],
    ) -> dict[tuple[str, Mode], Outcome] | None:
        """The requests of ``batch`` whose locations on ``obj`` differ from ``base`` (their
        outcome there); None when the budget ran out first."""
        results = self.bounded(batch, obj)
        spent = [r for r in results if r.error and r.error.startswith(NOT_EVALUATED)]
        if spent:
            for expr, _ in batch:
                for f in jq_fields(self.k):
                    if f.expr == expr and f.field.write:
                        self.err(
                            f.path, f"{spent[0].error} (metadata independence not checked)", "run"
                        )
            return None
        return {
            req: out
            for req, out in zip(batch, results, strict=True)
            if out.error or _locations(out) != base[req]
        }

    def depends(
        self,
        f: JqField,
        req: tuple[str, Mode],
        before: frozenset[Path_],
        probe: writes.Probe,
        after: Outcome,
        obj: Mapping[str, Any],
        keys: Sequence[str],
        label: str,
    ) -> None:
        """Refuse ``f``: name the metadata field(s) whose change alone moves its locations."""
        culprits: list[tuple[str, Outcome]] = []
        # A probe that overran is not re-run field by field (each would overrun again).
        for name in () if _timed_out(after) else writes.METADATA_FIELDS:
            single = writes.changed(obj, name, probe.value, keys)
            moved = self.moved([req], {req: before}, single.obj)
            if moved is None:
                return
            if req in moved:
                culprits.append((name, moved[req]))
        if culprits:
            which = " and ".join(f".metadata.{name}" for name, _ in culprits)
            name, after = culprits[0]
            change = _change(name, probe.value)
        else:
            which = "the workload's metadata (name, namespace, labels and annotations together)"
            change = f"name, namespace, label and annotation values {json.dumps(probe.value)}"
        now = (
            f"it fails: {after.error}"
            if after.error
            else f"they are {_pointers(_locations(after))}"
        )
        self.err(
            f.path,
            f"write locations depend on {which}: on sample {label} they are "
            f"{_pointers(before)}; with {change}, {now}",
            "metadata-dependent",
        )

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
            self.on_synthetic = label == SYNTHESISED and self.synthesised > 0
            outs = self.evaluate(workload, obj)
            self.one_sample(workload, outs, label, obj, found, missing, evaluated, suspend_hits)
            self.schema_locations(outs)
            self.write_rules(workload, outs, label, obj)
        self.on_synthetic = False
        for f in workload:
            if f.path not in found or not evaluated[f.path]:
                continue
            if not found[f.path] and self.synthesised and missing[f.path] == [SYNTHESISED]:
                self.warn(
                    f"{f.path}: finds nothing in the sample synthesised from the schema; "
                    "check it against a real object"
                )
            elif not found[f.path]:
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
                            f"must yield the conditions list (or null); gave {_shown(v, label)} "
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
            self.err(f.path, f"fails on sample {label}: {error}", "fails")

    def contents(self, f: JqField, items: list[tuple[Any, Any]], label: str) -> None:
        for p, v in items:
            if v is None:
                continue
            where = f"{pointer(p) or '/'} in sample {label}"
            problem = _shape_problem(f.role, v)
            if problem:
                self.err(f.path, f"{where} is not {problem}: {_shown(v, label)}", "shape")
                return

    def instance_ids(self, f: JqField, out: Outcome, n: int | None, label: str) -> None:
        ids = out.items
        bad = [i for i in ids if not isinstance(i, str) or not i]
        if bad:
            self.err(
                f.path,
                f"must yield non-empty strings; gave {_shown(bad[0], label)} on sample {label}",
                "ids",
            )
            return
        dups = sorted(i for i, k in Counter(ids).items() if k > 1)
        if dups:
            shown = "" if _private(label) else " " + ", ".join(dups)
            self.err(f.path, f"yields duplicate id(s){shown} on sample {label}", "ids")
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
                    f"must yield non-negative integers (or numeric strings); gave {_shown(v, label)} "
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


def _plant_ids(obj: Any, steps: Sequence[Step]) -> None:
    """Give every location of a plain path whose parent exists a distinct string id where it
    has none (in a synthesised sample, so that its instance ids are what real objects have)."""
    frontier: list[Any] = [obj]
    planted = 0
    for i, step in enumerate(steps):
        last = i == len(steps) - 1
        following: list[Any] = []
        for cur in frontier:
            if isinstance(step, Key) and isinstance(cur, dict):
                if last and cur.get(step.name) is None:
                    planted += 1
                    cur[step.name] = f"example-{planted}"
                elif not last:
                    following.append(cur.get(step.name))
            elif isinstance(step, Iterate) and not last:
                following.extend(cur if isinstance(cur, list) else _values(cur))
            elif isinstance(step, Index) and not last and isinstance(cur, list):
                following.extend(cur[step.i : step.i + 1])
        frontier = [v for v in following if isinstance(v, dict | list)]


def _values(x: Any) -> list[Any]:
    return list(x.values()) if isinstance(x, dict) else []


def _change(name: str, value: str) -> str:
    """How a probe changed one metadata field, in words."""
    if name in ("labels", "annotations"):
        return f"{name} set to {json.dumps(value)}"
    return f".metadata.{name} {json.dumps(value)}"


def _locations(o: Outcome) -> frozenset[Path_]:
    """An outcome's locations as a set (a slice token, an object, as its JSON text)."""
    if not o.ok:
        return frozenset()
    return frozenset(
        tuple(t if isinstance(t, str | int) else json.dumps(t, sort_keys=True) for t in p)
        for p, _ in o.items
    )


def _pointers(locations: frozenset[Path_], limit: int = 3) -> str:
    if not locations:
        return "none"
    shown = sorted(pointer(p) or "/" for p in locations)
    return ", ".join(shown[:limit]) + (", …" if len(shown) > limit else "")


def _timed_out(o: Outcome) -> bool:
    return bool(o.error and o.error.startswith(TIMED_OUT))


def _private(label: str) -> bool:
    """A live object read from the cluster: whoever may create a Karta must not read its
    values through our messages (the webhook may list objects they cannot)."""
    return label.startswith("cluster:")


def _shown(v: Any, label: str) -> str:
    """``v`` as a message may quote it: its JSON, cut short, or only its type for a live
    object's value."""
    return type_name(v) if _private(label) else _short(v)


def _short(v: Any, limit: int = 60) -> str:
    text = json.dumps(v, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"
