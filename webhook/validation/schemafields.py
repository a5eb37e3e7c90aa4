"""A definition's jq paths judged against the structural schema of its root kind.

Which fields are judged, and as what (:data:`ROLE_SHAPES`):

* every workload-side field evaluated for its locations (``mode == "paths"`` in
  :data:`webhook.karta.fields.COMPONENT_FIELDS`: pod templates, pod specs, metadata, the written
  fragments, suspend actions), plus ``instanceIdPath`` and the scale paths where they are plain
  paths (their values are read; a plain path says where from). All are relative to the root
  object, whichever component they belong to, so all are judged against the root kind's schema;
* pod-side fields (the pod selectors, pod-group keys and filters run on the workload's pods,
  not on the workload) are judged against the Pod schema when they are plain paths; other
  pod-side expressions are not judged.

A plain path is judged without any sample (:func:`check_fields`). Any other path expression is
judged at the locations its evaluation found on each sample (:func:`check_locations`); the
validator evaluates it anyway, so this costs no extra evaluation. Unknown fields and wrong
types are errors at the Karta field path (with the closest existing names); where the schema
stops describing the data it is a warning that says it cannot judge.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from webhook.base.errors import FieldError, join_path
from webhook.jq.paths import parse_plain
from webhook.jq.readpaths import ReadPaths, read_paths
from webhook.karta.carry import REFUSED_ANNOTATION, declined
from webhook.karta.fields import FRAGMENTED, Injectable, Role
from webhook.karta.model import JqField, Karta
from webhook.karta.podspec import implied_fields, implied_pod_spec
from webhook.schema.structural import ExpressionCheck, RawToken, Schema, Shape, check_expression

__all__ = [
    "ROLE_SHAPES",
    "SchemaFindings",
    "check_fields",
    "check_implied",
    "check_locations",
    "judged",
]

#: What a field's locations must be, by role (roles not listed: only that the path exists).
ROLE_SHAPES: Final[Mapping[Role, Shape]] = {
    Role.POD_TEMPLATE_SPEC: Shape.POD_TEMPLATE_SPEC,
    Role.POD_SPEC: Shape.POD_SPEC,
    Role.METADATA: Shape.OBJECT_META,
    Role.LABELS: Shape.STRING_MAP,
    Role.ANNOTATIONS: Shape.STRING_MAP,
    Role.SCHEDULER_NAME: Shape.STRING,
    Role.INSTANCE_ID: Shape.STRING,
    Role.REPLICAS: Shape.INTEGER,
    Role.MIN_REPLICAS: Shape.INTEGER,
    Role.MAX_REPLICAS: Shape.INTEGER,
    Role.PRIORITY_CLASS_NAME: Shape.STRING,
    Role.IMAGE: Shape.STRING,
    Role.CONTAINERS: Shape.LIST,
    Role.RESOURCE_CLAIMS: Shape.LIST,
    Role.CONTAINER: Shape.OBJECT,
    Role.RESOURCES: Shape.OBJECT,
    Role.POD_AFFINITY: Shape.OBJECT,
    Role.NODE_AFFINITY: Shape.OBJECT,
    Role.PHASE: Shape.STRING,
    Role.CONDITIONS: Shape.LIST,
}


def judged(f: JqField) -> bool:
    """Whether ``f`` is judged against the root kind's schema (pod-side fields are judged
    against the Pod schema instead): every workload-side field, written or read, where its
    form says which paths it reads (:func:`webhook.jq.readpaths.read_paths`)."""
    return f.subject == "workload"


@dataclass
class SchemaFindings:
    """What :func:`check_fields` found, and what it left for the samples."""

    errors: list[FieldError] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    #: non-plain path fields, to be judged at their locations on samples
    deferred: list[JqField] = field(default_factory=list)
    #: plain pod-template and pod-spec paths the schema does not refuse (synthesis plants a
    #: template or a pod spec at each, also where the schema cannot say what is there)
    template_paths: list[str] = field(default_factory=list)
    pod_spec_paths: list[str] = field(default_factory=list)
    #: plain ``instanceIdPath`` s the schema does not refuse (synthesis gives them ids)
    id_paths: list[str] = field(default_factory=list)
    #: implied pod-spec fields the schema has no place for (:func:`check_implied`)
    unfit: list[str] = field(default_factory=list)


def check_fields(
    fields: Iterable[JqField],
    schema: Schema,
    kind: str,
    pod_schema: Callable[[], Schema | None],
) -> SchemaFindings:
    """Judge every plain path of ``fields`` (``kind`` names the schema in messages;
    ``pod_schema`` is asked for the Pod schema only when a pod-side plain path needs it)."""
    out = SchemaFindings()
    for f in fields:
        steps = parse_plain(f.expr)
        if f.subject == "pod":
            pods = pod_schema() if steps is not None else None
            if pods is not None:
                result = check_expression(pods, f.expr)
                _record(f, result, "the Pod schema; it runs on the workload's pods", out)
            continue
        if not judged(f):
            continue
        if steps is not None and f.role not in _STATUS:
            result = check_expression(schema, f.expr, shape=ROLE_SHAPES.get(f.role))
            _record(f, result, f"the {kind} schema", out)
            if not result.outcome.is_error:
                _hint(f, f.expr, out)
            continue
        read = read_paths(f.expr)
        if read is None:
            if f.field.mode == "paths":
                out.deferred.append(f)
            continue
        _guarded(f, read, schema, f"the {kind} schema", out)
    return out


def _hint(f: JqField, path: str, out: SchemaFindings) -> None:
    """Keep a plain path a synthesised sample should hold (a template, a pod spec, an id)."""
    if f.role is Role.POD_TEMPLATE_SPEC:
        out.template_paths.append(path)
    elif f.role is Role.POD_SPEC:
        out.pod_spec_paths.append(path)
    elif f.role is Role.INSTANCE_ID:
        out.id_paths.append(path)


def _guarded(f: JqField, read: ReadPaths, schema: Schema, whose: str, out: SchemaFindings) -> None:
    """Judge the plain paths of a guarded form (``P // empty | Q``, ``if P == null then empty
    else Q end``, ...): what it yields must exist and have the field's shape, what it only
    reads (``P``) must exist. Only errors are recorded: where the schema cannot judge, the
    samples still do. A write at the object itself, its metadata or its spec is the write
    rules' to judge (:mod:`webhook.validation.targets`), with their own message."""
    for path in read.reads:
        message = _path_error(check_expression(schema, path))
        if message:
            out.errors.append(FieldError(f.path, f"{message} ({whose})"))
    # A status path is required on the root (upstream's rule), so a definition of a kind
    # without conditions (or without a status schema) names one that is never there,
    # usually with a default (``(.status.conditions // [])``): a field the schema lacks is no
    # mistake there, unless the schema has one of a close name (a typo). Wrong types are.
    lenient = f.role in _STATUS
    for path in read.results:
        if f.field.write and path in _ROOT_PLACES:
            continue
        message = _path_error(check_expression(schema, path, shape=ROLE_SHAPES.get(f.role)))
        if lenient and "has no field" in message and "did you mean" not in message:
            continue
        if message:
            out.errors.append(FieldError(f.path, f"{message} ({whose})"))
        else:
            _hint(f, path, out)


