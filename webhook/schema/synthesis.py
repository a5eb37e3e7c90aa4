"""Sample objects synthesised from a schema alone.

:func:`synthesize` builds a sample object of a kind from its schema, for definitions of kinds
nobody has a sample of: required fields, one entry per list and map, first enum values,
placeholders, defaults, and a minimal pod template wherever the schema (or the caller) says a
pod template goes. It is bounded in depth and size, so self-referencing schemas terminate.

It is pure: inputs are never modified, results share nothing with them. The defaults it
applies are :mod:`webhook.schema.defaulting`'s.
"""

from __future__ import annotations

import functools
import math
import re
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final

from webhook.base.gvk import GVKLike
from webhook.jq.paths import Index, Iterate, Key
from webhook.schema.defaulting import ROOT_FIELDS, apply_defaults, copy_json, has_default
from webhook.schema.nodes import Schema, view
from webhook.schema.structural import Outcome, SchemaStep, Shape, check_path, check_shape, to_steps

__all__ = [
    "minimal_pod_spec",
    "minimal_pod_template",
    "synthesize",
]

#: Key of the one entry a synthesised map gets.
MAP_KEY: Final = "example"


def minimal_pod_spec() -> dict[str, Any]:
    """The smallest valid PodSpec: one container."""
    return {"containers": [{"name": "main", "image": "example-image"}]}


def minimal_pod_template() -> dict[str, Any]:
    """The smallest valid PodTemplateSpec: metadata, and a spec with one container."""
    return {"metadata": {"labels": {}}, "spec": minimal_pod_spec()}


def synthesize(
    schema: Schema,
    gvk: GVKLike,
    *,
    name: str = "sample",
    namespace: str | None = "default",
    pod_template_paths: Iterable[Sequence[SchemaStep | str | int]] = (),
    pod_spec_paths: Iterable[Sequence[SchemaStep | str | int]] = (),
    include_status: bool = False,
    max_depth: int = 24,
    max_nodes: int = 2000,
) -> dict[str, Any]:
    """A sample object of ``gvk`` built from ``schema`` when no real sample exists.

    ``apiVersion``, ``kind`` and ``metadata`` (``name``; ``namespace`` unless None) first. Then,
    breadth first so that shallow structure is complete before deep detail: every required
    field, every field with a default, and every optional object, array and map (so that paths
    through them find something); one entry per array (``minItems`` if larger, at most 3) and
    per map (key :data:`MAP_KEY`); enums take their first value, scalars with a default their
    default, strings a placeholder, numbers their minimum or 1, booleans false. A node shaped
    like a PodTemplateSpec gets :func:`minimal_pod_template` (with the schema's defaults), and
    so does every location of ``pod_template_paths`` (plain paths as steps or ``path()``
    tokens, e.g. a definition's ``podTemplateSpecPath``) even where the schema does not describe
    it (preserve-unknown); ``pod_spec_paths`` likewise get a PodSpec. ``status`` is left out
    unless ``include_status``. Fields deeper than ``max_depth`` or beyond ``max_nodes`` values
    are left out, so the result is bounded whatever the schema (a self-referencing one too).
    Raises :class:`~webhook.base.errors.InputError` only for a hint path of the wrong shape.
    """
    node = schema if isinstance(schema, Mapping) else {}
    api_version = f"{gvk.group}/{gvk.version}" if gvk.group else gvk.version
    metadata: dict[str, Any] = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    obj: dict[str, Any] = {"apiVersion": api_version, "kind": gvk.kind, "metadata": metadata}
    skip = set(ROOT_FIELDS) | (set() if include_status else {"status"})
    _Builder(max_depth=max_depth, max_nodes=max_nodes).fill(obj, node, skip)
    for path in pod_template_paths:
        _plant(obj, node, to_steps(path), _ensure_template)
    for path in pod_spec_paths:
        _plant(obj, node, to_steps(path), _ensure_pod_spec)
    return obj


class _Builder:
    """Breadth-first construction of a sample value under a size and depth budget."""

    def __init__(self, *, max_depth: int, max_nodes: int) -> None:
        self.max_depth = max_depth
        self.left = max_nodes
        # (container, key, schema node, depth, field name for placeholders)
        self.queue: deque[tuple[Any, str | int, Schema, int, str]] = deque()

    def fill(self, obj: dict[str, Any], node: Schema, skip: set[str]) -> None:
        self._enqueue_fields(obj, node, 0, skip)
        while self.queue and self.left > 0:
            container, key, sub, depth, name = self.queue.popleft()
            self.left -= 1
            value = self._make(sub, depth, name)
            if isinstance(container, dict):
                container[key] = value
            else:
                container.append(value)

    def _enqueue_fields(
        self, obj: dict[str, Any], node: Schema, depth: int, skip: set[str]
    ) -> None:
        if depth >= self.max_depth:
            return
        v = view(node, embedded_root=depth == 0)
        required = [k for k in v.required if k in v.properties and k not in skip]
        optional = [
            k
            for k, sub in v.properties.items()
            if k not in skip
            and k not in required
            and (has_default(sub) or view(sub).kind in ("object", "array"))
        ]
        for k in required + optional:
            self.queue.append((obj, k, v.properties[k], depth + 1, k))

    def _make(self, node: Schema, depth: int, name: str) -> Any:
        v = view(node)
        if v.enum:
            return copy_json(v.enum[0])
        if has_default(node) and v.kind not in ("object", "array"):
            return copy_json(node["default"])
        if v.kind == "string":
            return _string(node, name)
        if v.kind in ("integer", "number"):
            return _number(node, integer=v.kind == "integer")
        if v.kind == "boolean":
            return False
        if v.kind == "int-or-string":
            return 1
        if v.kind == "array":
            out: list[Any] = []
            if v.items is not None and depth < self.max_depth:
                for _ in range(_list_length(node)):
                    self.queue.append((out, len(out), v.items, depth + 1, name))
            return out
        if v.kind != "object":
            return {}
        if _pod_template_like(node):
            template: dict[str, Any] = apply_defaults(
                node, minimal_pod_template(), resource_root=False
            )
            self.left -= _size(template)
            return template
        obj: dict[str, Any] = {}
        if v.embedded:
            obj.update({"apiVersion": "v1", "kind": "Example", "metadata": {"name": "example"}})
        if isinstance(v.additional, Mapping):
            if depth < self.max_depth:
                self.queue.append((obj, MAP_KEY, v.additional, depth + 1, MAP_KEY))
            return obj
        self._enqueue_fields(obj, node, depth, set(ROOT_FIELDS) if v.embedded else set())
        return obj


