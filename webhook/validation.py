"""Checking a Karta definition before it is used: structure, jq, safety, and sample objects.

Upstream's validator checks structure and screens jq text; it never compiles an expression and
never runs one against a real object, so a misspelt path (``.spec.replicatedJob[]``) or a
computed one (``.spec.template | {spec: .spec}``) is accepted and then silently finds nothing,
or worse. :func:`check` adds what upstream lacks:

1. shape and structure, with upstream's rules and wording (reference §2.1), each at its field;
2. every expression compiled by libjq and passed through the safety screen;
3. every workload-side expression evaluated on each sample object of the root kind: write
   paths must be jq paths that find something somewhere, templates must look like templates,
   ids and replica counts must have the right type and count, status expressions must run;
4. bounded: each definition-sample pair gets ``timeout`` seconds, and when a batch overruns,
   the culprit is found by re-running its expressions one at a time.

Everything is reported as a :class:`FieldError` at its JSON field path, all at once. ``check``
never raises on bad input: the admission webhook and the CLI turn its :class:`Report` into a
denial or into lines of text.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from webhook import jqexpr
from webhook.definitions import (
    FRAGMENT_FIELDS,
    GVK,
    JqField,
    Karta,
    jq_fields,
    parse,
    read_documents,
    root_gvk,
    yaml_files,
)
from webhook.errors import DefinitionError, FieldError, KartaError, join_path
from webhook.jqexpr import Outcome
from webhook.workload import as_count, parent_object

Sample = tuple[str, Mapping[str, Any]]

#: Roles whose locations the webhook writes to (labels, annotations, schedulerName).
WRITE_ROLES = frozenset(
    {
        "podTemplateSpecPath",
        "podSpecPath",
        "metadataPath",
        "labelsPath",
        "annotationsPath",
        "schedulerNamePath",
    }
)
#: Write roles whose target is created when missing: a location counts when its parent exists.
CREATED_ROLES = frozenset({"metadataPath", "labelsPath", "annotationsPath", "schedulerNamePath"})
SCALE_ROLES = frozenset({"replicasPath", "minReplicasPath", "maxReplicasPath"})
#: At most this many expressions are hunted down one by one after a batch timed out; each
#: costs a full ``timeout``. Past that, checking against further samples stops.
MAX_CULPRITS = 3

TIMED_OUT = "evaluation timed out"
NOT_EVALUATED = "not evaluated"
UNKNOWN = -1  # a component's instance count when its pod-spec path could not be evaluated


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


# --------------------------------------------------------------------------- samples


@dataclass
class SampleIndex:
    """Sample objects by GVK, loaded once from directories (recursively)."""

    by_gvk: dict[GVK, list[Sample]] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @classmethod
    def load(cls, dirs: Sequence[Path]) -> SampleIndex:
        """Every YAML/JSON document under each directory (a file is taken as is); a
        ``kind: List`` contributes its items. Unreadable files are skipped with a warning."""
        index = cls()
        for d in dirs:
            d = Path(d)
            if d.is_dir():
                files = yaml_files(d)
            elif d.is_file():
                files = [d]
            else:
                index.warnings.append(f"{d}: no such directory; no samples from there")
                continue
            for f in files:
                try:
                    docs = read_documents(f)
                except KartaError as e:
                    index.warnings.append(f"sample skipped: {e}")
                    continue
                base = d if d.is_dir() else d.parent
                label = str(f.relative_to(base)) if f.is_relative_to(base) else str(f)
                for source, doc in docs:
                    source = label + source[len(str(f)) :]
                    index._add(source, doc)
        return index

    def _add(self, source: str, doc: Any) -> None:
        if not isinstance(doc, dict):
            return
        if doc.get("kind") == "List" and isinstance(doc.get("items"), list):
            for i, item in enumerate(doc["items"]):
                self._add(f"{source}[{i}]", item)
            return
        gvk = GVK.of(doc)
        if gvk is not None:
            self.by_gvk.setdefault(gvk, []).append((source, doc))

    def for_gvk(self, gvk: GVK) -> list[Sample]:
        return list(self.by_gvk.get(gvk, []))

    def for_definition(self, doc: Any) -> list[Sample]:
        """The samples of a Karta document's root kind, read from the raw document so that
        samples can be chosen before (and whether or not) it parses: none when the root kind
        is not there in full, whatever the document's shape (:func:`check` reports that)."""
        gvk = root_gvk(doc)
        return self.for_gvk(gvk) if gvk is not None else []