_STATUS: Final = frozenset({Role.PHASE, Role.CONDITIONS})
#: Where the write rules refuse to write (:func:`webhook.validation.targets.misdirected`).
_ROOT_PLACES: Final = frozenset({".", ".metadata", ".spec"})


def _path_error(result: ExpressionCheck) -> str:
    errors = result.errors
    return errors[0] if errors else ""


def check_locations(
    f: JqField, schema: Schema, kind: str, paths: Sequence[Sequence[RawToken]]
) -> SchemaFindings:
    """Judge the locations a non-plain path expression found on one sample."""
    out = SchemaFindings()
    if not paths:
        return out
    result = check_expression(
        schema,
        f.expr,
        shape=ROLE_SHAPES.get(f.role),
        sample=paths,
        locate=lambda _expr, found: found,
    )
    _record(f, result, f"the {kind} schema", out)
    return out


def _record(f: JqField, result: ExpressionCheck, whose: str, out: SchemaFindings) -> None:
    for message in result.errors:
        out.errors.append(FieldError(f.path, f"{message} ({whose})"))
    if result.locations:  # (without locations, ``warnings`` is why nothing was judged)
        for message in result.warnings:
            out.warnings.append(f"{f.path}: {message} ({whose})")


def implied_shape(inj: Injectable) -> Shape | None:
    """What an implied pod-spec field must be, from its rule schema (a string, a map of
    strings; others, such as tolerations: that the object has the field)."""
    schema = inj.schema
    if schema.get("type") == "string":
        return Shape.STRING
    if schema.get("type") == "object" and schema.get("additionalProperties") == {"type": "string"}:
        return Shape.STRING_MAP
    return None


def check_implied(karta: Karta, schema: Schema, kind: str) -> SchemaFindings:
    """Judge the pod-spec fields each fragmented component's implied pod spec gets
    (:func:`webhook.karta.podspec.implied_fields`: ``nodeSelector``, ``tolerations``, …)
    against the root kind's schema. Where the schema has no such field at that object (or one
    of another type) the inference does not fit this schema: a warning naming the field and
    the object (the API server would prune what is written there), with the way to leave it
    out: the refused-pod-fields annotation. Never an error: an inference the author did not
    write must not cost the whole definition (in a cluster whose CRD is older, every field of
    the kind). Only plain objects are judged (the others depend on the data)."""
    out = SchemaFindings()
    left_out = declined(karta)
    for c in karta.components:
        implied = implied_pod_spec(c)
        if implied.expression is None:
            continue
        where = join_path(join_path(c.field_path, "specDefinition"), FRAGMENTED)
        for inj in implied_fields(c):
            if inj.key in left_out or inj.in_pod_spec is None:
                continue
            base = "" if implied.expression == "." else implied.expression
            expr = base + "".join("." + k for k in inj.in_pod_spec)
            if parse_plain(expr) is None:
                continue
            result = check_expression(schema, expr, shape=implied_shape(inj))
            for message in result.errors:
                out.warnings.append(
                    f"{where}: its paths imply the pod spec {implied.expression!r}, where "
                    f"{inj.key} would be written, but {message} (the {kind} schema): the API "
                    f"server would prune it; name {inj.key} in the annotation "
                    f"{REFUSED_ANNOTATION} to leave it out"
                )
                out.unfit.append(inj.key)
    return out
