"""Schema defaulting as the API server does it, and a bounded deep copy of JSON values.

:func:`apply_defaults` applies a structural schema's ``default:`` values to an object the way
the API server does on create (non-nullable nulls without a default dropped first, then every
missing property with a default set, recursively, inside array items and map values too, and
inside values it has just defaulted). Nothing is invented where there is no default. It is
pure: its input is never modified, its result shares nothing with it.

Samples synthesised from a schema are :mod:`webhook.schema.synthesis`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from webhook.base.errors import InputError
from webhook.schema.nodes import Schema, view

__all__ = [
    "MAX_DEFAULT_DEPTH",
    "apply_defaults",
    "copy_json",
]

#: Defaults are applied down to this depth (real objects are ~30 deep).
MAX_DEFAULT_DEPTH: Final = 100
#: :func:`copy_json` refuses deeper or larger values (a YAML alias cycle, an alias bomb).
MAX_OBJECT_DEPTH: Final = 1000
MAX_OBJECT_NODES: Final = 2_000_000
#: What the API server handles itself at a resource root: never defaulted from the schema.
ROOT_FIELDS: Final = frozenset({"apiVersion", "kind", "metadata"})


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


def has_default(node: Schema | None) -> bool:
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
            if root and k in ROOT_FIELDS:
                continue
            sub = _field_schema(node, k)
            if x[k] is None and sub is not None and not _nullable(sub) and not has_default(sub):
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
            if (root and k in ROOT_FIELDS) or not has_default(prop):
                continue
            if k not in x or (x[k] is None and not _nullable(prop)):
                x[k] = copy_json(prop["default"])
        for k in list(x):
            if root and k in ROOT_FIELDS:
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
    if container[key] is None and not _nullable(node) and has_default(node):
        container[key] = copy_json(node["default"])
