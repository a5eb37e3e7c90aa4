"""The Karta model (``run.ai/v1alpha1``, ``kind: Karta``) and parsing a document into it;
loading definitions from files is :mod:`webhook.karta.loading`.

A definition is data from whoever may write a cluster-scoped CRD or a file: it is parsed into
frozen dataclasses with every type problem reported as a :class:`FieldError` (JSON field
names), unknown fields are kept in ``raw`` rather than rejected, and every jq expression is
listed by :func:`jq_fields` so that the safety screen and the validator see all of them. Where
each jq field sits is not spelled out here but read from :data:`webhook.karta.fields.COMPONENT_FIELDS`.
Semantic rules (ownership, uniqueness, …) live in :mod:`webhook.validation.structure`; this module only
turns a document into a model or says where its shape is wrong.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from webhook.base.derived import Derives
from webhook.base.errors import DefinitionError, FieldError, join_path
from webhook.base.gvk import GVK
from webhook.base.reader import Reader, type_name
from webhook.karta.fields import (
    BY_ROLE,
    COMPONENT_FIELDS,
    FRAGMENTED,
    NESTED_FIELDS,
    POD_SPEC,
    TEMPLATE,
    Field,
    Role,
    Subject,
)
from webhook.karta.instructions import Instructions, parse_instructions
from webhook.karta.statusmodel import StatusDefinition, parse_status

GROUP = "run.ai"
VERSION = "v1alpha1"
KIND = "Karta"
API_VERSION = f"{GROUP}/{VERSION}"


def is_karta_kind(gvk: GVK | None) -> bool:
    """A Karta of any version (``run.ai`` ``Karta``): what the Karta webhooks and the catalog
    loader take; :func:`parse` then reads ``v1alpha1`` only."""
    return gvk is not None and gvk.group == GROUP and gvk.kind == KIND


def is_karta(doc: Any) -> bool:
    """A document meant as a Karta definition (any version)."""
    return is_karta_kind(GVK.of(doc))


def not_a_karta(doc: Any) -> str:
    """Why ``doc`` is not a Karta this version reads, in one phrase."""
    if not isinstance(doc, Mapping):
        return f"a {type_name(doc)}"
    return (
        f"apiVersion {doc.get('apiVersion')!r}, kind {doc.get('kind')!r}; "
        f"want {API_VERSION}, {KIND}"
    )


# --------------------------------------------------------------------------- the model


@dataclass(frozen=True)
class Action:
    path: str
    value: str


@dataclass(frozen=True)
class SuspendDefinition:
    suspend_actions: tuple[Action, ...] = ()
    resume_actions: tuple[Action, ...] = ()

    def groups(self) -> tuple[tuple[str, tuple[Action, ...]], ...]:
        return (("suspendActions", self.suspend_actions), ("resumeActions", self.resume_actions))


@dataclass(frozen=True)
class Component(Derives):
    name: str
    field_path: str  # where it sits in the definition, for error messages
    kind: GVK | None = None
    owner_ref: str | None = None
    #: the jq of every :data:`COMPONENT_FIELDS` field that is set (non-empty)
    exprs: Mapping[Role, str] = field(default_factory=dict)
    #: the ``specDefinition`` patterns given (upstream allows one)
    patterns: tuple[str, ...] = ()
    status: StatusDefinition | None = None
    suspend: SuspendDefinition | None = None
    #: ``podSelector.componentTypeSelector.value``
    type_value: str | None = None
    #: ``podSelector.componentTypeSelector.matchLabels`` (None: not given)
    type_labels: Mapping[str, str] | None = None
    #: whether ``podSelector.componentTypeSelector`` is given at all
    type_selector: bool = False
    #: what resolution derives from the component once (its fields to evaluate, by need)
    derived: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)

    def expr(self, role: Role) -> str | None:
        return self.exprs.get(role)

    @property
    def pattern(self) -> str | None:
        """The spec pattern resolution follows: the first of template, pod spec, fragments."""
        return self.patterns[0] if self.patterns else None


@dataclass(frozen=True)
class Karta:
    name: str
    source: str  # file and document, or "cluster"
    root: Component
    children: tuple[Component, ...]
    additional_child_kinds: tuple[GVK, ...]
    instructions: Instructions
    raw: Mapping[str, Any] = field(repr=False, compare=False)

    @property
    def gvk(self) -> GVK | None:
        return self.root.kind

    @property
    def components(self) -> tuple[Component, ...]:
        return (self.root, *self.children)


@dataclass(frozen=True)
class JqField:
    """One jq expression of a definition: where it is, what it is for, what it runs on."""

    path: str  # JSON field path, e.g. spec.structureDefinition.rootComponent.instanceIdPath
    expr: str
    component: str | None
    field: Field

    @property
    def role(self) -> Role:
        return self.field.role

    @property
    def subject(self) -> Subject:
        return self.field.subject


# --------------------------------------------------------------------------- parsing


def _gvk(r: Reader, value: Any, path: str) -> GVK | None:
    d = r.obj(value, path)
    if d is None:
        return None
    parts = [r.string(d.get(k), join_path(path, k)) for k in ("group", "version", "kind")]
    group, version, kind = ((p or "") for p in parts)
    return GVK(group, version, kind)


def _exprs(r: Reader, d: Mapping[str, Any], path: str) -> dict[Role, str]:
    """Every :data:`COMPONENT_FIELDS` field of a component, read at its place."""
    out: dict[Role, str] = {}
    for f in COMPONENT_FIELDS:
        holder = r.at(d, f.at[:-1], path)
        if holder is None:
            continue
        expr = r.string(holder.get(f.at[-1]), join_path(path, f.name), required=f.required)
        if expr:
            out[f.role] = expr
    return out


def _patterns(
    r: Reader, d: Mapping[str, Any], path: str, exprs: Mapping[Role, str]
) -> tuple[str, ...]:
    spec = r.at(d, ("specDefinition",), path) or {}
    found = [
        p
        for p, role in ((TEMPLATE, Role.POD_TEMPLATE_SPEC), (POD_SPEC, Role.POD_SPEC))
        if role in exprs
    ]
    if isinstance(spec.get(FRAGMENTED), dict):
        found.append(FRAGMENTED)
    return tuple(found)


def _actions(r: Reader, value: Any, path: str) -> tuple[Action, ...]:
    out = []
    for i, a in enumerate(r.items(value, path)):
        ipath = join_path(path, i)
        ad = r.obj(a, ipath)
        if ad is None:
            continue
        apath = r.string(ad.get("path"), join_path(ipath, "path"), required=True) or ""
        # Upstream types `value` as a string holding JSON; YAML users write `value: true`.
        vpath = join_path(ipath, "value")
        raw_value = r.scalar_text(ad.get("value"), vpath)
        if ad.get("value") is None:
            r.missing(vpath)
        out.append(Action(apath, raw_value or ""))
    return tuple(out)


def _suspend(r: Reader, value: Any, path: str) -> SuspendDefinition | None:
    d = r.obj(value, path)
    if d is None:
        return None
    return SuspendDefinition(
        _actions(r, d.get("suspendActions"), join_path(path, "suspendActions")),
        _actions(r, d.get("resumeActions"), join_path(path, "resumeActions")),
    )


def _labels(r: Reader, value: Any, path: str) -> dict[str, str] | None:
    """A map of label keys to values (``matchLabels``); YAML scalars read as the text meant."""
    d = r.obj(value, path)
    if d is None:
        return None
    out: dict[str, str] = {}
    for k, v in d.items():
        text = r.scalar_text(v, join_path(path, k))
        if v is None:
            r.error(join_path(path, k), "must be a string, got null")
        elif text is not None:
            out[k] = text
    return out


def _component(r: Reader, value: Any, path: str) -> Component | None:
    d = r.obj(value, path, required=True)
    if d is None:
        return None
    exprs = _exprs(r, d, path)
    given = r.at(d, ("podSelector", "componentTypeSelector"), path)
    selector = given or {}
    spath = join_path(path, "podSelector.componentTypeSelector")
    return Component(
        name=r.string(d.get("name"), join_path(path, "name"), required=True) or "",
        field_path=path,
        kind=_gvk(r, d.get("kind"), join_path(path, "kind")),
        owner_ref=r.string(d.get("ownerRef"), join_path(path, "ownerRef")),
        exprs=exprs,
        patterns=_patterns(r, d, path, exprs),
        status=parse_status(r, d.get("statusDefinition"), join_path(path, "statusDefinition")),
        suspend=_suspend(r, d.get("suspendDefinition"), join_path(path, "suspendDefinition")),
        type_value=r.scalar_text(selector.get("value"), join_path(spath, "value")),
        type_labels=_labels(r, selector.get("matchLabels"), join_path(spath, "matchLabels")),
        type_selector=given is not None,
    )


def parse(doc: Any, source: str = "<input>") -> Karta:
    """Parse one Karta document into the model; raise :class:`DefinitionError` listing every
    shape problem. This checks shape only; :func:`~webhook.karta.loading.load_definition` adds the safety screen."""
    r = Reader()
    if not isinstance(doc, dict):
        raise DefinitionError(
            source, [FieldError("", f"a Karta must be an object, got {type_name(doc)}")]
        )
    if doc.get("apiVersion") != API_VERSION or doc.get("kind") != KIND:
        raise DefinitionError(source, [FieldError("", f"not a Karta: {not_a_karta(doc)}")])
    meta = r.obj(doc.get("metadata"), "metadata") or {}
    name = r.string(meta.get("name"), "metadata.name", required=True) or ""
    spec = r.obj(doc.get("spec"), "spec", required=True) or {}
    sd_path = "spec.structureDefinition"
    sd = r.obj(spec.get("structureDefinition"), sd_path, required=True) or {}
    root = _component(r, sd.get("rootComponent"), join_path(sd_path, "rootComponent"))
    cpath = join_path(sd_path, "childComponents")
    children = [
        _component(r, c, join_path(cpath, i))
        for i, c in enumerate(r.items(sd.get("childComponents"), cpath))
    ]
    apath = join_path(sd_path, "additionalChildKinds")
    extra = [
        _gvk(r, g, join_path(apath, i))
        for i, g in enumerate(r.items(sd.get("additionalChildKinds"), apath))
    ]
    instructions = parse_instructions(
        r, spec.get("optimizationInstructions"), "spec.optimizationInstructions"
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
    """Every jq expression in the definition, with its JSON field path: each component's
    :data:`COMPONENT_FIELDS` in table order, its status matchers' and suspend actions'
    expressions, then the pod-group instructions'."""
    for c in karta.components:
        for f in COMPONENT_FIELDS:
            expr = c.exprs.get(f.role)
            if expr:
                yield JqField(join_path(c.field_path, f.name), expr, c.name, f)
        if c.status is not None:
            for matchers in c.status.mappings.values():
                for m in matchers:
                    if m.by_expression:
                        yield JqField(
                            join_path(m.field_path, "byExpression.expression"),
                            m.by_expression,
                            c.name,
                            NESTED_FIELDS[Role.STATUS_EXPRESSION],
                        )
        if c.suspend is not None:
            sp = join_path(c.field_path, "suspendDefinition")
            for group, actions in c.suspend.groups():
                for i, a in enumerate(actions):
                    if a.path:
                        yield JqField(
                            join_path(join_path(join_path(sp, group), i), "path"),
                            a.path,
                            c.name,
                            NESTED_FIELDS[Role.SUSPEND_ACTION],
                        )
    for path, expr, component, role in karta.instructions.jq():
        yield JqField(path, expr, component, BY_ROLE[role])


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
