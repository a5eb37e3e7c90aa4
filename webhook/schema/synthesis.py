"""Objects as the API server would store them: schema defaulting, and synthesised samples.

* :func:`apply_defaults` applies a structural schema's ``default:`` values to an object the
  way the API server does on create (non-nullable nulls without a default dropped first, then
  every missing property with a default set, recursively, inside array items and map values
  too, and inside values it has just defaulted). Nothing is invented where there is no default.
* :func:`synthesize` builds a sample object of a kind from its schema alone, for definitions of
  kinds nobody has a sample of: required fields, one entry per list and map, first enum values,
  placeholders, defaults, and a minimal pod template wherever the schema (or the caller) says a
  pod template goes. It is bounded in depth and size, so self-referencing schemas terminate.

Both are pure: inputs are never modified, results share nothing with them.
"""

from __future__ import annotations

import functools
import math
import re
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final

from webhook.base.errors import InputError
from webhook.base.gvk import GVKLike
from webhook.jq.paths import Index, Iterate, Key
from webhook.schema.nodes import Schema, view
from webhook.schema.structural import Outcome, SchemaStep, Shape, check_path, check_shape, to_steps

__all__ = [
    "MAX_DEFAULT_DEPTH",
    "apply_defaults",
    "copy_json",
    "minimal_pod_spec",
    "minimal_pod_template",
    "synthesize",
]

#: Defaults are applied down to this depth (real objects are ~30 deep).
MAX_DEFAULT_DEPTH: Final = 100
#: :func:`copy_json` refuses deeper or larger values (a YAML alias cycle, an alias bomb).
MAX_OBJECT_DEPTH: Final = 1000
MAX_OBJECT_NODES: Final = 2_000_000
#: What the API server handles itself at a resource root: never defaulted from the schema.
_ROOT_FIELDS: Final = frozenset({"apiVersion", "kind", "metadata"})
#: Key of the one entry a synthesised map gets.
MAP_KEY: Final = "example"


def copy_json(value: Any) -> Any:
    """A deep copy of a JSON-like value (mappings become dicts); iterative, bounded.

    Raises :class:`~webhook.base.errors.InputError` past :data:`MAX_OBJECT_DEPTH` levels or
    :data:`MAX_OBJECT_NODES` values (which is also how a self-containing value ends).
    """
    if not isinstance(value, Mapping | list):
        return value
    root: Any = {} if isinstance(value, Mapping) else []
    stack: list[tuple[Any, Any, int]] = [(value, root, 0)]
    nodes = 0
    while stack:
        src, dst, depth = stack.pop()
        if depth >= MAX_OBJECT_DEPTH:
            raise InputError(f"object nested deeper than {MAX_OBJECT_DEPTH} levels")
        pairs = src.items() if isinstance(src, Mapping) else enumerate(src)
        for k, v in pairs:
            nodes += 1
            if nodes > MAX_OBJECT_NODES:
                raise InputError(f"object has more than {MAX_OBJECT_NODES} values")
            if isinstance(v, Mapping | list):
                c: Any = {} if isinstance(v, Mapping) else []
                stack.append((v, c, depth + 1))
            else:
                c = v
            if isinstance(dst, dict):
                dst[k] = c
            else:
                dst.append(c)
    return root


# --------------------------------------------------------------------------------------------
# Defaulting
# --------------------------------------------------------------------------------------------


def apply_defaults(schema: Schema, obj: Any, *, resource_root: bool = True) -> Any:
    """A copy of ``obj`` with ``schema``'s defaults applied as the API server does on create.

    With ``resource_root`` (the default) ``obj`` is a whole resource: its ``apiVersion``,
    ``kind`` and ``metadata`` are left alone, as the API server does. Values ``obj`` already has
    are kept, except a null where the schema neither allows null (``nullable``) nor has a
    default: the API server drops those, and so does this. Raises
    :class:`~webhook.base.errors.InputError` only for an object :func:`copy_json` refuses.
    """
    out = copy_json(obj)
    node = schema if isinstance(schema, Mapping) else {}
    _prune_nulls(out, node, 0, resource_root)
    _default(out, node, 0, resource_root)
    return out


def _has_default(node: Schema | None) -> bool:
    return isinstance(node, Mapping) and node.get("default") is not None


def _nullable(node: Schema) -> bool:
    return node.get("nullable") is True


def _field_schema(node: Schema, key: str) -> Schema | None:
    v = view(node)
    if key in v.properties:
        return v.properties[key]
    return v.additional if isinstance(v.additional, Mapping) else None


def _prune_nulls(x: Any, node: Schema | None, depth: int, root: bool) -> None:
    if node is None or depth > MAX_DEFAULT_DEPTH:
        return
    if isinstance(x, dict):
        for k in list(x):
            if root and k in _ROOT_FIELDS:
                continue
            sub = _field_schema(node, k)
            if x[k] is None and sub is not None and not _nullable(sub) and not _has_default(sub):
                del x[k]
            else:
                _prune_nulls(x[k], sub, depth + 1, False)
    elif isinstance(x, list):
        items = view(node).items
        for item in x:
            _prune_nulls(item, items, depth + 1, False)


def _default(x: Any, node: Schema | None, depth: int, root: bool) -> None:
    if node is None or depth > MAX_DEFAULT_DEPTH:
        return
    v = view(node)
    if isinstance(x, dict):
        for k, prop in v.properties.items():
            if (root and k in _ROOT_FIELDS) or not _has_default(prop):
                continue
            if k not in x or (x[k] is None and not _nullable(prop)):
                x[k] = copy_json(prop["default"])
        for k in list(x):
            if root and k in _ROOT_FIELDS:
                continue
            if k in v.properties:
                _default(x[k], v.properties[k], depth + 1, False)
            elif isinstance(v.additional, Mapping):
                _fill_null(x, k, v.additional)
                _default(x[k], v.additional, depth + 1, False)
    elif isinstance(x, list) and v.items is not None:
        for i in range(len(x)):
            _fill_null(x, i, v.items)
            _default(x[i], v.items, depth + 1, False)


def _fill_null(container: Any, key: Any, node: Schema) -> None:
    """A null map value or list item the schema does not allow null for gets its default."""
    if container[key] is None and not _nullable(node) and _has_default(node):
        container[key] = copy_json(node["default"])


# --------------------------------------------------------------------------------------------
# Synthesis
# --------------------------------------------------------------------------------------------


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
    skip = set(_ROOT_FIELDS) | (set() if include_status else {"status"})
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
            and (_has_default(sub) or view(sub).kind in ("object", "array"))
        ]
        for k in required + optional:
            self.queue.append((obj, k, v.properties[k], depth + 1, k))

    def _make(self, node: Schema, depth: int, name: str) -> Any:
        v = view(node)
        if v.enum:
            return copy_json(v.enum[0])
        if _has_default(node) and v.kind not in ("object", "array"):
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
        self._enqueue_fields(obj, node, depth, set(_ROOT_FIELDS) if v.embedded else set())
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
