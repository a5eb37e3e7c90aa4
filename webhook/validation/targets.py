"""Rules for where a definition may write: inside pod templates, never on the workload itself.

A definition's write paths (the fields of :data:`webhook.karta.fields.COMPONENT_FIELDS` with
``write``) say where labels, annotations and a ``schedulerName`` go. Two ways of getting that
wrong pass every sample check, because the writes land somewhere that exists:

* **Misdirected**: a location that is the root object itself, its ``metadata`` or its
  ``spec`` (``metadataPath: .metadata`` on a Job labels the Job, not its pods). Only a Pod is
  its own pod template. :func:`misdirected` says so for one location.
* **Metadata-dependent**: a location that changes with the workload's own metadata values
  (``if .metadata.name == "evil" then .metadata else .spec.template end``): whoever names the
  workload decides where the webhook writes. :func:`probes` builds copies of a sample whose
  name, namespace, labels and annotations are changed, to the constants the expressions
  compare against as well (``"evil"``), so that the validator can evaluate every write path on
  them and refuse a definition whose locations differ; :func:`changed` names the field.

Everything here is pure: objects are copied shallowly where they change, never modified.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from webhook.base.gvk import GVK
from webhook.base.limits import MAX_PROBE_KEYS, MAX_PROBE_VALUES
from webhook.jq.paths import Key, Step
from webhook.jq.syntax import FIELD, NUMBER, STRING, Token, TokenizeError, tokenize

__all__ = [
    "COPIES_OWN_METADATA",
    "METADATA_FIELDS",
    "PROBE_VALUES",
    "PROTECTED_FIELDS",
    "PROTECTED_METADATA",
    "Probe",
    "changed",
    "constants",
    "misdirected",
    "misdirected_steps",
    "own_metadata",
    "probes",
    "protected",
    "protected_steps",
]

#: The metadata fields whose values must not move a write location, in the order reported.
METADATA_FIELDS: Final = ("name", "namespace", "labels", "annotations")
#: Values every probed field gets besides the expressions' own constants: one as long as a
#: name or label value may be (63 characters), one very short.
PROBE_VALUES: Final = ("karta-probe-changed-" + "x" * 43, "k")

#: Fields of any object's metadata the webhook never writes, nor anything below them.
PROTECTED_METADATA: Final = (
    "name", "namespace", "uid", "generateName", "ownerReferences", "managedFields",
)  # fmt: skip
#: Fields of any object the webhook never writes, nor anything below them.
PROTECTED_FIELDS: Final = ("apiVersion", "kind", "status")
#: Root kinds (group, kind) whose operator copies the workload's own labels and annotations to
#: its pods: for them alone, the root component's fragmented ``labelsPath`` and
#: ``annotationsPath`` may be the workload's own ``.metadata.labels`` / ``.metadata.annotations``.
COPIES_OWN_METADATA: Final = frozenset(
    {("tekton.dev", "TaskRun"), ("tekton.dev", "PipelineRun"), ("kubeflow.org", "Notebook")}
)

_POD: Final = GVK("", "v1", "Pod")
_ROOT_PLACES: Final[Mapping[tuple[Any, ...], str]] = {
    (): "the {kind} object itself",
    ("metadata",): "the {kind}'s own metadata",
    ("spec",): "the {kind}'s own spec",
}


def misdirected(location: Sequence[Any], root: GVK | None) -> str | None:
    """Why a write at ``location`` (jq path tokens) on a ``root`` object is refused, or None.

    The root object, its ``metadata`` and its ``spec`` are never pod templates, except for a
    Pod (``podTemplateSpecPath: .``), which is its own.
    """
    if root is None or root == _POD or len(location) > 1:
        return None
    if location and not isinstance(location[0], str):
        return None  # an index or a slice of the root: not an object's field
    place = _ROOT_PLACES.get(tuple(location))
    if place is None:
        return None
    where = "/" + "/".join(str(t) for t in location)
    return (
        f"writes to {place.format(kind=root.kind)} ({where}); write locations must be inside "
        "the workload's pod templates, never the object itself, its metadata or its spec"
    )


def misdirected_steps(steps: Sequence[Step] | None, root: GVK | None) -> str | None:
    """:func:`misdirected` for a plain path's steps (None when it is not plain or has a
    ``[]``/``[N]``, which never ends at the root, its metadata or its spec)."""
    if steps is None or not all(isinstance(s, Key) for s in steps):
        return None
    return misdirected(tuple(s.name for s in steps if isinstance(s, Key)), root)


def constants(expressions: Iterable[str]) -> tuple[list[str], list[str]]:
    """The string and number constants of ``expressions`` (probe values), and the field names
    and strings they mention (probe label and annotation keys), each bounded by
    :data:`~webhook.base.limits.MAX_PROBE_VALUES` / :data:`~webhook.base.limits.MAX_PROBE_KEYS`."""
    values: dict[str, None] = {}
    keys: dict[str, None] = {}
    for expr in expressions:
        try:
            tokens = tokenize(expr)
        except TokenizeError:
            continue
        _collect(tokens, values, keys)
    return list(values)[:MAX_PROBE_VALUES], list(keys)[:MAX_PROBE_KEYS]


def _collect(tokens: Iterable[Token], values: dict[str, None], keys: dict[str, None]) -> None:
    for t in tokens:
        if t.kind == STRING and t.value is not None:
            values.setdefault(t.value)
            keys.setdefault(t.value)
        elif t.kind == NUMBER:
            values.setdefault(t.text)
        elif t.kind == FIELD and len(t.text) > 1:
            keys.setdefault(t.text[1:].strip('"'))
        for inner in t.interpolations:
            _collect(inner, values, keys)


@dataclass(frozen=True, slots=True)
class Probe:
    """A copy of a sample with some metadata fields set to ``value``."""

    fields: tuple[str, ...]
    value: str
    obj: Mapping[str, Any]


def probes(obj: Mapping[str, Any], values: Sequence[str], keys: Sequence[str]) -> list[Probe]:
    """Copies of ``obj`` with all of :data:`METADATA_FIELDS` changed at once: one per value of
    :data:`PROBE_VALUES` and of ``values`` (the expressions' constants). Labels and
    annotations keep their keys, gain every key of ``keys``, and all take the value."""
    out = []
    for value in dict.fromkeys([*PROBE_VALUES, *values]):
        out.append(Probe(METADATA_FIELDS, value, _changed_copy(obj, METADATA_FIELDS, value, keys)))
    return out


def changed(obj: Mapping[str, Any], field: str, value: str, keys: Sequence[str]) -> Probe:
    """A copy of ``obj`` with the one metadata ``field`` set to ``value`` (to name the field
    a dependence comes from)."""
    return Probe((field,), value, _changed_copy(obj, (field,), value, keys))


def _changed_copy(
    obj: Mapping[str, Any], fields: Sequence[str], value: str, keys: Sequence[str]
) -> dict[str, Any]:
    out = dict(obj)
    old = obj.get("metadata")
    meta: dict[str, Any] = dict(old) if isinstance(old, Mapping) else {}
    for f in fields:
        if f in ("name", "namespace"):
            meta[f] = value
        else:
            current = meta.get(f)
            names = list(current) if isinstance(current, Mapping) else []
            meta[f] = dict.fromkeys([*names, *keys], value)
    out["metadata"] = meta
    return out


def protected(location: Sequence[Any]) -> str | None:
    """Why a write at ``location`` (jq path tokens; None for a ``[]`` step) touches a field the
    webhook never writes, of any object: ``metadata`` ``name``, ``namespace``, ``uid``,
    ``generateName``, ``ownerReferences``, ``managedFields``, or ``apiVersion``, ``kind``,
    ``status`` (the API server refuses such a patch, or it rewrites what an object is)."""
    keys = [t if isinstance(t, str) else None for t in location]
    for i, key in enumerate(keys):
        if key in PROTECTED_FIELDS:
            field = key
        elif key == "metadata" and i + 1 < len(keys) and keys[i + 1] in PROTECTED_METADATA:
            field = f"metadata.{keys[i + 1]}"
        else:
            continue
        where = "/" + "/".join("*" if t is None else str(t) for t in location)
        return (
            f"writes to {field} ({where}); the webhook never writes an object's metadata.name, "
            "namespace, uid, generateName, ownerReferences or managedFields, nor its apiVersion, "
            "kind or status"
        )
    return None


def protected_steps(steps: Sequence[Step] | None) -> str | None:
    """:func:`protected` for a plain path's steps (None when it is not plain)."""
    if steps is None:
        return None
    return protected(tuple(s.name if isinstance(s, Key) else None for s in steps))


def own_metadata(
    location: Sequence[Any], root: GVK | None, *, fragment: str | None, is_root: bool
) -> tuple[str | None, str | None]:
    """``(problem, note)`` for a write inside the root object's own ``metadata``: a Pod's is
    its pods' own; otherwise only the root component's fragmented ``labelsPath`` /
    ``annotationsPath`` may write the workload's own labels / annotations, and only for a kind
    whose operator copies them to its pods (:data:`COPIES_OWN_METADATA`), with a note."""
    if root is None or root == _POD or len(location) < 2 or location[0] != "metadata":
        return None, None
    wanted = {"labelsPath": "labels", "annotationsPath": "annotations"}.get(fragment or "")
    where = "/" + "/".join(str(t) for t in location)
    if (
        wanted is not None
        and is_root
        and tuple(location) == ("metadata", wanted)
        and (root.group, root.kind) in COPIES_OWN_METADATA
    ):
        return None, (
            f"{fragment} writes the {root.kind}'s own {wanted} ({where}): its operator copies "
            "them to the pods it creates"
        )
    kinds = ", ".join(sorted(k for _, k in COPIES_OWN_METADATA))
    return (
        f"writes to the {root.kind}'s own metadata ({where}); a workload's own labels and "
        "annotations are written only as the root component's fragmented labelsPath / "
        f"annotationsPath, and only for kinds whose operator copies them to its pods ({kinds})"
    ), None