# --------------------------------------------------------------------------- check


def check(
    doc: Any,
    samples: Sequence[Sample],
    *,
    source: str = "<input>",
    timeout: float = jqexpr.DEFAULT_TIMEOUT,
) -> Report:
    """Check one Karta document; ``samples`` are ``(label, object)`` of its root kind
    (others are skipped with a warning). Never raises on bad input."""
    meta = doc.get("metadata") if isinstance(doc, dict) else None
    name = str(meta.get("name") or "") if isinstance(meta, dict) else ""
    try:
        karta = parse(doc, source)
    except DefinitionError as e:
        return Report(source, name, None, list(e.errors), [], 0)
    c = _Checker(karta, timeout)
    try:
        c.run(samples)
    except Exception as e:  # a validator bug must not become a 500 or a traceback
        c.errors.append(FieldError("", f"internal error while validating: {type(e).__name__}: {e}"))
    gvk = karta.gvk if karta.gvk and karta.gvk.version and karta.gvk.kind else None
    return Report(source, karta.name, gvk, c.errors, c.warnings, c.checked)


class _Checker:
    def __init__(self, karta: Karta, timeout: float) -> None:
        self.k = karta
        self.timeout = timeout
        self.errors: list[FieldError] = []
        self.warnings: list[str] = []
        self.checked = 0
        self._seen: set[tuple[str, str]] = set()
        self._slow: set[str] = set()  # expressions known to overrun
        self._culprits = 0
        self.unrunnable: set[str] = set()
        self.written = {c.name for c in karta.components if c.spec and c.spec.patterns()}

    def err(self, path: str, message: str, kind: str | None = None) -> None:
        """Record an error; with ``kind``, only the first of that kind per field (a broken
        path would otherwise repeat itself once per sample)."""
        if kind is not None:
            if (path, kind) in self._seen:
                return
            self._seen.add((path, kind))
        self.errors.append(FieldError(path, message))

    def warn(self, message: str) -> None:
        if message not in self.warnings:
            self.warnings.append(message)

    def run(self, samples: Sequence[Sample]) -> None:
        self.structure()
        fields = self.jq()
        mine = self.filter_samples(samples)
        if not mine:
            self.warn("no sample found: only structure and jq were checked")
            return
        self.against_samples(fields, mine)

    # ----------------------------------------------------------------- 1. structure

    def structure(self) -> None:
        k = self.k
        names: dict[str, int] = {}
        names_ok = True
        for comp in k.components:
            path = join_path(comp.field_path, "name")
            if not comp.name:
                self.err(path, "component name is empty")
                names_ok = False
            elif comp.name in names:
                self.err(path, f"component name {comp.name} is not unique")
                names_ok = False
            names[comp.name] = names.get(comp.name, 0) + 1

        root = k.root
        rp = root.field_path
        kind = root.kind
        if (
            kind is None
            or not kind.version
            or not kind.kind
            or (not kind.group and kind.kind != "Pod")
        ):
            self.err(
                join_path(rp, "kind"), "root component must have full kind (group, version, kind)"
            )
        if root.owner_ref:
            self.err(join_path(rp, "ownerRef"), "root component cannot have owner ref")
        if root.status is None:
            self.err(
                join_path(rp, "statusDefinition"), "root component must have status definition"
            )

        owner_ok = True
        if names_ok:  # with ambiguous names, ownership cannot be judged (upstream stops too)
            for comp in k.children:
                op = join_path(comp.field_path, "ownerRef")
                if not comp.owner_ref:
                    self.err(op, f"child component '{comp.name}' has no owner ref")
                    owner_ok = False
                elif comp.owner_ref not in names:
                    self.err(
                        op,
                        f"child component '{comp.name}' has owner ref to non-existing "
                        f"component '{comp.owner_ref}'",
                    )
                    owner_ok = False
            if owner_ok:
                self.cycles()

        for comp in k.components:
            p = comp.field_path
            if comp is not root and comp.status is not None:
                self.warn(f"{join_path(p, 'statusDefinition')}: only the root's status is used")
            if comp.status is not None:
                mp = join_path(join_path(p, "statusDefinition"), "statusMappings")
                for key, matchers in comp.status.mappings.items():
                    for i, m in enumerate(matchers):
                        if m.by_phase is None and not m.by_conditions and m.by_expression is None:
                            self.warn(
                                f"{join_path(join_path(mp, key), i)}: a matcher with no clauses "
                                f"matches every object (always {key})"
                            )
            if comp.spec is not None:
                sp = join_path(p, "specDefinition")
                patterns = comp.spec.patterns()
                if len(patterns) > 1:
                    self.err(
                        sp,
                        f"component {comp.name} has multiple pod spec definitions "
                        f"({', '.join(patterns)}); use one",
                    )
                if comp.spec.metadata_path and not comp.spec.pod_spec_path:
                    self.err(
                        join_path(sp, "metadataPath"),
                        "metadataPath is only allowed with podSpecPath",
                    )
            sel = comp.pod_selector.instance_id_path if comp.pod_selector else None
            if comp.instance_id_path and not sel:
                self.err(
                    join_path(p, "instanceIdPath"),
                    f"component {comp.name} has instance id path but no pod component "
                    "instance selector",
                )
            if sel and not comp.instance_id_path:
                self.err(
                    join_path(p, "podSelector.componentInstanceSelector"),
                    f"component {comp.name} has pod component instance selector but no "
                    "instance id path",
                )
            if comp.suspend is not None:
                self.suspend_values(comp)
        self.pod_groups(set(names))

    def cycles(self) -> None:
        owner = {c.name: c.owner_ref for c in self.k.children}
        reported: set[str] = set()
        for comp in self.k.children:
            seen: list[str] = []
            cur: str | None = comp.name
            while cur is not None and cur in owner and cur not in seen:
                seen.append(cur)
                cur = owner[cur]
            if cur is not None and cur in seen:
                cycle = seen[seen.index(cur) :]
                if reported.isdisjoint(cycle):
                    reported.update(cycle)
                    first = next(c for c in self.k.children if c.name in cycle)
                    self.err(
                        join_path(first.field_path, "ownerRef"),
                        f"ownership cycle detected involving component {first.name} "
                        f"({' -> '.join([*cycle, cur])})",
                    )

    def suspend_values(self, comp: Any) -> None:
        sp = join_path(comp.field_path, "suspendDefinition")
        for group, actions in (
            ("suspendActions", comp.suspend.suspend_actions),
            ("resumeActions", comp.suspend.resume_actions),
        ):
            gp = join_path(sp, group)
            if not actions:
                self.err(gp, "must have at least one action")
            for i, a in enumerate(actions):
                try:
                    json.loads(a.value)
                except ValueError as e:
                    self.err(
                        join_path(join_path(gp, i), "value"),
                        f'must be a JSON value (e.g. true, 0, "text"): {e}',
                    )

    def pod_groups(self, names: set[str]) -> None:
        gang = self.k.instructions.get("gangScheduling")
        base = "spec.optimizationInstructions.gangScheduling"
        if gang is None:
            return
        if not isinstance(gang, dict):
            self.err(base, "must be an object")
            return

        def member(value: Any, path: str) -> None:
            if not isinstance(value, dict):
                self.err(path, "must be an object")
                return
            cn = value.get("componentName")
            cp = join_path(path, "componentName")
            if not isinstance(cn, str) or not cn:
                self.err(cp, "required field is missing")
            elif cn not in names:
                self.err(cp, f"pod-group member component '{cn}' is not defined")

        def members(value: Any, path: str, key: str) -> None:
            """A pod group (``podGroups[i]``, ``podGroup``) and each member of its ``key`` list."""
            items = value.get(key) if isinstance(value, dict) else None
            if not isinstance(value, dict) or (items is not None and not isinstance(items, list)):
                self.err(path, f"must be an object with a {key} list")
                return
            for i, m in enumerate(items or []):
                member(m, join_path(join_path(path, key), i))

        groups = gang.get("podGroups")
        gp = join_path(base, "podGroups")
        if groups is not None and not isinstance(groups, list):
            self.err(gp, "must be a list")
        for gi, g in enumerate(groups if isinstance(groups, list) else []):
            members(g, join_path(gp, gi), "members")
        if gang.get("podGroup") is not None:
            members(gang["podGroup"], join_path(base, "podGroup"), "subGroups")

    # ----------------------------------------------------------------- 2. jq

    def jq(self) -> list[JqField]:
        """Screen and compile every expression; return the fields fit to run."""
        fields = list(jq_fields(self.k))
        screened = []
        for f in fields:
            reasons = jqexpr.screen(f.expr)
            for reason in reasons:
                self.err(f.path, reason)
            if not reasons:
                screened.append(f)
        exprs = sorted({f.expr for f in screened})
        compiled = dict(
            zip(exprs, jqexpr.compile_errors(exprs, timeout=max(self.timeout, 5.0)), strict=True)
        )
        good = []
        for f in screened:
            problem = compiled.get(f.expr)
            if problem:
                self.err(f.path, f"does not compile: {problem.removeprefix('compile error: ')}")
            else:
                good.append(f)
        return good

    # ----------------------------------------------------------------- 3. samples

    def filter_samples(self, samples: Sequence[Sample]) -> list[Sample]:
        gvk = self.k.gvk
        if samples and (gvk is None or not gvk.version or not gvk.kind):
            self.warn("samples not used: the root component has no full kind to match them by")
            return []
        mine = []
        for label, obj in samples:
            if not isinstance(obj, Mapping):
                self.warn(f"sample {label}: not an object; skipped")
            elif self.k.gvk is not None and GVK.of(obj) != self.k.gvk:
                self.warn(f"sample {label}: a {GVK.of(obj)}, not a {self.k.gvk}; skipped")
            else:
                mine.append((label, obj))
        return mine

    def against_samples(self, fields: list[JqField], samples: list[Sample]) -> None:
        runnable = {f.path for f in fields}
        self.unrunnable = {
            f.component
            for f in jq_fields(self.k)
            if f.role in _PRIMARY and f.component is not None and f.path not in runnable
        }
        workload = [f for f in fields if f.subject == "workload"]
        # per write field: samples where it found something / found nothing
        found: dict[str, list[str]] = {f.path: [] for f in workload if f.role in WRITE_ROLES}
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
            if f.role == "suspendAction.path" and suspend_hits.get(f.path) == 0:
                self.warn(f"{f.path}: finds no location in any sample; the action does nothing")

    def evaluate(self, fields: list[JqField], obj: Any) -> dict[tuple[str, str], Outcome]:
        """One batch per sample; on a timeout, find the culprit(s) one expression at a time."""
        requests: list[tuple[str, jqexpr.Mode]] = []
        for f in fields:
            req = (f.expr, _mode(f.role))
            if req not in requests:
                requests.append(req)
        outs: dict[tuple[str, str], Outcome] = {}
        todo = []
        for req in requests:
            if req[0] in self._slow:
                outs[req] = Outcome([], f"{TIMED_OUT} after {self.timeout:g}s")
            else:
                todo.append(req)
        results = jqexpr.evaluate(todo, obj, timeout=self.timeout)
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
                results[i] = jqexpr.evaluate([req], obj, timeout=self.timeout)[0]
                if _timed_out(results[i]):
                    self._slow.add(req[0])
                    self._culprits += 1
        outs.update(zip(todo, results, strict=True))
        return outs

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
        # How many locations each component's pod-spec path finds here (None: unknown, the
        # path failed or was not run: -1); instance ids and replica counts pair up with them.
        counts: dict[str, int] = dict.fromkeys(self.unrunnable, UNKNOWN)
        for f in fields:
            if f.component is None or f.role not in _PRIMARY:
                continue
            out = outs[(f.expr, _mode(f.role))]
            if out.error or counts.get(f.component, 0) == UNKNOWN:
                counts[f.component] = UNKNOWN
            else:
                counts[f.component] = max(counts.get(f.component, 0), len(out.items))
        for f in fields:
            out = outs[(f.expr, _mode(f.role))]
            n = counts.get(f.component, 0) if f.component in self.written else None
            if out.error:
                self.run_error(f, out.error, label, n)
                continue
            if f.role in WRITE_ROLES:
                evaluated[f.path] += 1
                if out.absent:
                    self.warn(
                        f"{f.path}: iterates over an absent (null) value in sample {label}: "
                        "no location there"
                    )
                hits = [p for p, v in out.items if self.exists(f.role, obj, p, v)]
                (found if hits else missing)[f.path].append(label)
                self.contents(f, out.items, label)
            elif f.role == "suspendAction.path":
                suspend_hits[f.path] = suspend_hits.get(f.path, 0) + len(out.items)
            elif f.role == "conditionsDefinition.path":
                for v in out.items:
                    if v is not None and not isinstance(v, list):
                        self.err(
                            f.path,
                            f"must yield the conditions list (or null); gave {_short(v)} "
                            f"on sample {label}",
                            "conditions",
                        )
                        break
            elif f.role == "instanceIdPath":
                self.instance_ids(f, out, n, label)
            elif f.role in SCALE_ROLES:
                self.scale(f, out, n, label)

    def run_error(self, f: JqField, error: str, label: str, n: int | None) -> None:
        if error.startswith(TIMED_OUT):
            self.err(f.path, f"{error} on sample {label} (endless or too costly?)", "run")
        elif error.startswith(NOT_EVALUATED):
            self.err(f.path, f"{error} (sample {label})", "run")
        elif f.role == "instanceIdPath" and n == 0:
            # `.spec.m | to_entries[]` fails on an absent map where `.spec.m[]` finds nothing
            self.warn(f"{f.path}: fails on sample {label}, which has no instances: {error}")
        elif error.startswith("Invalid path expression") and (
            f.role in WRITE_ROLES or f.role == "suspendAction.path"
        ):
            self.err(
                f.path,
                f"must be a path expression (it is written to), but on sample {label}: {error}",
                "run",
            )
        else:
            self.err(f.path, f"fails on sample {label}: {error}", "run")

    @staticmethod
    def exists(role: str, obj: Any, path: tuple[Any, ...], value: Any) -> bool:
        if value is not None:
            return True
        return role in CREATED_ROLES and parent_object(obj, path) is not None

    def contents(self, f: JqField, items: list[tuple[Any, Any]], label: str) -> None:
        for p, v in items:
            if v is None:
                continue
            where = f"{jqexpr.pointer(p) or '/'} in sample {label}"
            if f.role == "podTemplateSpecPath":
                spec = v.get("spec") if isinstance(v, dict) else None
                if not isinstance(spec, dict) or not isinstance(spec.get("containers"), list):
                    self.err(
                        f.path,
                        f"{where} is not a pod template (an object with spec.containers): "
                        f"{_short(v)}",
                        "shape",
                    )
                    return
            elif f.role == "podSpecPath":
                if not isinstance(v, dict) or not isinstance(v.get("containers"), list):
                    self.err(
                        f.path,
                        f"{where} is not a pod spec (an object with containers): {_short(v)}",
                        "shape",
                    )
                    return
            elif f.role in ("metadataPath", "labelsPath", "annotationsPath"):
                if not isinstance(v, dict):
                    self.err(f.path, f"{where} is not an object: {_short(v)}", "shape")
                    return
            elif f.role == "schedulerNamePath" and not isinstance(v, str):
                self.err(f.path, f"{where} is not a string: {_short(v)}", "shape")
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

    def scale(self, f: JqField, out: Outcome, n: int | None, label: str) -> None:
        for v in out.items:
            if v is not None and as_count(v) is None:
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


#: The fields whose locations are a component's instances (metadataPath pairs with podSpecPath).
_PRIMARY = frozenset({"podTemplateSpecPath", "podSpecPath", *FRAGMENT_FIELDS})


def _mode(role: str) -> jqexpr.Mode:
    return "paths" if role in WRITE_ROLES or role == "suspendAction.path" else "values"


def _timed_out(o: Outcome) -> bool:
    return bool(o.error and o.error.startswith(TIMED_OUT))


def _short(v: Any, limit: int = 60) -> str:
    text = json.dumps(v, default=str)
    return text if len(text) <= limit else text[: limit - 1] + "…"