def _size(value: Any) -> int:
    """How many values ``value`` holds (itself included)."""
    count, stack = 0, [value]
    while stack:
        v = stack.pop()
        count += 1
        if isinstance(v, dict):
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return count


def _pod_template_like(node: Schema) -> bool:
    """A PodTemplateSpec, or something with metadata and spec the schema cannot judge."""
    check = check_shape(node, Shape.POD_TEMPLATE_SPEC)
    if check.outcome is Outcome.OK:
        return True
    props = view(node).properties
    return check.outcome is Outcome.CANNOT_JUDGE and "metadata" in props and "spec" in props


_NON_DNS: Final = re.compile(r"[^a-z0-9]+")


def _string(node: Schema, name: str) -> str:
    fmt = node.get("format")
    if fmt == "date-time":
        return "1970-01-01T00:00:00Z"
    if fmt == "date":
        return "1970-01-01"
    text = "example-" + (_NON_DNS.sub("-", name.lower()).strip("-") or "value")
    min_len, max_len = node.get("minLength"), node.get("maxLength")
    if isinstance(min_len, int) and len(text) < min_len:
        text += "x" * min(min_len - len(text), 256)
    if isinstance(max_len, int) and max_len >= 0:
        text = text[:max_len]
    return text


def _number(node: Schema, *, integer: bool) -> int | float:
    lo, hi = node.get("minimum"), node.get("maximum")
    value: float = 1
    if isinstance(lo, int | float) and not isinstance(lo, bool):
        value = lo + (1 if node.get("exclusiveMinimum") is True and integer else 0)
    if isinstance(hi, int | float) and not isinstance(hi, bool) and value > hi:
        value = hi
    return math.ceil(value) if integer else value


def _list_length(node: Schema) -> int:
    lo, hi = node.get("minItems"), node.get("maxItems")
    n = max(1, min(lo, 3)) if isinstance(lo, int) and not isinstance(lo, bool) else 1
    if isinstance(hi, int) and not isinstance(hi, bool) and 0 <= hi < n:
        n = hi
    return n


def _ensure_template(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        return minimal_pod_template()
    if not isinstance(value.get("metadata"), dict):
        value["metadata"] = {"labels": {}}
    value["spec"] = _ensure_pod_spec(value.get("spec"))
    return value


def _ensure_pod_spec(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        return minimal_pod_spec()
    containers = value.get("containers")
    if not isinstance(containers, list) or not containers or not isinstance(containers[0], dict):
        value["containers"] = minimal_pod_spec()["containers"]
    return value


def _plant(
    obj: dict[str, Any], schema: Schema, steps: Sequence[SchemaStep], leaf: Callable[[Any], Any]
) -> None:
    """Make ``leaf`` (a fixer of the value found) hold at one location of ``steps`` in ``obj``.

    Missing containers on the way are created: a list or a map where the schema says so, else
    a list before ``[]``/``[N]`` and an object before ``.key``. Stops quietly where ``obj``
    holds a scalar on the way (the path cannot hold there).
    """
    cur: Any = obj
    for i, step in enumerate(steps):
        if i == len(steps) - 1:
            fix = leaf
        else:
            reached = check_path(schema, steps[: i + 1])
            kind = view(reached.node).kind if reached.outcome is Outcome.OK else "any"
            want_list = kind == "array" or (kind != "object" and not isinstance(steps[i + 1], Key))
            fix = functools.partial(_ensure_container, want_list)
        if isinstance(step, Key) and isinstance(cur, dict):
            key: str | int = step.name
        elif isinstance(step, Index) and isinstance(cur, list) and 0 <= step.i <= _MAX_PLANT_INDEX:
            cur.extend([None] * (step.i + 1 - len(cur)))
            key = step.i
        elif isinstance(step, Iterate) and isinstance(cur, list):
            if not cur:
                cur.append(None)
            key = 0
        elif isinstance(step, Iterate) and isinstance(cur, dict):
            key = next(iter(cur), MAP_KEY)
        else:
            return  # a scalar on the way, a slice, or an index too large to pad up to
        current = cur.get(key) if isinstance(cur, dict) else cur[key]
        if i == len(steps) - 1:
            reached = check_path(schema, steps)
            target = reached.node if reached.outcome is Outcome.OK else None
            cur[key] = apply_defaults(target or {}, fix(current), resource_root=False)
            return
        cur[key] = fix(current)
        cur = cur[key]


#: ``[N]`` in a pod template path is padded with empty entries up to at most this index.
_MAX_PLANT_INDEX: Final = 16


def _ensure_container(want_list: bool, existing: Any) -> Any:
    if isinstance(existing, dict | list):
        return existing
    return [] if want_list else {}
