"""Reading CustomResourceDefinitions into a schema per group/version/kind.

Input is already-parsed documents, as ``kubectl get crd NAME -o yaml`` prints them (also a
``kind: List`` of them, as ``kubectl get crd -o yaml`` prints several). Every served version of
a CRD contributes its ``schema.openAPIV3Schema`` to a :class:`SchemaIndex`. Documents that are
not CRDs are ignored; a CRD that cannot be used is an error naming the document, the CRD and
the field, and all such problems are reported together in one :class:`CRDError`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

from webhook.base.errors import InputError, join_path
from webhook.base.gvk import GVKLike
from webhook.base.reader import type_name
from webhook.schema.builtin import builtin_schema
from webhook.schema.nodes import Schema

__all__ = ["CRDError", "CRDSchema", "SchemaIndex", "check_schema", "read_crds"]

_CRD_GROUP: Final = "apiextensions.k8s.io"
_TYPES: Final = frozenset({"object", "array", "string", "integer", "number", "boolean"})
_BOOL_KEYWORDS: Final = (
    "nullable",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-embedded-resource",
    "x-kubernetes-int-or-string",
)
#: A schema nested deeper than this, or with more nodes, is refused (real CRDs: ~30 / ~50k).
MAX_SCHEMA_DEPTH: Final = 100
MAX_SCHEMA_NODES: Final = 500_000
#: At most this many problems are listed per CRD.
_MAX_PROBLEMS: Final = 10
#: ``kind: List`` inside ``kind: List`` is followed this deep.
_MAX_LIST_NESTING: Final = 3


class CRDError(InputError):
    """CRD documents that cannot be used; ``problems`` lists every one found."""

    def __init__(self, problems: Iterable[str]) -> None:
        self.problems = list(problems)
        super().__init__(
            "unusable CustomResourceDefinition:\n" + "\n".join(f"  {p}" for p in self.problems)
        )


@dataclass(frozen=True, slots=True)
class CRDSchema:
    """The schema of one served version of a CRD, and where it came from."""

    group: str
    version: str
    kind: str
    schema: Schema
    crd: str  # the CRD's metadata.name, e.g. tfjobs.kubeflow.org
    source: str  # the document it was read from
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"


class SchemaIndex:
    """Schemas by (group, version, kind): CRDs read by :func:`read_crds`, built-ins as fallback."""

    def __init__(self, entries: Iterable[CRDSchema] = ()) -> None:
        self._by_gvk: dict[tuple[str, str, str], CRDSchema] = {}
        for e in entries:
            self._by_gvk.setdefault((e.group, e.version, e.kind), e)

    def get(self, gvk: GVKLike) -> CRDSchema | None:
        """The CRD schema of ``gvk``, or None when no CRD read serves it."""
        return self._by_gvk.get((gvk.group, gvk.version, gvk.kind))

    def schema(self, gvk: GVKLike) -> Schema | None:
        """The schema of ``gvk``: its CRD's, else the built-in kind's, else None."""
        entry = self.get(gvk)
        return entry.schema if entry is not None else builtin_schema(gvk)

    def versions(self, group: str, kind: str) -> list[str]:
        """The served versions of a group and kind (to say "the CRD serves v1, not v2")."""
        return [v for (g, v, k) in self._by_gvk if g == group and k == kind]

    def __contains__(self, gvk: object) -> bool:
        key = (
            getattr(gvk, "group", None),
            getattr(gvk, "version", None),
            getattr(gvk, "kind", None),
        )
        return key in self._by_gvk

    def __iter__(self) -> Iterator[CRDSchema]:
        return iter(self._by_gvk.values())

    def __len__(self) -> int:
        return len(self._by_gvk)


def read_crds(documents: Iterable[tuple[str, Any]]) -> SchemaIndex:
    """Index the served versions of every CRD among ``(label, document)`` pairs.

    Raises :class:`CRDError` listing every unusable CRD (and every group/version/kind two
    different CRD documents define); other documents are ignored.
    """
    entries: list[CRDSchema] = []
    problems: list[str] = []
    for item in documents:
        if not isinstance(item, tuple) or len(item) != 2:
            raise InputError(f"read_crds takes (label, document) pairs, not {item!r:.60}")
        label, doc = item
        for sub_label, crd in _crd_documents(str(label), doc, 0):
            found, errs = _read_crd(sub_label, crd)
            entries.extend(found)
            problems.extend(errs)
    by_gvk: dict[tuple[str, str, str], CRDSchema] = {}
    for e in entries:
        key = (e.group, e.version, e.kind)
        first = by_gvk.get(key)
        if first is None:
            by_gvk[key] = e
        elif first.schema != e.schema:
            problems.append(
                f"{e.source}: {e.group}/{e.version} {e.kind} is already defined differently "
                f"by CustomResourceDefinition {first.crd} in {first.source}"
            )
    if problems:
        raise CRDError(problems)
    return SchemaIndex(by_gvk.values())


def _crd_documents(label: str, doc: Any, nesting: int) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """The CRDs of one document: itself, or the items of a ``kind: List``."""
    if not isinstance(doc, Mapping):
        return
    kind = doc.get("kind")
    items = doc.get("items")
    if isinstance(kind, str) and kind.endswith("List") and isinstance(items, list):
        if nesting >= _MAX_LIST_NESTING:
            return
        for i, item in enumerate(items):
            yield from _crd_documents(f"{label} items[{i}]", item, nesting + 1)
        return
    api_version = doc.get("apiVersion")
    if (
        kind == "CustomResourceDefinition"
        and isinstance(api_version, str)
        and api_version.partition("/")[0] == _CRD_GROUP
    ):
        yield label, doc


def _read_crd(label: str, doc: Mapping[str, Any]) -> tuple[list[CRDSchema], list[str]]:
    meta = doc.get("metadata")
    name = meta.get("name") if isinstance(meta, Mapping) else None
    where = f"{label}: CustomResourceDefinition {name if isinstance(name, str) else '(unnamed)'}"
    problems: list[str] = []

    def problem(path: str, message: str) -> tuple[list[CRDSchema], list[str]]:
        problems.append(f"{where}: {path}: {message}")
        return [], problems

    if doc.get("apiVersion") != f"{_CRD_GROUP}/v1":
        return problem(
            "apiVersion",
            f"{doc.get('apiVersion')} is not supported; give the {_CRD_GROUP}/v1 CRD "
            "(as `kubectl get crd NAME -o yaml` prints it)",
        )
    spec = doc.get("spec")
    if not isinstance(spec, Mapping):
        return problem("spec", "missing or not an object")
    group = spec.get("group")
    if not isinstance(group, str) or not group:
        return problem("spec.group", "missing or not a string")
    names = spec.get("names")
    kind = names.get("kind") if isinstance(names, Mapping) else None
    if not isinstance(kind, str) or not kind:
        return problem("spec.names.kind", "missing or not a string")
    scope = spec.get("scope", "Namespaced")
    if scope not in ("Namespaced", "Cluster"):
        return problem("spec.scope", f"must be Namespaced or Cluster, not {scope!r}")
    versions = spec.get("versions")
    if not isinstance(versions, list) or not versions:
        return problem("spec.versions", "missing, empty or not a list")
    entries: list[CRDSchema] = []
    for i, version in enumerate(versions):
        vpath = join_path("spec.versions", i)
        if not isinstance(version, Mapping):
            problem(vpath, "not an object")
            continue
        vname = version.get("name")
        if not isinstance(vname, str) or not vname:
            problem(join_path(vpath, "name"), "missing or not a string")
            continue
        served = version.get("served")
        if not isinstance(served, bool):
            problem(join_path(vpath, "served"), "missing or not a boolean")
            continue
        if not served:
            continue
        spath = join_path(join_path(vpath, "schema"), "openAPIV3Schema")
        holder = version.get("schema")
        schema = holder.get("openAPIV3Schema") if isinstance(holder, Mapping) else None
        if not isinstance(schema, Mapping):
            problem(spath, "missing or not an object (a served version needs a schema)")
            continue
        errs = check_schema(schema, spath)
        if errs:
            problems.extend(f"{where}: {e}" for e in errs)
            continue
        entries.append(
            CRDSchema(
                group=group,
                version=vname,
                kind=kind,
                schema=schema,
                crd=name if isinstance(name, str) else f"{group}/{kind}",
                source=label,
                namespaced=scope == "Namespaced",
            )
        )
    return entries, problems


def check_schema(schema: Any, path: str = "") -> list[str]:
    """Problems that make ``schema`` unusable as a structural schema (``PATH: problem``).

    Only what the checks here rely on is verified: keyword types (``type`` a known name,
    ``properties`` an object of schemas, ``items`` a schema, ``additionalProperties`` a boolean
    or a schema, ``required`` a list of names, combinators lists of schemas, the
    ``x-kubernetes-*`` flags booleans), plus a depth and size bound. Iterative: a deeply nested
    document cannot exhaust the stack.
    """
    problems: list[str] = []
    stack: list[tuple[Any, str, int]] = [(schema, path, 0)]
    nodes = 0
    while stack and len(problems) < _MAX_PROBLEMS:
        node, where, depth = stack.pop()
        nodes += 1
        if nodes > MAX_SCHEMA_NODES:
            problems.append(f"{path}: more than {MAX_SCHEMA_NODES} schema nodes")
            break
        if depth > MAX_SCHEMA_DEPTH:
            problems.append(f"{where}: nested deeper than {MAX_SCHEMA_DEPTH} levels")
            continue
        if not isinstance(node, Mapping):
            problems.append(f"{where}: a schema must be an object, not {type_name(node)}")
            continue
        children = _check_node(node, where, problems)
        stack.extend((child, cpath, depth + 1) for child, cpath in reversed(children))
    if stack and len(problems) >= _MAX_PROBLEMS:
        problems.append(f"{path}: (more problems not shown)")
    return problems


def _check_node(node: Mapping[str, Any], where: str, problems: list[str]) -> list[tuple[Any, str]]:
    """Check one node's keywords; return its sub-schemas with their paths."""
    children: list[tuple[Any, str]] = []
    t = node.get("type")
    if t is not None and (not isinstance(t, str) or t not in _TYPES):
        problems.append(f"{join_path(where, 'type')}: unknown type {t!r}")
    for key in _BOOL_KEYWORDS:
        if key in node and not isinstance(node[key], bool):
            problems.append(f"{join_path(where, key)}: must be a boolean")
    props = node.get("properties")
    if props is not None:
        ppath = join_path(where, "properties")
        if not isinstance(props, Mapping):
            problems.append(f"{ppath}: must be an object, not {type_name(props)}")
        else:
            children.extend((v, join_path(ppath, str(k))) for k, v in props.items())
    if "items" in node:
        children.append((node["items"], join_path(where, "items")))
    ap = node.get("additionalProperties")
    if ap is not None and not isinstance(ap, bool):
        children.append((ap, join_path(where, "additionalProperties")))
    req = node.get("required")
    if req is not None and not (isinstance(req, list) and all(isinstance(r, str) for r in req)):
        problems.append(f"{join_path(where, 'required')}: must be a list of field names")
    for key in ("allOf", "anyOf", "oneOf"):
        group = node.get(key)
        if group is None:
            continue
        if not isinstance(group, list):
            problems.append(f"{join_path(where, key)}: must be a list of schemas")
            continue
        children.extend((m, join_path(join_path(where, key), i)) for i, m in enumerate(group))
    if "not" in node:
        children.append((node["not"], join_path(where, "not")))
    enum = node.get("enum")
    if enum is not None and not isinstance(enum, list):
        problems.append(f"{join_path(where, 'enum')}: must be a list")
    return children
