"""The cluster's CustomResourceDefinitions, watched into the server's state as schemas.

:class:`CRDSync` is a :class:`~webhook.cluster.listwatch.ListWatch` of
``apiextensions.k8s.io/v1`` CustomResourceDefinitions. Of each CRD it keeps only the
``openAPIV3Schema`` of every served version (read by :func:`webhook.schema.crds.read_crds`), slimmed
by :func:`slim_schema`: ``description`` texts dropped (most of a CRD's bytes) and identical
sub-schemas stored once (the versions of a CRD are often the same schema; a container's schema
repeats in every pod template of a KServe or Kubeflow CRD). The raw CRD, its status, managed
fields and ``last-applied-configuration`` annotation are never kept. After every change the
whole index goes to :meth:`State.set_crds`, so ``/validate`` and the status conditions see the
cluster's CRDs through the state's snapshot.

A CRD our schema reader refuses (deeper or larger than :mod:`webhook.schema.crds` accepts) still
serves its kind: it is indexed with an open schema (``x-kubernetes-preserve-unknown-fields``),
so checks say they cannot judge instead of claiming that no CRD exists.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

import orjson
from kubernetes import client

from webhook.admission.state import State
from webhook.base.limits import CRD_PAGE_SIZE
from webhook.cluster.api import log_event
from webhook.cluster.listwatch import ListWatch, resource_version
from webhook.schema.crds import CRDError, CRDSchema, SchemaIndex, read_crds
from webhook.schema.nodes import Schema

__all__ = ["CRDSync", "slim_schema"]

CRD_GROUP: Final = "apiextensions.k8s.io"
CRD_VERSION: Final = "v1"
CRD_RESOURCE: Final = "customresourcedefinitions"

#: Keywords whose value is a schema, a list of schemas, or a map of name to schema.
_SCHEMA_VALUED: Final = frozenset({"items", "additionalProperties", "additionalItems", "not"})
_SCHEMA_LISTS: Final = frozenset({"allOf", "anyOf", "oneOf"})
_SCHEMA_MAPS: Final = frozenset({"properties", "patternProperties", "definitions"})
#: Keywords dropped from every schema node: prose, read by people only.
_DROPPED: Final = frozenset({"description"})
#: What a CRD we cannot read is indexed with: its kind exists; its fields are not judged.
OPEN_SCHEMA: Final[Mapping[str, Any]] = {
    "type": "object",
    "x-kubernetes-preserve-unknown-fields": True,
}


def slim_schema(schema: Schema, table: dict[Any, Any] | None = None) -> Schema:
    """``schema`` without ``description`` keywords, with equal sub-schemas shared.

    ``table`` interns nodes across calls (pass one dict for all versions of a CRD); the result
    is equal to the input minus descriptions and must be treated as read-only (nodes are
    shared). Values that are data, not schemas (``default``, ``enum``, ``example``), are kept
    as they are. Recursion is bounded by the depth :func:`webhook.schema.crds.check_schema` allows.
    """
    return _slim(schema, {} if table is None else table)  # type: ignore[no-any-return]


def _slim(node: Any, table: dict[Any, Any]) -> Any:
    if not isinstance(node, Mapping):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROPPED:
            continue
        if key in _SCHEMA_VALUED:
            out[key] = (
                _intern([_slim(v, table) for v in value], table)
                if isinstance(value, list)
                else _slim(value, table)
            )
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            out[key] = _intern([_slim(v, table) for v in value], table)
        elif key in _SCHEMA_MAPS and isinstance(value, Mapping):
            out[key] = _intern({k: _slim(v, table) for k, v in value.items()}, table)
        elif isinstance(value, dict | list):
            out[key] = _intern_data(value, table)
        else:
            out[key] = value
    return _intern(out, table)


def _intern_data(value: dict[str, Any] | list[Any], table: dict[Any, Any]) -> Any:
    """A data value (``required``, ``enum``, ``default``), stored once per JSON text."""
    try:
        key = ("=", orjson.dumps(value))
    except orjson.JSONEncodeError:  # an integer beyond 64 bits: kept as it is
        return value
    return table.setdefault(key, value)


def _ref(value: Any) -> Any:
    """A hashable stand-in for a value inside a node being interned: containers by identity
    (they are interned already, so equal ones are the same object, and the table keeps them
    alive, so an id is never reused while it lives), scalars by type and value (``True`` is
    not ``1``)."""
    if isinstance(value, dict | list):
        return ("@", id(value))
    return (type(value).__name__, value)


def _intern(value: dict[str, Any] | list[Any], table: dict[Any, Any]) -> Any:
    if isinstance(value, dict):
        key: Any = ("{", tuple((k, _ref(v)) for k, v in value.items()))
    else:
        key = ("[", tuple(_ref(v) for v in value))
    return table.setdefault(key, value)


@dataclass(frozen=True, slots=True)
class CRDEntry:
    """What is kept of one CRD: its resourceVersion and the schemas of its served versions."""

    resource_version: str
    schemas: tuple[CRDSchema, ...]


def _served_open(name: str, obj: Mapping[str, Any], label: str) -> tuple[CRDSchema, ...]:
    """The served versions of a CRD we cannot read, each with :data:`OPEN_SCHEMA`."""
    spec = obj.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    names = spec.get("names")
    kind = names.get("kind") if isinstance(names, Mapping) else None
    group = spec.get("group")
    versions = spec.get("versions")
    if not (isinstance(kind, str) and isinstance(group, str) and isinstance(versions, list)):
        return ()
    return tuple(
        CRDSchema(
            group=group,
            version=v["name"],
            kind=kind,
            schema=OPEN_SCHEMA,
            crd=name,
            source=label,
            namespaced=spec.get("scope", "Namespaced") == "Namespaced",
        )
        for v in versions
        if isinstance(v, Mapping) and v.get("served") is True and isinstance(v.get("name"), str)
    )


def read_cluster_crd(name: str, obj: Mapping[str, Any]) -> tuple[CRDSchema, ...]:
    """The slimmed schemas of the served versions of one CRD object from the API server."""
    label = f"cluster:crd/{name}"
    try:
        index = read_crds([(label, obj)])
    except CRDError as e:
        log_event("crd.unreadable", logging.WARNING, name=name, errors=e.problems)
        return _served_open(name, obj, label)
    table: dict[Any, Any] = {}
    return tuple(dataclasses.replace(e, schema=slim_schema(e.schema, table)) for e in index)


class CRDSync(ListWatch[CRDEntry]):
    """List+watch CRDs into ``state`` as a :class:`~webhook.schema.crds.SchemaIndex` (see the module
    docstring). Until the first list is applied, ``state.snapshot.crds`` stays None: nothing is
    known, so nothing is claimed about CRDs."""

    thread_name = "karta-crds"
    events = "crds"
    item = "crd"
    page_size = CRD_PAGE_SIZE

    def __init__(
        self,
        state: State,
        api: client.ApiClient,
        *,
        resync_seconds: float = 3600.0,
        watch_timeout: int = 300,
        backoff_base: float = 0.5,
        backoff_cap: float = 30.0,
    ) -> None:
        super().__init__(
            api,
            CRD_GROUP,
            CRD_VERSION,
            CRD_RESOURCE,
            resync_seconds=resync_seconds,
            watch_timeout=watch_timeout,
            backoff_base=backoff_base,
            backoff_cap=backoff_cap,
        )
        self.state = state

    def digest(self, name: str, obj: dict[str, Any], previous: CRDEntry | None) -> CRDEntry:
        rv = resource_version(obj)
        if previous is not None and rv and previous.resource_version == rv:
            return previous  # a relist: unchanged, not read again
        return CRDEntry(rv, read_cluster_crd(name, obj))

    def publish(self) -> None:
        items = self.snapshot()
        self.state.set_crds(SchemaIndex(e for name in sorted(items) for e in items[name].schemas))
