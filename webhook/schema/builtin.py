"""Schemas of the built-in Kubernetes kinds, derived from the ``kubernetes`` client's models.

The client's generated models describe every API type: ``V1Pod.openapi_types`` maps each Python
attribute to a type name (``"V1PodSpec"``, ``"List[V1Container]"``, ``"Dict[str, str]"``,
``"datetime"``, ``"object"``) and ``attribute_map`` gives the JSON field name. This module turns
them into the same structural-schema dicts a CRD carries (``type``, ``properties``, ``items``,
``additionalProperties``), so built-in kinds and custom resources are checked by one walker
(:mod:`webhook.schema.structural`).

What the models cannot tell is marked, not guessed: an ``object`` attribute (int-or-string
fields such as ``maxSurge``, raw extensions) becomes ``x-kubernetes-preserve-unknown-fields``,
which the walker reports as "cannot judge". Models carry no defaults. Required fields are read
where the client says (its pydantic ``model_fields``, kubernetes >= 35); older clients give none.

Derived schemas are cached and shared: treat them as read-only. A model that refers back to
itself (``V1JSONSchemaProps``) is cut at the back-reference with a preserve-unknown node, so
every schema is a finite tree. The ``kubernetes`` package is imported on first use only.
"""

from __future__ import annotations

import importlib
import re
import threading
from collections.abc import Mapping
from typing import Any, Final

from webhook.base.gvk import GVKLike

__all__ = [
    "BUILTIN_KINDS",
    "builtin_schema",
    "model_schema",
    "object_meta_schema",
]


#: Built-in workload kinds (group, version, kind) and the client model that describes each.
BUILTIN_KINDS: Final[Mapping[tuple[str, str, str], str]] = {
    ("", "v1", "Pod"): "V1Pod",
    ("", "v1", "PodTemplate"): "V1PodTemplate",
    ("", "v1", "ReplicationController"): "V1ReplicationController",
    ("apps", "v1", "Deployment"): "V1Deployment",
    ("apps", "v1", "StatefulSet"): "V1StatefulSet",
    ("apps", "v1", "DaemonSet"): "V1DaemonSet",
    ("apps", "v1", "ReplicaSet"): "V1ReplicaSet",
    ("batch", "v1", "Job"): "V1Job",
    ("batch", "v1", "CronJob"): "V1CronJob",
}

#: Scalar type names of the generated client and their schema.
_SCALARS: Final[Mapping[str, Mapping[str, Any]]] = {
    "str": {"type": "string"},
    "int": {"type": "integer"},
    "float": {"type": "number"},
    "bool": {"type": "boolean"},
    "datetime": {"type": "string", "format": "date-time"},
    "date": {"type": "string", "format": "date"},
    "bytes": {"type": "string", "format": "byte"},
}

#: What the models call ``object``: any JSON value (int-or-string, RawExtension...).
_OPAQUE: Final[Mapping[str, Any]] = {"x-kubernetes-preserve-unknown-fields": True}

# ``List[X]`` / ``list[X]`` and ``Dict[str, X]`` / ``dict(str, X)`` (older clients).
_LIST_RE: Final = re.compile(r"^[Ll]ist\[(.+)\]$")
_DICT_RE: Final = re.compile(r"^(?:Dict\[str,\s*(.+)\]|dict\(str,\s*(.+)\))$")

#: Nesting of ``List[List[...]]`` beyond this is not a real type name.
_MAX_TYPE_NESTING: Final = 8


_CACHE: dict[str, Mapping[str, Any]] = {}
_LOCK: Final = threading.RLock()


def model_schema(model: str) -> Mapping[str, Any]:
    """The schema of the client model named ``model`` (``"V1PodTemplateSpec"``); cached.

    Raises :class:`KeyError` when the client has no such model.
    """
    with _LOCK:
        return _model_schema(model, set())


def builtin_schema(gvk: GVKLike) -> Mapping[str, Any] | None:
    """The schema of a built-in kind of :data:`BUILTIN_KINDS`, or None for any other kind."""
    model = BUILTIN_KINDS.get((gvk.group, gvk.version, gvk.kind))
    return model_schema(model) if model else None


def object_meta_schema() -> Mapping[str, Any]:
    """The schema of ``metadata`` (``V1ObjectMeta``): what the API server keeps at a resource root."""
    return model_schema("V1ObjectMeta")


def _models() -> Any:
    return importlib.import_module("kubernetes.client.models")


def _model_schema(model: str, in_progress: set[str]) -> Mapping[str, Any]:
    """Derive (or fetch from the cache) one model's schema; ``in_progress`` breaks cycles."""
    cached = _CACHE.get(model)
    if cached is not None:
        return cached
    cls = getattr(_models(), model, None)
    types = getattr(cls, "openapi_types", None)
    names = getattr(cls, "attribute_map", None)
    if not isinstance(types, dict) or not isinstance(names, dict):
        raise KeyError(f"the kubernetes client has no model {model!r}")
    in_progress.add(model)
    properties: dict[str, Any] = {}
    required: list[str] = []
    fields = getattr(cls, "model_fields", None)
    for attr, type_name in types.items():
        json_name = names.get(attr, attr)
        if not isinstance(json_name, str) or not isinstance(type_name, str):
            continue
        properties[json_name] = _type_schema(type_name, in_progress, 0)
        if _is_required(fields, attr):
            required.append(json_name)
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    in_progress.discard(model)
    _CACHE[model] = schema
    return schema


def _is_required(fields: Any, attr: str) -> bool:
    """Whether the pydantic field of ``attr`` is required (False for pre-pydantic clients)."""
    if not isinstance(fields, dict):
        return False
    info = fields.get(attr) or fields.get("var_" + attr.lstrip("_"))
    is_required = getattr(info, "is_required", None)
    return bool(is_required()) if callable(is_required) else False


def _type_schema(type_name: str, in_progress: set[str], nesting: int) -> Mapping[str, Any]:
    type_name = type_name.strip()
    if type_name in _SCALARS:
        return _SCALARS[type_name]
    if type_name == "object" or nesting > _MAX_TYPE_NESTING:
        return _OPAQUE
    m = _LIST_RE.match(type_name)
    if m:
        return {"type": "array", "items": _type_schema(m.group(1), in_progress, nesting + 1)}
    m = _DICT_RE.match(type_name)
    if m:
        value = m.group(1) or m.group(2)
        return {
            "type": "object",
            "additionalProperties": _type_schema(value, in_progress, nesting + 1),
        }
    if type_name in in_progress:
        return _OPAQUE  # a model that contains itself: cut the cycle
    try:
        return _model_schema(type_name, in_progress)
    except KeyError:
        return _OPAQUE  # a type name this client does not know: say nothing about it
