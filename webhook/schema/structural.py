"""Judge jq paths against a structural schema: does the field exist, and what lands there?

A schema is a plain dict in the form a CRD carries (``spec.versions[].schema.openAPIV3Schema``;
see :mod:`webhook.schema.crds`) or one derived from the ``kubernetes`` client for built-in kinds (see
:mod:`webhook.schema.builtin`). Everything here is a pure function of the schema and the path;
malformed parts of a schema are treated as "the schema does not say", never as a crash.

* :func:`check_path` walks a path (``Key``/``Index``/``Iterate`` steps of
  :func:`webhook.jq.paths.parse_plain`, or the token tuples jq's ``path()`` returns) and says
  :attr:`Outcome.OK` with the node reached, :attr:`Outcome.UNKNOWN` (no such field, with the
  closest names), :attr:`Outcome.WRONG_TYPE` (indexing a string, iterating a scalar) or
  :attr:`Outcome.CANNOT_JUDGE` where the schema stops describing the data
  (``x-kubernetes-preserve-unknown-fields``, ``additionalProperties: true``, int-or-string,
  untyped nodes). The first two are errors, the last a warning.
* :func:`check_shape` says whether a node is what a definition field needs (a PodTemplateSpec,
  a PodSpec, ObjectMeta, a string map, a string, an integer); :func:`describe` says in a few
  words what a node is.
* :func:`check_expression` checks a whole jq expression: plain paths directly, anything else
  through the locations that evaluating ``path(EXPR)`` on a sample returned. Evaluation is the
  caller's (a ``locate`` callable), so this module never imports libjq.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from webhook.base.errors import InputError
from webhook.jq.paths import Index, Iterate, Key, parse_plain
from webhook.schema.builtin import object_meta_schema
from webhook.schema.nodes import (
    Outcome,
    Schema,
    Shape,
    ShapeCheck,
    View,
    check_shape,
    describe,
    view,
)

__all__ = [
    "MAX_LOCATIONS",
    "ExpressionCheck",
    "Locate",
    "LocationCheck",
    "Outcome",
    "PathCheck",
    "RawToken",
    "Schema",
    "SchemaStep",
    "Shape",
    "ShapeCheck",
    "Slice",
    "check_expression",
    "check_path",
    "check_shape",
    "describe",
    "format_path",
    "to_steps",
]


@dataclass(frozen=True, slots=True)
class Slice:
    """``.[a:b]``: part of an array (jq's ``path()`` gives ``{"start": a, "end": b}``)."""

    start: int | None = None
    end: int | None = None


SchemaStep = Key | Index | Iterate | Slice
#: One token of a jq ``path()`` result: a key, an index, or a slice object.
RawToken = str | int | Mapping[str, Any]

#: ``locate(expression, sample)``: the paths ``path(expression)`` yields on ``sample``. Raise
#: (any exception) or return a ``str`` to say the expression could not be evaluated.
Locate = Callable[[str, Any], "Sequence[Sequence[RawToken]] | str"]

#: At most this many locations of one expression are checked.
MAX_LOCATIONS: Final = 64

_STRING: Final[Schema] = {"type": "string"}
_EMBEDDED: Final = ("apiVersion", "kind", "metadata")
_IDENT_RE: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True, slots=True)
class PathCheck:
    """What walking one path through a schema found.

    ``node`` is the node reached (OK), or the node where judging stopped (the parent of the
    offending step otherwise). ``step`` is the 0-based index of that step (None when OK).
    """

    outcome: Outcome
    steps: tuple[SchemaStep, ...]
    node: Schema | None
    step: int | None = None
    message: str = ""
    suggestions: tuple[str, ...] = ()

    @property
    def path(self) -> str:
        """The path in jq syntax (``.spec.tfReplicaSpecs[].template``)."""
        return format_path(self.steps)


def to_steps(path: Sequence[SchemaStep | RawToken]) -> tuple[SchemaStep, ...]:
    """Normalise a path: parsed steps pass through, ``path()`` tokens become steps.

    Raises :class:`~webhook.base.errors.InputError` for a token that is none of these.
    """
    if isinstance(path, str | bytes) or not isinstance(path, Sequence):
        raise InputError(f"a path is a sequence of steps, not {type(path).__name__}")
    out: list[SchemaStep] = []
    for i, tok in enumerate(path):
        if isinstance(tok, Key | Index | Iterate | Slice):
            out.append(tok)
        elif isinstance(tok, str):
            out.append(Key(tok))
        elif isinstance(tok, int) and not isinstance(tok, bool):
            out.append(Index(tok))
        elif isinstance(tok, Mapping) and set(tok) <= {"start", "end"}:
            start, end = tok.get("start"), tok.get("end")
            out.append(Slice(_slice_bound(start), _slice_bound(end)))
        else:
            raise InputError(f"path step {i} is not a key, an index or a slice: {tok!r}")
    return tuple(out)


