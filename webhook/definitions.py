"""The Karta model (``run.ai/v1alpha1``, ``kind: Karta``) and loading it from files.

A definition is data from whoever may write a cluster-scoped CRD or a file: it is parsed into
frozen dataclasses with every type problem reported as a :class:`FieldError` (JSON field
names), unknown fields are kept in ``raw`` rather than rejected, and every jq expression is
listed by :func:`jq_fields` so that the safety screen and the validator see all of them.
Semantic rules (ownership, uniqueness, …) live in :mod:`webhook.validation`; this module only
turns a document into a model or says where its shape is wrong.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import yaml

from webhook.errors import DefinitionError, FieldError, InputError, join_path

API_VERSION = "run.ai/v1alpha1"
KIND = "Karta"
GROUP = "run.ai"

FRAGMENT_FIELDS = (
    "schedulerNamePath",
    "labelsPath",
    "annotationsPath",
    "resourcesPath",
    "resourceClaimsPath",
    "podAffinityPath",
    "nodeAffinityPath",
    "containersPath",
    "containerPath",
    "priorityClassNamePath",
    "imagePath",
)

#: Status categories in upstream's evaluation order (first match wins for our single value).
STATUS_ORDER = (
    "resuming",
    "suspending",
    "suspended",
    "running",
    "failed",
    "completed",
    "initializing",
    "degraded",
)
UNDEFINED = "Undefined"


@dataclass(frozen=True, order=True)
class GVK:
    """A group/version/kind; the core group is the empty string."""

    group: str
    version: str
    kind: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> GVK | None:
        """The GVK of a Kubernetes object from its ``apiVersion`` and ``kind``."""
        api_version, kind = obj.get("apiVersion"), obj.get("kind")
        if not isinstance(api_version, str) or not isinstance(kind, str) or not kind:
            return None
        group, _, version = api_version.rpartition("/")
        return cls(group, version, kind)

    def __str__(self) -> str:
        return f"{self.group}/{self.version} {self.kind}"


@dataclass(frozen=True)
class SpecDefinition:
    pod_template_spec_path: str | None = None
    pod_spec_path: str | None = None
    metadata_path: str | None = None
    fragmented: Mapping[str, str] | None = None  # JSON field name -> jq, only the set ones

    def patterns(self) -> list[str]:
        """The spec-definition patterns set (upstream allows at most one)."""
        found = []
        if self.pod_template_spec_path:
            found.append("podTemplateSpecPath")
        if self.pod_spec_path:
            found.append("podSpecPath")
        if self.fragmented is not None:
            found.append("fragmentedPodSpecDefinition")
        return found


@dataclass(frozen=True)
class ScaleDefinition:
    replicas_path: str | None = None
    min_replicas_path: str | None = None
    max_replicas_path: str | None = None


@dataclass(frozen=True)
class ConditionMatcher:
    type: str
    status: str | None = None
    reason: str | None = None


@dataclass(frozen=True)
class StatusMatcher:
    by_phase: str | None = None
    by_conditions: tuple[ConditionMatcher, ...] = ()
    by_expression: str | None = None
    expected_result: str | None = None


@dataclass(frozen=True)
class StatusDefinition:
    phase_path: str | None = None
    conditions_path: str | None = None
    type_field: str = "type"
    status_field: str = "status"
    message_field: str = "message"
    reason_field: str = "reason"
    mappings: Mapping[str, tuple[StatusMatcher, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class Action:
    path: str
    value: str


@dataclass(frozen=True)
class SuspendDefinition:
    suspend_actions: tuple[Action, ...] = ()
    resume_actions: tuple[Action, ...] = ()


@dataclass(frozen=True)
class PodSelector:
    type_key_path: str | None = None
    type_value: str | None = None
    instance_id_path: str | None = None
    replica_key_path: str | None = None


@dataclass(frozen=True)
class Component:
    name: str
    field_path: str  # where it sits in the definition, for error messages
    kind: GVK | None = None
    owner_ref: str | None = None
    spec: SpecDefinition | None = None
    scale: ScaleDefinition | None = None
    status: StatusDefinition | None = None
    suspend: SuspendDefinition | None = None
    instance_id_path: str | None = None
    pod_selector: PodSelector | None = None


@dataclass(frozen=True)
class Karta:
    name: str
    source: str  # file and document, or "cluster"
    root: Component
    children: tuple[Component, ...]
    additional_child_kinds: tuple[GVK, ...]
    instructions: Mapping[str, Any]
    raw: Mapping[str, Any] = field(repr=False, compare=False)

    @property
    def gvk(self) -> GVK | None:
        return self.root.kind

    @property
    def components(self) -> tuple[Component, ...]:
        return (self.root, *self.children)


Subject = Literal["workload", "pod"]


@dataclass(frozen=True)
class JqField:
    """One jq expression of a definition: where it is, what it is for, what it runs on."""

    path: str  # JSON field path, e.g. spec.structureDefinition.rootComponent.instanceIdPath
    expr: str
    subject: Subject
    component: str | None
    role: str  # the JSON field name, e.g. "podTemplateSpecPath", "replicasPath"


# --------------------------------------------------------------------------- parsing


class _Reader:
    """Typed access to a JSON-like document that records, not raises, shape errors."""

    def __init__(self) -> None:
        self.errors: list[FieldError] = []

    def _typed(self, value: Any, path: str, want: type, what: str, required: bool) -> Any:
        """``value`` when it is a ``want``; else None, with an error unless it is an absent
        optional field."""
        if value is None:
            if required:
                self.errors.append(FieldError(path, "required field is missing"))
            return None
        if not isinstance(value, want):
            self.errors.append(FieldError(path, f"must be {what}, got {_type(value)}"))
            return None
        return value

    def obj(self, value: Any, path: str, *, required: bool = False) -> dict[str, Any] | None:
        return self._typed(value, path, dict, "an object", required)

    def list(self, value: Any, path: str) -> list[Any]:
        return self._typed(value, path, list, "a list", False) or []

    def str(self, value: Any, path: str, *, required: bool = False) -> str | None:
        return self._typed(value, path, str, "a string", required)


def _type(value: Any) -> str:
    return {
        dict: "an object",
        list: "a list",
        str: "a string",
        bool: "a boolean",
        int: "a number",
        float: "a number",
        type(None): "null",
    }.get(type(value), type(value).__name__)


def _gvk(r: _Reader, value: Any, path: str) -> GVK | None:
    d = r.obj(value, path)
    if d is None:
        return None
    parts = [r.str(d.get(k), join_path(path, k)) for k in ("group", "version", "kind")]
    group, version, kind = ((p or "") for p in parts)
    return GVK(group, version, kind)


def _spec(r: _Reader, value: Any, path: str) -> SpecDefinition | None:
    d = r.obj(value, path)
    if d is None:
        return None
    fragmented: dict[str, str] | None = None
    fpath = join_path(path, "fragmentedPodSpecDefinition")
    fd = r.obj(d.get("fragmentedPodSpecDefinition"), fpath)
    if fd is not None:
        fragmented = {}
        for name in FRAGMENT_FIELDS:
            expr = r.str(fd.get(name), join_path(fpath, name))
            if expr:
                fragmented[name] = expr
    return SpecDefinition(
        pod_template_spec_path=r.str(
            d.get("podTemplateSpecPath"), join_path(path, "podTemplateSpecPath")
        )
        or None,
        pod_spec_path=r.str(d.get("podSpecPath"), join_path(path, "podSpecPath")) or None,
        metadata_path=r.str(d.get("metadataPath"), join_path(path, "metadataPath")) or None,
        fragmented=fragmented,
    )


def _scale(r: _Reader, value: Any, path: str) -> ScaleDefinition | None:
    d = r.obj(value, path)
    if d is None:
        return None
    names = ("replicasPath", "minReplicasPath", "maxReplicasPath")
    got = [r.str(d.get(n), join_path(path, n)) or None for n in names]
    return ScaleDefinition(*got)


def _matcher(r: _Reader, value: Any, path: str) -> StatusMatcher | None:
    d = r.obj(value, path)
    if d is None:
        return None
    conditions = []
    cpath = join_path(path, "byConditions")
    for i, c in enumerate(r.list(d.get("byConditions"), cpath)):
        ipath = join_path(cpath, i)
        cd = r.obj(c, ipath)
        if cd is None:
            continue
        ctype = r.str(cd.get("type"), join_path(ipath, "type"), required=True) or ""
        conditions.append(
            ConditionMatcher(
                ctype,
                r.str(cd.get("status"), join_path(ipath, "status")),
                r.str(cd.get("reason"), join_path(ipath, "reason")),
            )
        )
    expression = expected = None
    epath = join_path(path, "byExpression")
    ed = r.obj(d.get("byExpression"), epath)
    if ed is not None:
        expression = r.str(ed.get("expression"), join_path(epath, "expression"), required=True)
        expected = ed.get("expectedResult")
        if expected is not None and not isinstance(expected, str):
            # YAML turns `expectedResult: true` into a boolean; the comparison is on jq's
            # `tostring`, so accept scalars the way a user means them.
            expected = json.dumps(expected)
        if expected is None:
            r.errors.append(
                FieldError(join_path(epath, "expectedResult"), "required field is missing")
            )
    return StatusMatcher(
        by_phase=r.str(d.get("byPhase"), join_path(path, "byPhase")),
        by_conditions=tuple(conditions),
        by_expression=expression,
        expected_result=expected,
    )


def _status(r: _Reader, value: Any, path: str) -> StatusDefinition | None:
    d = r.obj(value, path)
    if d is None:
        return None
    phase_path = cond_path = None
    ppath = join_path(path, "phaseDefinition")
    pd = r.obj(d.get("phaseDefinition"), ppath)
    if pd is not None:
        phase_path = r.str(pd.get("path"), join_path(ppath, "path"), required=True)
    cpath = join_path(path, "conditionsDefinition")
    cd = r.obj(d.get("conditionsDefinition"), cpath) or {}
    if cd:
        cond_path = r.str(cd.get("path"), join_path(cpath, "path"), required=True)

    def name(key: str, default: str) -> str:
        return r.str(cd.get(key), join_path(cpath, key)) or default

    mpath = join_path(path, "statusMappings")
    md = r.obj(d.get("statusMappings"), mpath) or {}
    mappings: dict[str, tuple[StatusMatcher, ...]] = {}
    for key, matchers in md.items():
        kpath = join_path(mpath, key)
        if key not in STATUS_ORDER:
            r.errors.append(
                FieldError(kpath, f"unknown status; expected one of {', '.join(STATUS_ORDER)}")
            )
            continue
        parsed = [
            _matcher(r, m, join_path(kpath, i)) for i, m in enumerate(r.list(matchers, kpath))
        ]
        mappings[key] = tuple(m for m in parsed if m is not None)
    return StatusDefinition(
        phase_path=phase_path,
        conditions_path=cond_path,
        type_field=name("typeFieldName", "type"),
        status_field=name("statusFieldName", "status"),
        message_field=name("messageFieldName", "message"),
        reason_field=name("reasonFieldName", "reason"),
        mappings=mappings,
    )


def _actions(r: _Reader, value: Any, path: str) -> tuple[Action, ...]:
    out = []
    for i, a in enumerate(r.list(value, path)):
        ipath = join_path(path, i)
        ad = r.obj(a, ipath)
        if ad is None:
            continue
        apath = r.str(ad.get("path"), join_path(ipath, "path"), required=True) or ""
        raw_value = ad.get("value")
        if raw_value is None:
            r.errors.append(FieldError(join_path(ipath, "value"), "required field is missing"))
            raw_value = ""
        elif not isinstance(raw_value, str):
            # Upstream types `value` as a string holding JSON; YAML users write `value: true`.
            raw_value = json.dumps(raw_value)
        out.append(Action(apath, raw_value))
    return tuple(out)


def _suspend(r: _Reader, value: Any, path: str) -> SuspendDefinition | None:
    d = r.obj(value, path)
    if d is None:
        return None
    return SuspendDefinition(
        _actions(r, d.get("suspendActions"), join_path(path, "suspendActions")),
        _actions(r, d.get("resumeActions"), join_path(path, "resumeActions")),
    )


def _selector(r: _Reader, value: Any, path: str) -> PodSelector | None:
    d = r.obj(value, path)
    if d is None:
        return None
    tpath, ipath, rpath = (
        join_path(path, k)
        for k in ("componentTypeSelector", "componentInstanceSelector", "replicaSelector")
    )
    td = r.obj(d.get("componentTypeSelector"), tpath) or {}
    idd = r.obj(d.get("componentInstanceSelector"), ipath) or {}
    rd = r.obj(d.get("replicaSelector"), rpath) or {}
    type_value = td.get("value")
    if type_value is not None and not isinstance(type_value, str):
        type_value = json.dumps(type_value)
    return PodSelector(
        type_key_path=r.str(td.get("keyPath"), join_path(tpath, "keyPath"), required=bool(td)),
        type_value=type_value,
        instance_id_path=r.str(idd.get("idPath"), join_path(ipath, "idPath"), required=bool(idd)),
        replica_key_path=r.str(rd.get("keyPath"), join_path(rpath, "keyPath"), required=bool(rd)),
    )


def _component(r: _Reader, value: Any, path: str) -> Component | None:
    d = r.obj(value, path, required=True)
    if d is None:
        return None
    return Component(
        name=r.str(d.get("name"), join_path(path, "name"), required=True) or "",
        field_path=path,
        kind=_gvk(r, d.get("kind"), join_path(path, "kind")),
        owner_ref=r.str(d.get("ownerRef"), join_path(path, "ownerRef")),
        spec=_spec(r, d.get("specDefinition"), join_path(path, "specDefinition")),
        scale=_scale(r, d.get("scaleDefinition"), join_path(path, "scaleDefinition")),
        status=_status(r, d.get("statusDefinition"), join_path(path, "statusDefinition")),
        suspend=_suspend(r, d.get("suspendDefinition"), join_path(path, "suspendDefinition")),
        instance_id_path=r.str(d.get("instanceIdPath"), join_path(path, "instanceIdPath")) or None,
        pod_selector=_selector(r, d.get("podSelector"), join_path(path, "podSelector")),
    )


def parse(doc: Any, source: str = "<input>") -> Karta:
    """Parse one Karta document into the model; raise :class:`DefinitionError` listing every
    shape problem. This checks shape only; :func:`load_definition` adds the safety screen."""
    r = _Reader()
    if not isinstance(doc, dict):
        raise DefinitionError(
            source, [FieldError("", f"a Karta must be an object, got {_type(doc)}")]
        )
    if doc.get("apiVersion") != API_VERSION or doc.get("kind") != KIND:
        raise DefinitionError(
            source,
            [
                FieldError(
                    "",
                    f"not a Karta: apiVersion {doc.get('apiVersion')!r}, kind {doc.get('kind')!r} "
                    f"(want {API_VERSION!r}, {KIND!r})",
                )
            ],
        )
    meta = r.obj(doc.get("metadata"), "metadata") or {}
    name = r.str(meta.get("name"), "metadata.name", required=True) or ""
    spec = r.obj(doc.get("spec"), "spec", required=True) or {}
    sd_path = "spec.structureDefinition"
    sd = r.obj(spec.get("structureDefinition"), sd_path, required=True) or {}
    root = _component(r, sd.get("rootComponent"), join_path(sd_path, "rootComponent"))
    cpath = join_path(sd_path, "childComponents")
    children = [
        _component(r, c, join_path(cpath, i))
        for i, c in enumerate(r.list(sd.get("childComponents"), cpath))
    ]
    apath = join_path(sd_path, "additionalChildKinds")
    extra = [
        _gvk(r, g, join_path(apath, i))
        for i, g in enumerate(r.list(sd.get("additionalChildKinds"), apath))
    ]
    instructions = (
        r.obj(spec.get("optimizationInstructions"), "spec.optimizationInstructions") or {}
    )
    if r.errors or root is None:
        raise DefinitionError(source, r.errors)
    return Karta(
        name=name,
        source=source,
        root=root,
        children=tuple(c for c in children if c is not None),
        additional_child_kinds=tuple(g for g in extra if g is not None),
        instructions=instructions,
        raw=doc,
    )


def jq_fields(karta: Karta) -> Iterator[JqField]:
    """Every jq expression in the definition, with its JSON field path."""
    for c in karta.components:
        p = c.field_path

        def f(
            path: str,
            expr: str | None,
            role: str,
            subject: Subject = "workload",
            comp: Component = c,
        ) -> Iterator[JqField]:
            if expr:
                yield JqField(path, expr, subject, comp.name, role)

        yield from f(join_path(p, "instanceIdPath"), c.instance_id_path, "instanceIdPath")
        if c.spec:
            sp = join_path(p, "specDefinition")
            yield from f(
                join_path(sp, "podTemplateSpecPath"),
                c.spec.pod_template_spec_path,
                "podTemplateSpecPath",
            )
            yield from f(join_path(sp, "podSpecPath"), c.spec.pod_spec_path, "podSpecPath")
            yield from f(join_path(sp, "metadataPath"), c.spec.metadata_path, "metadataPath")
            for name, expr in (c.spec.fragmented or {}).items():
                yield from f(
                    join_path(join_path(sp, "fragmentedPodSpecDefinition"), name), expr, name
                )
        if c.scale:
            sp = join_path(p, "scaleDefinition")
            yield from f(join_path(sp, "replicasPath"), c.scale.replicas_path, "replicasPath")
            yield from f(
                join_path(sp, "minReplicasPath"), c.scale.min_replicas_path, "minReplicasPath"
            )
            yield from f(
                join_path(sp, "maxReplicasPath"), c.scale.max_replicas_path, "maxReplicasPath"
            )
        if c.status:
            sp = join_path(p, "statusDefinition")
            yield from f(
                join_path(sp, "phaseDefinition.path"), c.status.phase_path, "phaseDefinition.path"
            )
            yield from f(
                join_path(sp, "conditionsDefinition.path"),
                c.status.conditions_path,
                "conditionsDefinition.path",
            )
            for key, matchers in c.status.mappings.items():
                for i, m in enumerate(matchers):
                    mp = join_path(join_path(join_path(sp, "statusMappings"), key), i)
                    yield from f(
                        join_path(mp, "byExpression.expression"),
                        m.by_expression,
                        "byExpression.expression",
                    )
        if c.suspend:
            sp = join_path(p, "suspendDefinition")
            for group, actions in (
                ("suspendActions", c.suspend.suspend_actions),
                ("resumeActions", c.suspend.resume_actions),
            ):
                for i, a in enumerate(actions):
                    yield from f(
                        join_path(join_path(join_path(sp, group), i), "path"),
                        a.path,
                        "suspendAction.path",
                    )
        if c.pod_selector:
            sp = join_path(p, "podSelector")
            s = c.pod_selector
            yield from f(
                join_path(sp, "componentTypeSelector.keyPath"),
                s.type_key_path,
                "componentTypeSelector.keyPath",
                "pod",
            )
            yield from f(
                join_path(sp, "componentInstanceSelector.idPath"),
                s.instance_id_path,
                "componentInstanceSelector.idPath",
                "pod",
            )
            yield from f(
                join_path(sp, "replicaSelector.keyPath"),
                s.replica_key_path,
                "replicaSelector.keyPath",
                "pod",
            )
    yield from _instruction_fields(karta.instructions)


def _instruction_fields(instructions: Mapping[str, Any]) -> Iterator[JqField]:
    """The pod-side jq of ``gangScheduling.podGroups[].members[]`` (groupByKeyPaths, filters)."""
    gang = instructions.get("gangScheduling")
    if not isinstance(gang, dict):
        return
    base = "spec.optimizationInstructions.gangScheduling.podGroups"
    groups = gang.get("podGroups")
    for gi, group in enumerate(groups if isinstance(groups, list) else []):
        members = group.get("members") if isinstance(group, dict) else None
        for mi, member in enumerate(members if isinstance(members, list) else []):
            if not isinstance(member, dict):
                continue
            mp = f"{base}[{gi}].members[{mi}]"
            for key in ("groupByKeyPaths", "filters"):
                exprs = member.get(key)
                for ei, expr in enumerate(exprs if isinstance(exprs, list) else []):
                    if isinstance(expr, str) and expr:
                        yield JqField(
                            f"{mp}.{key}[{ei}]", expr, "pod", member.get("componentName"), key
                        )


def root_gvk(doc: Any) -> GVK | None:
    """The root component's kind read from a raw Karta document of any shape, before (and
    whether or not) it parses: None unless ``kind.kind`` is a non-empty string; a missing
    group or version reads as "" (the validator reports it). The webhooks use it to pick
    samples, to stamp index labels and to find a second Karta for the same kind."""
    kind: Any = doc
    for key in ("spec", "structureDefinition", "rootComponent", "kind"):
        kind = kind.get(key) if isinstance(kind, Mapping) else None
    if not isinstance(kind, Mapping) or not isinstance(kind.get("kind"), str) or not kind["kind"]:
        return None
    group, version = kind.get("group") or "", kind.get("version") or ""
    if not isinstance(group, str) or not isinstance(version, str):
        return None
    return GVK(group, version, kind["kind"])


# --------------------------------------------------------------------------- loading


def load_definition(doc: Any, source: str) -> Karta:
    """Parse a definition and apply the safety screen to every jq expression in it.

    The screen runs wherever a definition is loaded (files, catalog, cluster): an expression
    that could read the environment or files never reaches an evaluator.
    """
    from webhook import jqexpr  # the jq engine depends on nothing here; keep the edge explicit

    karta = parse(doc, source)
    errors = [
        FieldError(f.path, reason) for f in jq_fields(karta) for reason in jqexpr.screen(f.expr)
    ]
    if errors:
        raise DefinitionError(source, errors)
    return karta


def read_documents(path: Path | str) -> list[tuple[str, Any]]:
    """Every YAML/JSON document in a file (``-`` is standard input), with a source label
    ``file#index`` for error messages. Empty documents are dropped."""
    import sys

    name = str(path)
    try:
        text = sys.stdin.read() if name == "-" else Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"{name}: cannot read: {getattr(e, 'strerror', None) or e}") from e
    label = "<stdin>" if name == "-" else name
    return parse_documents(text, label)


