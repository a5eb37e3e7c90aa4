"""Checking a Karta definition before it is used: structure, jq, safety, and sample objects.

Upstream's validator checks structure and screens jq text; it never compiles or runs an
expression. A misspelt path (``.spec.replicatedJob[]``) or a computed one
(``.spec.template | {spec: .spec}``) is accepted, then finds nothing or worse. :func:`check` adds:

* shape (:func:`webhook.karta.model.parse`) and structure (:mod:`webhook.validation.structure`);
* every expression compiled by libjq and passed through the safety screen;
* every workload-side expression run on each sample of the root kind, as used (see
  :data:`webhook.karta.fields.COMPONENT_FIELDS`): write paths are jq paths that find something,
  templates template-shaped, ids and replicas of the right type and count, status expressions run;
* with the root kind's structural ``schema`` (a CRD's, or a built-in kind's): every path judged
  against it (:mod:`webhook.validation.schemafields`: unknown fields with the closest names, the
  shape each field needs); samples defaulted from it as the API server stores them, or one
  synthesised when there is none (findings that depend on its made-up data are warnings);
* writes go where pod templates are (:mod:`webhook.validation.targets`): never the root object,
  its ``metadata`` or its ``spec`` (a Pod excepted); never moved by a change of the workload's
  name, namespace, labels or annotations;
* bounded: ``timeout`` seconds per definition-sample pair, an overrunning batch re-run one
  expression at a time to find the culprit; a ``budget`` ends the whole check by then.

All problems come at once, unevaluated fields included: each a :class:`FieldError` at its path.
``check`` never raises on bad input: the webhook denies with :meth:`Report.denial`, the CLI
prints :meth:`Report.lines`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from webhook.base.errors import DefinitionError, InputError
from webhook.base.gvk import GVK
from webhook.base.limits import COMPILE_TIMEOUT, EVAL_TIMEOUT, MAX_SYNTHESISED_NODES
from webhook.jq import syntax as jqsyntax
from webhook.jq.engine import Engine, Outcome, plain
from webhook.jq.paths import Index, Iterate, Key, Step
from webhook.karta import carry
from webhook.karta.fields import Mode, Role
from webhook.karta.model import JqField, jq_fields, parse
from webhook.karta.samples import Sample
from webhook.schema.builtin import builtin_schema
from webhook.schema.defaulting import apply_defaults
from webhook.schema.nodes import Schema
from webhook.schema.synthesis import synthesize
from webhook.validation.explain import explain
from webhook.validation.report import NO_SAMPLE, Report
from webhook.validation.samplerules import SampleRules
from webhook.validation.schemafields import check_fields, check_implied, check_locations
from webhook.validation.state import MAX_CULPRITS, NOT_EVALUATED, TIMED_OUT, mode, timed_out
from webhook.validation.structure import check_structure
from webhook.validation.writerules import WriteRules

#: The label of the sample synthesised from the schema when no real one exists.
SYNTHESISED = "<synthesised from the schema>"
#: At most this many real sample labels are named in the report's note.
_NAMED_SAMPLES = 5
_POD = GVK("", "v1", "Pod")

__all__ = ["NO_SAMPLE", "Report", "check"]


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
    ``openAPIV3Schema`` or :func:`webhook.schema.builtin.builtin_schema`'s), None when none is
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
    c.found.errors.extend(carry.declined_errors(karta))
    for w in carry.bare(karta):
        c.warn(w)
    if not c.found.errors and (fields := carry.summary(karta)) is not None:
        if c.unfit:
            fields += (
                f"; not in the schema at the implied pod spec (pruned there): {', '.join(c.unfit)}"
            )
        c.notes.append(fields)
    return Report(
        source,
        karta.name,
        gvk,
        c.found.errors,
        c.found.warnings,
        real,
        c.notes,
        c.synthesised,
        c.explained,
    )


class _Checker(SampleRules, WriteRules):
    """The checks of one definition, run in order by :meth:`run`."""

    #: implied pod-spec fields the schema has no place for (set by :meth:`against_schema`)
    unfit: tuple[str, ...] = ()
    #: what each workload-side path matched on each sample (set by :meth:`against_samples`)
    explained: list[str]

    def run(self, samples: Sequence[Sample]) -> None:
        self.explained = []
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

    def against_schema(self, fields: list[JqField]) -> tuple[list[str], list[str], list[str]]:
        """Judge the plain paths against the schema; keep the others for the samples. Returns
        the plain template, pod-spec and instance-id paths a synthesised sample should hold."""
        if self.schema is None or self.gvk is None:
            return [], [], []
        live = [f for f in fields if self.used(f)]
        found = check_fields(live, self.schema, self.gvk.kind, lambda: builtin_schema(_POD))
        self.found.errors.extend(found.errors)
        implied = check_implied(self.k, self.schema, self.gvk.kind)
        for w in implied.warnings:
            self.warn(w)
        self.unfit = tuple(dict.fromkeys(implied.unfit))
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
            out = outs.get((f.expr, mode(f)))
            if out is None or not out.ok:
                continue
            found = check_locations(f, self.schema, self.gvk.kind, [p for p, _ in out.items])
            for e in found.errors:
                self.err(e.path, e.message, "schema:" + e.message)
            for w in found.warnings:
                self.warn(w)

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
            self.explained.extend(explain(workload, outs, label))
            self.one_sample(workload, outs, label, obj, found, missing, evaluated, suspend_hits)
            self.schema_locations(outs)
            self.write_rules(workload, outs, label, obj)
        self.on_synthetic = False
        self.last_segments()
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
            req = (f.expr, mode(f))
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
        if any(timed_out(o) for o in results):
            for i, req in enumerate(todo):
                if not timed_out(results[i]):
                    continue
                if self._culprits >= MAX_CULPRITS:
                    results[i] = Outcome(
                        [],
                        f"{NOT_EVALUATED}: the time budget went to other expressions that timed out",
                    )
                    continue
                results[i] = self.bounded([req], obj)[0]
                if timed_out(results[i]):
                    self._slow.add(req[0])
                    self._culprits += 1
        outs.update(zip(todo, results, strict=True))
        return outs


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