def _slice_bound(value: Any) -> int | None:
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def format_path(steps: Sequence[SchemaStep]) -> str:
    """A path in jq syntax; the empty path is ``.``."""
    text = "".join(_render_step(s) for s in steps)
    return text if text.startswith(".") else "." + text


def _render_step(step: SchemaStep) -> str:
    if isinstance(step, Key):
        return "." + step.name if _IDENT_RE.match(step.name) else f"[{json.dumps(step.name)}]"
    if isinstance(step, Index):
        return f"[{step.i}]"
    if isinstance(step, Iterate):
        return "[]"
    lo = "" if step.start is None else str(step.start)
    hi = "" if step.end is None else str(step.end)
    return f"[{lo}:{hi}]"


def check_path(
    schema: Schema, path: Sequence[SchemaStep | RawToken], *, resource_root: bool = True
) -> PathCheck:
    """Walk ``path`` through ``schema``; see :class:`Outcome` for the verdicts.

    With ``resource_root`` (the default) ``schema`` is a whole resource, whose ``apiVersion``,
    ``kind`` and ``metadata`` (ObjectMeta) the API server knows whatever the schema says.
    """
    steps = to_steps(path)
    node: Schema = schema if isinstance(schema, Mapping) else {}
    for i, step in enumerate(steps):
        v = view(node, embedded_root=resource_root and i == 0)
        at = format_path(steps[:i]) if i else "the object"
        result = _step(v, step, at, _render_step(step))
        if isinstance(result, _Stop):
            return PathCheck(result.outcome, steps, node, i, result.message, result.suggestions)
        node = result
    return PathCheck(Outcome.OK, steps, node)


@dataclass(frozen=True, slots=True)
class _Stop:
    outcome: Outcome
    message: str
    suggestions: tuple[str, ...] = ()


def _step(v: View, step: SchemaStep, at: str, step_text: str) -> Schema | _Stop:
    """The node one step below ``v`` (the value at ``at``), or why there is none."""
    if isinstance(step, Key):
        return _key(v, step.name, at, step_text)
    if v.kind == "array":
        if v.items is None:
            return _Stop(Outcome.CANNOT_JUDGE, f"the schema does not say what {at} holds")
        return v.node if isinstance(step, Slice) else v.items
    if v.kind == "object" and isinstance(step, Iterate):
        if isinstance(v.additional, Mapping):
            return v.additional
        if v.open:
            return _Stop(Outcome.CANNOT_JUDGE, _open_reason(v, at, step_text))
        return _Stop(
            Outcome.CANNOT_JUDGE,
            f"{at} is {describe(v.node)}: iterating it visits fields of different types",
        )
    if v.kind in ("any", "ambiguous"):
        return _Stop(Outcome.CANNOT_JUDGE, _open_reason(v, at, step_text))
    verb = "iterate over" if isinstance(step, Iterate) else "index"
    what = "" if isinstance(step, Iterate) else " with a number"
    return _Stop(Outcome.WRONG_TYPE, f"cannot {verb} {at}{what}: it is {describe(v.node)}")


def _key(v: View, name: str, at: str, step_text: str) -> Schema | _Stop:
    quoted = json.dumps(name)
    if v.kind == "array":
        hint = ""
        if v.items is not None and name in view(v.items).properties:
            hint = f"; did you mean {at}[]{step_text}?"
        return _Stop(
            Outcome.WRONG_TYPE, f"{at} is {describe(v.node)}: it has no field {quoted}{hint}"
        )
    if v.kind not in ("object", "any", "ambiguous"):
        return _Stop(Outcome.WRONG_TYPE, f"{at} is {describe(v.node)}: it has no field {quoted}")
    if v.embedded and name in ("apiVersion", "kind"):
        return _STRING
    if v.embedded and name == "metadata":
        return object_meta_schema()  # the API server's, whatever the schema says
    child = v.properties.get(name)
    if child is not None:
        return child
    if isinstance(v.additional, Mapping):
        return v.additional
    if v.open or v.kind in ("any", "ambiguous"):
        return _Stop(Outcome.CANNOT_JUDGE, _open_reason(v, at, step_text))
    names = list(dict.fromkeys([*v.properties, *(_EMBEDDED if v.embedded else ())]))
    if not names:
        return _Stop(
            Outcome.CANNOT_JUDGE,
            f"the schema declares no fields in {at}, so it cannot say whether {quoted} exists"
            " (the API server drops undeclared fields)",
        )
    close = _closest(name, names)
    message = f"{at} has no field {quoted}"
    if close:
        message += "; did you mean " + " or ".join(json.dumps(c) for c in close) + "?"
    else:
        message += " (fields: " + ", ".join(names[:12]) + (", ..." if len(names) > 12 else "") + ")"
    return _Stop(Outcome.UNKNOWN, message, tuple(close))


def _open_reason(v: View, at: str, step_text: str) -> str:
    if v.kind == "ambiguous":
        return f"{at} may be one of several types (anyOf/oneOf): cannot judge {step_text}"
    if v.additional is True:
        return f"{at} allows any field (additionalProperties: true): cannot judge {step_text}"
    if v.preserve:
        return (
            f"{at} keeps fields the schema does not describe"
            f" (x-kubernetes-preserve-unknown-fields): cannot judge {step_text}"
        )
    return f"the schema does not describe {at}: cannot judge {step_text}"