class _JsonLoader(yaml.SafeLoader):
    """YAML as the API server reads it: a document becomes JSON, so values JSON has no type
    for stay text — an unquoted ``2024-01-01`` is the string kubectl would send, not a
    ``date`` that would break every JSON encoder downstream (the jq sandbox, ``-o json``)."""


_JsonLoader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
for _tag in ("tag:yaml.org,2002:timestamp", "tag:yaml.org,2002:binary"):
    _JsonLoader.add_constructor(_tag, yaml.SafeLoader.construct_yaml_str)


def parse_documents(text: str, label: str) -> list[tuple[str, Any]]:
    """Split YAML (a superset of JSON) into documents; errors name the file and line."""
    try:
        docs = list(yaml.load_all(text, Loader=_JsonLoader))  # a SafeLoader subclass
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise InputError(f"{label}: not valid YAML/JSON{where}: {problem}") from e
    out = []
    for i, doc in enumerate(docs):
        if doc is None:
            continue
        source = label if len(docs) == 1 else f"{label}#{i}"
        out.append((source, doc))
    return out


def yaml_files(directory: Path) -> list[Path]:
    """YAML/JSON files under a directory, recursively, sorted for a stable order."""
    return sorted(p for p in directory.rglob("*") if _is_document_file(p))


def _is_document_file(p: Path) -> bool:
    return p.is_file() and p.suffix.lower() in (".yaml", ".yml", ".json")


def load_files(paths: Iterable[Path | str], *, recursive: bool = False) -> list[Karta]:
    """Load every Karta in the given files or directories (directories: top-level files only,
    unless ``recursive``; non-Karta documents are skipped). Raises on the first bad file with
    all its errors, since a half-loaded catalog would silently stop mutating a kind."""
    kartas: list[Karta] = []
    for p in paths:
        p = Path(p)
        if p.is_dir():
            files = yaml_files(p) if recursive else sorted(filter(_is_document_file, p.iterdir()))
        elif p.exists() or str(p) == "-":
            files = [p]
        else:
            raise InputError(f"{p}: no such file or directory")
        for f in files:
            for source, doc in read_documents(f):
                if (
                    isinstance(doc, dict)
                    and doc.get("kind") == KIND
                    and str(doc.get("apiVersion", "")).startswith(GROUP + "/")
                ):
                    kartas.append(load_definition(doc, source))
    return kartas


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
    return Path(__file__).resolve().parent.parent / "catalog"


def samples_dir() -> Path:
    return catalog_dir() / "samples"
