"""The Karta format's fields, every object of a definition with the keys it may hold, and the
check that a document holds no other (:func:`unknown_fields`).

The table is the field list of our Karta CRD (manifests/base/crd-kartas.yaml, kept equal to
it by a test), so a definition is judged as the API server's strict field validation would
judge it, but with the closest known key named (``did you mean "labelsPath"?``) and in files
too, where nothing prunes: a misspelt ``labelPath:`` is otherwise read as absent and every pod
of the component silently loses its labels. Objects the CRD leaves open stay open:
``metadata``, ``status``, ``matchLabels`` (a map), ``optimizationInstructions`` (other tools
extend it; its ``gangScheduling`` is ours and judged) and the status categories a newer
upstream may add (:mod:`webhook.karta.statusmodel` warns about those).
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterator, Mapping
from typing import Any, Final

from webhook.base.errors import FieldError, join_path
from webhook.karta.statusmodel import STATUS_ORDER

#: An object's keys: each maps to what its value is. ``None``: a scalar or a value not judged
#: here (its type is the parser's); a dict: an object with those keys; a one-item list: a list
#: of such objects. :data:`OPEN` among an object's keys: keys not listed are allowed.
Keys = Mapping[str, Any]
#: The key that marks an object as open to keys it does not list.
OPEN: Final = "*"

_GVK: Final[Keys] = {"group": None, "version": None, "kind": None}
_MATCHER: Final[Keys] = {
    "byPhase": None,
    "byConditions": [{"type": None, "status": None, "reason": None}],
    "byExpression": {"expression": None, "expectedResult": None},
}
_STATUS: Final[Keys] = {
    "phaseDefinition": {"path": None},
    "conditionsDefinition": {
        "path": None,
        "typeFieldName": None,
        "statusFieldName": None,
        "messageFieldName": None,
        "reasonFieldName": None,
    },
    "statusMappings": {OPEN: None, **{category: [_MATCHER] for category in STATUS_ORDER}},
}
_FRAGMENTS: Final = (
    "schedulerNamePath", "labelsPath", "annotationsPath", "resourcesPath", "resourceClaimsPath",
    "podAffinityPath", "nodeAffinityPath", "containersPath", "containerPath",
    "priorityClassNamePath", "imagePath",
)  # fmt: skip
_ACTION: Final[Keys] = {"path": None, "value": None}
COMPONENT: Final[Keys] = {
    "name": None,
    "kind": _GVK,
    "ownerRef": None,
    "instanceIdPath": None,
    "specDefinition": {
        "podTemplateSpecPath": None,
        "podSpecPath": None,
        "metadataPath": None,
        "fragmentedPodSpecDefinition": dict.fromkeys(_FRAGMENTS),
    },
    "scaleDefinition": {"replicasPath": None, "minReplicasPath": None, "maxReplicasPath": None},
    "statusDefinition": _STATUS,
    "suspendDefinition": {"suspendActions": [_ACTION], "resumeActions": [_ACTION]},
    "podSelector": {
        "componentTypeSelector": {"keyPath": None, "value": None, "matchLabels": None},
        "componentInstanceSelector": {"idPath": None},
        "replicaSelector": {"keyPath": None},
    },
}
_TOPOLOGY: Final[Keys] = {
    "topologyName": None,
    "preferredTopologyLevel": None,
    "requiredTopologyLevel": None,
}
_GANG: Final[Keys] = {
    "podGroups": [
        {
            "name": None,
            "members": [{"componentName": None, "groupByKeyPaths": None, "filters": None}],
        }
    ],
    "podGroup": {
        "name": None,
        "subGroups": [{"componentName": None, "topology": _TOPOLOGY}],
        "topology": _TOPOLOGY,
    },
}
#: A whole Karta document.
KARTA: Final[Keys] = {
    "apiVersion": None,
    "kind": None,
    "metadata": None,
    "spec": {
        "structureDefinition": {
            "rootComponent": COMPONENT,
            "childComponents": [COMPONENT],
            "additionalChildKinds": [_GVK],
        },
        "optimizationInstructions": {OPEN: None, "gangScheduling": _GANG},
    },
    "status": None,
}


def unknown_fields(doc: Any) -> list[FieldError]:
    """Every key of ``doc`` the Karta format does not have, at its field path, with the
    closest known keys of its object. Values of the wrong type are left to the parser."""
    return list(_walk(doc, KARTA, ""))


def _walk(value: Any, keys: Keys, path: str) -> Iterator[FieldError]:
    if not isinstance(value, Mapping):
        return
    known = [k for k in keys if k != OPEN]
    for key, sub in value.items():
        at = join_path(path, str(key))
        if key not in keys or key == OPEN:
            if OPEN not in keys:
                yield FieldError(at, _unknown(str(key), known))
            continue
        spec = keys[key]
        if isinstance(spec, Mapping):
            yield from _walk(sub, spec, at)
        elif isinstance(spec, list) and isinstance(sub, list):
            for i, item in enumerate(sub):
                yield from _walk(item, spec[0], join_path(at, i))


def _unknown(key: str, known: list[str]) -> str:
    close = closest(key, known)
    if close:
        return (
            f"unknown field {json.dumps(key)}; did you mean {' or '.join(map(json.dumps, close))}?"
        )
    return f"unknown field {json.dumps(key)} (known here: {', '.join(known)})"


def closest(name: str, names: list[str]) -> list[str]:
    """The one of ``names`` closest to ``name`` (and any that differ from it in case alone)."""
    same = [n for n in names if n.lower() == name.lower()]
    lowered = {n.lower(): n for n in names}
    close = difflib.get_close_matches(name.lower(), list(lowered), n=1, cutoff=0.6)
    return list(dict.fromkeys([*same, *(lowered[c] for c in close)]))[:2]
