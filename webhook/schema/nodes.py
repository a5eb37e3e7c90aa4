"""Reading one node of a structural schema: its kind, fields, items, and how to say what it is.

A node is a mapping in the form of a CRD's ``openAPIV3Schema``. :func:`view` condenses one node
(with its ``allOf``/``anyOf``/``oneOf`` members) into a :class:`View`; :func:`describe` says
what it is in a few words ("an array of objects", "a map of strings"). Malformed parts (a
``properties`` that is a list, a ``type`` that is a number) are ignored, as if the schema said
nothing there: these functions never raise on a bad schema.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

__all__ = [
    "Outcome",
    "Schema",
    "Shape",
    "ShapeCheck",
    "View",
    "check_shape",
    "describe",
    "view",
]

#: A schema node, as a CRD carries it (read-only here).
Schema = Mapping[str, Any]

SCALAR_KINDS: Final = frozenset({"string", "integer", "number", "boolean"})
_COMBINATORS: Final = ("allOf", "anyOf", "oneOf")
#: ``allOf`` inside ``anyOf`` inside ... beyond this depth is ignored.
_MAX_COMBINATOR_DEPTH: Final = 4
#: ``describe`` names at most this many fields, and nests at most this deep.
_MAX_NAMED_FIELDS: Final = 6
_MAX_DESCRIBE_DEPTH: Final = 4


class Outcome(enum.Enum):
    """The verdict on a path or a shape, best first."""

    OK = "ok"
    CANNOT_JUDGE = "cannot-judge"  # a warning: the schema does not describe the data there
    UNKNOWN = "unknown"  # an error: no such field
    WRONG_TYPE = "wrong-type"  # an error: the step or shape does not fit the node's type

    @property
    def is_error(self) -> bool:
        return self in (Outcome.UNKNOWN, Outcome.WRONG_TYPE)

    @property
    def rank(self) -> int:
        return _RANK[self]


_RANK: Final = {Outcome.OK: 0, Outcome.CANNOT_JUDGE: 1, Outcome.UNKNOWN: 2, Outcome.WRONG_TYPE: 2}


@dataclass(frozen=True, slots=True)
class View:
    """What one schema node says.

    ``kind`` is ``object``, ``array``, ``string``, ``integer``, ``number``, ``boolean``,
    ``int-or-string``, ``any`` (untyped: the schema does not say) or ``ambiguous`` (combinator
    members of different types). ``additional`` is the ``additionalProperties`` value (a node,
    True, or None); ``open`` means fields beyond ``properties`` are kept unjudged.
    """

    node: Schema
    kind: str
    properties: Mapping[str, Schema] = field(default_factory=dict)
    additional: Schema | bool | None = None
    items: Schema | None = None
    preserve: bool = False
    embedded: bool = False
    nullable: bool = False
    required: tuple[str, ...] = ()
    enum: tuple[Any, ...] = ()

    @property
    def open(self) -> bool:
        return self.preserve or self.additional is True


def view(node: Any, *, embedded_root: bool = False) -> View:
    """Condense ``node`` and its combinator members; ``embedded_root`` marks a resource root."""
    own: Schema = node if isinstance(node, Mapping) else {}
    members = [own]
    _collect_members(own, members, 0)
    properties: dict[str, Schema] = {}
    additional: Schema | bool | None = None
    items: Schema | None = None
    required: list[str] = []
    for m in members:
        props = m.get("properties")
        if isinstance(props, Mapping):
            for k, v in props.items():
                if isinstance(k, str) and isinstance(v, Mapping) and k not in properties:
                    properties[k] = v
        ap = m.get("additionalProperties")
        if additional is None and (isinstance(ap, Mapping) or ap is True):
            additional = ap
        it = m.get("items")
        if items is None and isinstance(it, Mapping):
            items = it
        req = m.get("required")
        if isinstance(req, list):
            required.extend(r for r in req if isinstance(r, str) and r not in required)
    own_type = own.get("type")
    if isinstance(own_type, str):
        types = [own_type]
    else:  # members' types only say something when the node itself does not
        found = (m.get("type") for m in members[1:])
        types = list(dict.fromkeys(t for t in found if isinstance(t, str)))
    preserve = any(m.get("x-kubernetes-preserve-unknown-fields") is True for m in members)
    embedded = embedded_root or own.get("x-kubernetes-embedded-resource") is True
    enum = own.get("enum")
    # A resource root is an object because its schema says so, not because it is a root.
    kind = _kind(own, types, properties, additional, items, embedded and not embedded_root)
    return View(
        node=own,
        kind=kind,
        properties=properties,
        additional=additional,
        items=items,
        preserve=preserve,
        embedded=embedded,
        nullable=own.get("nullable") is True,
        required=tuple(required),
        enum=tuple(enum) if isinstance(enum, list) else (),
    )


def _collect_members(node: Schema, out: list[Schema], depth: int) -> None:
    if depth >= _MAX_COMBINATOR_DEPTH:
        return
    for key in _COMBINATORS:
        group = node.get(key)
        if not isinstance(group, list):
            continue
        for member in group:
            if isinstance(member, Mapping) and all(member is not o for o in out):
                out.append(member)
                _collect_members(member, out, depth + 1)


def _kind(
    own: Schema,
    types: list[str],
    properties: Mapping[str, Schema],
    additional: Schema | bool | None,
    items: Schema | None,
    embedded: bool,
) -> str:
    if own.get("x-kubernetes-int-or-string") is True:
        return "int-or-string"
    if len(types) > 1:
        return "int-or-string" if set(types) == {"integer", "string"} else "ambiguous"
    t = types[0] if types else None
    if t in SCALAR_KINDS or t in ("array", "object"):
        return str(t)
    if t is not None:
        return "any"  # a type name structural schemas do not have
    if items is not None:
        return "array"
    if properties or additional is not None or embedded:
        return "object"
    return "any"


def describe(node: Any, _depth: int = 0) -> str:
    """A few words saying what ``node`` is: ``an array of objects``, ``a map of strings``..."""
    v = view(node)
    if v.kind == "string":
        if v.enum and len(v.enum) <= 4:
            return "a string (one of " + ", ".join(str(e) for e in v.enum) + ")"
        return "a string"
    if v.kind in ("integer", "number", "boolean"):
        return ("an " if v.kind == "integer" else "a ") + v.kind
    if v.kind == "int-or-string":
        return "an integer or a string"
    if v.kind == "ambiguous":
        return "a value of one of several types"
    if v.kind == "array":
        if v.items is None or _depth >= _MAX_DESCRIBE_DEPTH:
            return "an array"
        return "an array of " + _plural(v.items, _depth + 1)
    if v.kind == "object":
        if isinstance(v.additional, Mapping):
            if _depth >= _MAX_DESCRIBE_DEPTH:
                return "a map"
            return "a map of " + _plural(v.additional, _depth + 1)
        if v.properties:
            names = list(v.properties)
            text = "an object with fields " + ", ".join(names[:_MAX_NAMED_FIELDS])
            if len(names) > _MAX_NAMED_FIELDS:
                text += ", ..."
            return text + (" and any others" if v.open else "")
        if v.open:
            return "an object with any fields" + _preserve_note(v)
        return "an object with no declared fields"
    return "a value the schema does not describe" + _preserve_note(v)


def _preserve_note(v: View) -> str:
    return " (x-kubernetes-preserve-unknown-fields)" if v.preserve else ""


def _plural(node: Schema, depth: int) -> str:
    v = view(node)
    if v.kind in ("string", "integer", "number", "boolean"):
        return v.kind + "s"
    if v.kind == "int-or-string":
        return "integers or strings"
    if v.kind == "array":
        return "arrays"
    if v.kind == "object":
        if isinstance(v.additional, Mapping):
            if depth >= _MAX_DESCRIBE_DEPTH:
                return "maps"
            return "maps of " + _plural(v.additional, depth + 1)
        return "objects"
    return "values of any type"


# --------------------------------------------------------------------------------------------
# Shapes
# --------------------------------------------------------------------------------------------


class Shape(enum.Enum):
    """What a definition field needs its path to land on (the value is how to say it)."""

    POD_TEMPLATE_SPEC = "a PodTemplateSpec (metadata and a spec with containers)"
    POD_SPEC = "a PodSpec (with a containers array)"
    OBJECT_META = "object metadata (with labels and annotations maps)"
    STRING_MAP = "a map of strings"
    STRING = "a string"
    INTEGER = "an integer"
    LIST = "a list"
    OBJECT = "an object"


@dataclass(frozen=True, slots=True)
class ShapeCheck:
    """OK, CANNOT_JUDGE (a warning) or WRONG_TYPE (an error); ``found`` describes the node."""

    outcome: Outcome
    shape: Shape
    found: str
    message: str = ""


#: Nested shape checks (a template's spec, a spec's containers) go at most this deep.
_MAX_SHAPE_DEPTH: Final = 6


def check_shape(node: Schema | None, shape: Shape) -> ShapeCheck:
    """Whether ``node`` (as :func:`check_path` returned it) has the wanted ``shape``."""
    return _shape(node if isinstance(node, Mapping) else {}, shape, 0)


def _shape(node: Schema, shape: Shape, depth: int) -> ShapeCheck:
    v = view(node)
    found = describe(node)

    def ok() -> ShapeCheck:
        return ShapeCheck(Outcome.OK, shape, found)

    def bad(detail: str = "") -> ShapeCheck:
        return ShapeCheck(
            Outcome.WRONG_TYPE, shape, found, f"expected {shape.value}, found {found}{detail}"
        )

    def unsure(detail: str = "") -> ShapeCheck:
        return ShapeCheck(
            Outcome.CANNOT_JUDGE,
            shape,
            found,
            f"cannot tell whether it is {shape.value}: it is {found}{detail}",
        )

    if v.kind in ("any", "ambiguous") or depth > _MAX_SHAPE_DEPTH:
        return unsure()
    if shape is Shape.STRING:
        return ok() if v.kind == "string" else unsure() if v.kind == "int-or-string" else bad()
    if shape is Shape.INTEGER:
        if v.kind == "integer":
            return ok()
        return unsure() if v.kind in ("int-or-string", "number") else bad()
    if shape is Shape.LIST:
        return ok() if v.kind == "array" else bad()
    if v.kind != "object":
        return bad()
    if shape is Shape.OBJECT:
        return ok()
    if shape is Shape.STRING_MAP:
        if isinstance(v.additional, Mapping):
            values = _shape(v.additional, Shape.STRING, depth + 1)
            return (
                ok()
                if values.outcome is Outcome.OK
                else unsure()
                if values.outcome is Outcome.CANNOT_JUDGE
                else bad()
            )
        return unsure() if v.open or not v.properties else bad()
    if shape is Shape.OBJECT_META:
        names = [k for k in ("labels", "annotations") if k in v.properties]
        if not names:
            return unsure() if v.open or not v.properties else bad(" (no labels or annotations)")
        parts = {k: _shape(v.properties[k], Shape.STRING_MAP, depth + 1) for k in names}
        return _combine(parts, ok, unsure, bad)
    if shape is Shape.POD_SPEC:
        containers = v.properties.get("containers")
        if containers is None:
            if v.open or not v.properties:
                return unsure()
            return bad(" (no containers)" + _template_hint(v, depth))
        c = view(containers)
        if c.kind == "array":
            return ok()
        return (
            unsure()
            if c.kind in ("any", "ambiguous")
            else bad(" whose containers is " + describe(containers))
        )
    # POD_TEMPLATE_SPEC
    spec, meta = v.properties.get("spec"), v.properties.get("metadata")
    if spec is None or meta is None:
        if v.open or not v.properties:
            return unsure()
        missing = " and ".join(k for k, n in (("metadata", meta), ("spec", spec)) if n is None)
        return bad(f" (no {missing})" + _template_hint(v, depth))
    spec_check = _shape(spec, Shape.POD_SPEC, depth + 1)
    if spec_check.outcome is Outcome.WRONG_TYPE:
        return bad(" whose spec is not a PodSpec" + _template_hint(v, depth))
    meta_check = _shape(meta, Shape.OBJECT_META, depth + 1)
    return _combine({"spec": spec_check, "metadata": meta_check}, ok, unsure, bad)


def _combine(
    parts: Mapping[str, ShapeCheck],
    ok: Callable[[], ShapeCheck],
    unsure: Callable[[str], ShapeCheck],
    bad: Callable[[str], ShapeCheck],
) -> ShapeCheck:
    """The verdict on a node from the verdicts on its named parts (``spec``, ``labels``...)."""
    wrong = [k for k, r in parts.items() if r.outcome is Outcome.WRONG_TYPE]
    if wrong:
        return bad("".join(f" whose {k} is {parts[k].found}" for k in wrong[:1]))
    unclear = [k for k, r in parts.items() if r.outcome is Outcome.CANNOT_JUDGE]
    if unclear:
        return unsure("".join(f"; its {k} is {parts[k].found}" for k in unclear))
    return ok()


def _template_hint(v: View, depth: int) -> str:
    """``; its .spec.template is a PodTemplateSpec`` when one sits just below this node."""
    for path in (("template",), ("spec", "template"), ("spec",)):
        node: Schema | None = v.node
        for key in path:
            node = view(node).properties.get(key) if node is not None else None
        if node is None or node is v.node:
            continue
        for shape in (Shape.POD_TEMPLATE_SPEC, Shape.POD_SPEC):
            if _shape(node, shape, depth + 2).outcome is Outcome.OK:
                name = "PodTemplateSpec" if shape is Shape.POD_TEMPLATE_SPEC else "PodSpec"
                return f"; its .{'.'.join(path)} is a {name}"
    return ""