def _closest(name: str, names: Sequence[str]) -> list[str]:
    """Up to three existing names close to ``name``; case-only differences first."""
    same_case = [n for n in names if n.lower() == name.lower()]
    lowered = {n.lower(): n for n in names}
    close = difflib.get_close_matches(name.lower(), list(lowered), n=3, cutoff=0.6)
    return list(dict.fromkeys([*same_case, *(lowered[c] for c in close)]))[:3]


# --------------------------------------------------------------------------------------------
# Expressions
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LocationCheck:
    """One location of an expression: the path verdict and, when it is OK, the shape verdict."""

    path: PathCheck
    shape: ShapeCheck | None = None

    @property
    def outcome(self) -> Outcome:
        if self.path.outcome is not Outcome.OK or self.shape is None:
            return self.path.outcome
        return self.shape.outcome

    @property
    def message(self) -> str:
        """``PATH: problem`` (empty when OK)."""
        if self.path.outcome is not Outcome.OK:
            return f"{self.path.path}: {self.path.message}"
        if self.shape is not None and self.shape.outcome is not Outcome.OK:
            return f"{self.path.path}: {self.shape.message}"
        return ""


@dataclass(frozen=True, slots=True)
class ExpressionCheck:
    """The verdict on one jq expression.

    ``locations`` holds one check per location (plain paths: exactly one). ``note`` says why
    nothing was checked when ``locations`` is empty (the outcome is then CANNOT_JUDGE).
    """

    expression: str
    plain: bool
    locations: tuple[LocationCheck, ...]
    note: str = ""

    @property
    def outcome(self) -> Outcome:
        if not self.locations:
            return Outcome.CANNOT_JUDGE
        return max((c.outcome for c in self.locations), key=lambda o: o.rank)

    @property
    def errors(self) -> list[str]:
        """Distinct error messages, in location order."""
        return list(dict.fromkeys(c.message for c in self.locations if c.outcome.is_error))

    @property
    def warnings(self) -> list[str]:
        """Distinct cannot-judge messages (or the note), in location order."""
        if not self.locations:
            return [self.note]
        found = (c.message for c in self.locations if c.outcome is Outcome.CANNOT_JUDGE)
        return list(dict.fromkeys(found))


def check_expression(
    schema: Schema,
    expression: str,
    *,
    shape: Shape | None = None,
    sample: Any = None,
    locate: Locate | None = None,
    resource_root: bool = True,
) -> ExpressionCheck:
    """Check every location ``expression`` can write or read against ``schema``.

    A plain path (:func:`webhook.jq.paths.parse_plain`) is walked directly. Any other
    expression needs ``sample`` (a real or synthesised object of the kind) and ``locate``, which
    returns the paths of ``path(expression)`` on it; those are checked one by one (at most
    :data:`MAX_LOCATIONS`). With ``shape``, each location that exists must also have it.
    Raises :class:`~webhook.base.errors.InputError` when ``expression`` is not a string.
    """
    if not isinstance(expression, str):
        raise InputError(f"a jq expression is a string, not {type(expression).__name__}")
    steps = parse_plain(expression)
    if steps is not None:
        return ExpressionCheck(expression, True, (_location(schema, steps, shape, resource_root),))
    if locate is None or sample is None:
        return ExpressionCheck(
            expression, False, (), "not a plain path, and no sample to evaluate it on: not checked"
        )
    try:
        found = locate(expression, sample)
    except Exception as e:  # the caller's evaluator: any failure means "cannot judge"
        return ExpressionCheck(expression, False, (), f"cannot locate its paths: {e}")
    if isinstance(found, str):
        return ExpressionCheck(expression, False, (), f"cannot locate its paths: {found}")
    if isinstance(found, str | bytes) or not isinstance(found, Sequence):
        return ExpressionCheck(expression, False, (), "cannot locate its paths: not a list")
    checks: list[LocationCheck] = []
    seen: set[str] = set()
    for raw in found:
        if len(checks) >= MAX_LOCATIONS:
            break
        try:
            steps_ = to_steps(raw)
        except InputError as e:
            return ExpressionCheck(expression, False, (), f"cannot locate its paths: {e}")
        key = format_path(steps_)
        if key in seen:
            continue
        seen.add(key)
        checks.append(_location(schema, steps_, shape, resource_root))
    if not checks:
        return ExpressionCheck(expression, False, (), "selects nothing on the sample: not checked")
    return ExpressionCheck(expression, False, tuple(checks))


def _location(
    schema: Schema, steps: Sequence[SchemaStep], shape: Shape | None, resource_root: bool
) -> LocationCheck:
    result = check_path(schema, steps, resource_root=resource_root)
    if result.outcome is Outcome.OK and shape is not None:
        return LocationCheck(result, check_shape(result.node, shape))
    return LocationCheck(result)
