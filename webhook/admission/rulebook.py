"""What ``/validate`` judges a definition by beyond the check itself, shared with the file and
cluster loaders so that one rulebook holds for every source: the schema its root kind is
judged against, the one-Karta-per-kind rule, and the vet a definition from a file or the
cluster passes before it is used.

The handlers that call these are :mod:`webhook.admission.handlers`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from webhook.base.errors import FieldError
from webhook.base.gvk import GVK
from webhook.base.limits import EVAL_TIMEOUT
from webhook.jq.engine import Engine
from webhook.karta import model as definitions
from webhook.karta.samples import Sample, SampleIndex
from webhook.schema.builtin import builtin_schema
from webhook.schema.crds import SchemaIndex
from webhook.schema.nodes import Schema
from webhook.validation.check import check

ROOT_KIND = "spec.structureDefinition.rootComponent.kind"
_ROOT_VERSION = ROOT_KIND + ".version"


@dataclass(frozen=True)
class SchemaLookup:
    """The schema a definition's root kind is judged by, and what to say about it."""

    schema: Schema | None = None
    notes: tuple[str, ...] = ()
    warnings: tuple[str, ...] = ()
    errors: tuple[FieldError, ...] = ()


def schema_for(
    gvk: GVK | None, schemas: SchemaIndex | None, *, crd_required: bool = False
) -> SchemaLookup:
    """The root kind's schema: its CRD's among ``schemas``, else a built-in kind's, else none
    (see :func:`webhook.admission.handlers.validate` for what is said then)."""
    if gvk is None or not gvk.version:
        return SchemaLookup()
    entry = schemas.get(gvk) if schemas is not None else None
    if entry is not None:
        return SchemaLookup(
            entry.schema, (f"schema: CustomResourceDefinition {entry.crd} ({entry.source})",)
        )
    builtin = builtin_schema(gvk)
    if builtin is not None:
        return SchemaLookup(
            builtin, (f"schema: the built-in {gvk} (from the kubernetes client's models)",)
        )
    served = schemas.versions(gvk.group, gvk.kind) if schemas is not None else []
    if served:
        crd = next(e.crd for e in (schemas or ()) if e.group == gvk.group and e.kind == gvk.kind)
        message = (
            f"CustomResourceDefinition {crd} does not serve version {gvk.version!r} of "
            f"{gvk.kind} (it serves {', '.join(served)}): the definition's paths were not "
            "checked against a schema"
        )
        if crd_required:
            return SchemaLookup(warnings=(message,))
        return SchemaLookup(errors=(FieldError(_ROOT_VERSION, message),))
    if crd_required:
        return SchemaLookup(
            warnings=(
                f"no CustomResourceDefinition for {gvk} is installed: the definition's paths "
                "were not checked against a schema, and no object of the kind exists to "
                "mutate until one is",
            )
        )
    if schemas:
        return SchemaLookup(
            notes=(
                f"no CustomResourceDefinition given serves {gvk}: paths not checked against a schema",
            )
        )
    return SchemaLookup()


def of_kind(objs: Sequence[Sample], gvk: GVK | None) -> list[Sample]:
    """Live objects as samples; LIST items without ``apiVersion``/``kind`` get the root's."""
    out: list[Sample] = []
    for label, obj in objs:
        if gvk is not None and isinstance(obj, Mapping) and GVK.of(obj) is None:
            obj = {**obj, "apiVersion": gvk.api_version, "kind": gvk.kind}
        out.append((label, obj))
    return out


def _meta_name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    return str(meta.get("name", "")) if isinstance(meta, Mapping) else ""


def conflicting_karta(obj: Mapping[str, Any], existing: Sequence[Mapping[str, Any]]) -> str | None:
    """The error for a Karta whose root group/version/kind another Karta (by name) already
    defines, else None. A Karta never collides with itself (an update), and the same group and
    kind at another version is a different definition. Best effort, as upstream's: two creates
    racing can both pass; the cluster sync then keeps the older one and logs the other."""
    gvk = definitions.root_gvk(obj)
    if gvk is None:
        return None
    name = _meta_name(obj)
    for other in existing:
        other_name = _meta_name(other)
        if other_name != name and definitions.root_gvk(other) == gvk:
            return (
                f"a Karta for group {gvk.group!r} version {gvk.version!r} kind {gvk.kind!r} already "
                f"exists ({other_name!r}); only one Karta per group/version/kind is allowed"
            ).replace("'", '"')
    return None


class DefinitionVet:
    """``/validate``'s checks for a definition that comes from a file or the cluster, before
    it is used (one rulebook for every source), as a :data:`~webhook.karta.loading.Vet`:
    :func:`webhook.validation.check.check` against ``samples`` of its root kind and its root kind's
    schema (``schemas()``: the cluster's CRDs when known; else a built-in kind's), the
    problems at their fields. What only ``/validate`` judges is left out: the
    one-Karta-per-kind rule (a later source wins for a kind) and ``--require-samples``.

    ``engine`` evaluates; without one, an engine of its own is made on first use and kept
    until :meth:`close` (the server's state closes it after each load, so that no sandbox
    child outlives a load in the master it forks workers from). One engine per load, not per
    definition: starting a sandbox child per definition made a 32-definition load 3 times
    slower."""

    def __init__(
        self,
        samples: SampleIndex,
        schemas: Callable[[], SchemaIndex | None] = lambda: None,
        engine: Engine | None = None,
        *,
        timeout: float = EVAL_TIMEOUT,
    ) -> None:
        self.samples = samples
        self.schemas = schemas
        self.timeout = timeout
        self._given = engine
        self._own: Engine | None = None

    def __call__(self, doc: Any, source: str) -> list[FieldError]:
        crds = self.schemas()
        found = schema_for(definitions.root_gvk(doc), crds, crd_required=crds is not None)
        engine = self._given
        if engine is None:
            engine = self._own = self._own or Engine()
        report = check(
            doc,
            self.samples.for_definition(doc),
            engine,
            source=source,
            timeout=self.timeout,
            schema=found.schema,
        )
        return [*found.errors, *report.errors]

    def close(self) -> None:
        """Stop the engine of its own, if one was made (a later call makes a new one)."""
        own, self._own = self._own, None
        if own is not None:
            own.close()


def definition_vet(
    samples: SampleIndex,
    schemas: Callable[[], SchemaIndex | None] = lambda: None,
    engine: Engine | None = None,
    *,
    timeout: float = EVAL_TIMEOUT,
) -> DefinitionVet:
    """A :class:`DefinitionVet` (the checks of ``/validate`` before a definition is used)."""
    return DefinitionVet(samples, schemas, engine, timeout=timeout)
