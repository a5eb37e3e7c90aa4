"""A first draft of a Karta definition from a kind's structural schema (``init --crd``).

:func:`find_parts` walks the schema for what holds pods: every PodTemplateSpec and PodSpec
(alone, in a list, or in a map of roles), and, when there is none, objects that flatten pod
fields into the kind's own spec (fragments). :func:`draft` writes the definition as YAML text
with a comment on every guess: the root component, one child per part, replicas where a
sibling ``replicas``/``parallelism``/``instances`` exists, instance ids where a list's items
have a ``name`` or a map's keys name the roles, and the status from ``status.conditions`` or
a ``phase``/``state`` field. Bounded in depth and in nodes visited, so any schema terminates.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from webhook.schema.nodes import Outcome, Schema, Shape, check_shape, view

__all__ = ["Part", "draft", "find_parts"]

_MAX_DEPTH: Final = 14
_MAX_NODES: Final = 20000
_COUNTS: Final = ("replicas", "parallelism", "instances", "numNodes", "size")
_IDENT: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
#: pod fields a kind may flatten into its own spec, and the fragment path each gives
_FRAGMENT_FIELDS: Final = {
    "labels": "labelsPath",
    "podLabels": "labelsPath",
    "annotations": "annotationsPath",
    "podAnnotations": "annotationsPath",
    "schedulerName": "schedulerNamePath",
    "priorityClassName": "priorityClassNamePath",
    "resources": "resourcesPath",
}
_POD_FIELDS: Final = frozenset(
    {"schedulerName", "nodeSelector", "tolerations", "priorityClassName"}
)


@dataclass
class Part:
    """Something in the schema that holds pods."""

    kind: str  # "template", "podspec" or "fragments"
    path: str  # jq plain path of it (fragments: of the object holding the pod fields)
    holder: str  # jq path of the object holding it (its siblings)
    siblings: tuple[str, ...]
    #: how instances are told apart: ("list", items path) / ("map", map path) / None
    iterates: tuple[str, str] | None = None
    names: bool = False  # a list's items have a "name"
    fragments: dict[str, str] = field(default_factory=dict)


def _step(key: str) -> str:
    return f".{key}" if _IDENT.match(key) else f"[{json.dumps(key)}]"


def find_parts(schema: Schema) -> list[Part]:
    """Every pod-holding part of ``schema`` (below ``spec``), in schema order."""
    spec = view(schema).properties.get("spec")
    if not isinstance(spec, Mapping):
        return []
    found: list[Part] = []
    budget = [_MAX_NODES]
    _walk(spec, ".spec", ".", tuple(view(schema).properties), None, False, 0, found, budget)
    if not any(p.kind != "fragments" for p in found):
        return [p for p in found if p.kind == "fragments"]
    return [p for p in found if p.kind != "fragments"]


def _walk(
    node: Schema,
    path: str,
    holder: str,
    siblings: tuple[str, ...],
    iterates: tuple[str, str] | None,
    names: bool,
    depth: int,
    out: list[Part],
    budget: list[int],
) -> None:
    budget[0] -= 1
    if depth > _MAX_DEPTH or budget[0] <= 0:
        return
    if check_shape(node, Shape.POD_TEMPLATE_SPEC).outcome is Outcome.OK:
        out.append(Part("template", path, holder, siblings, iterates, names))
        return
    if check_shape(node, Shape.POD_SPEC).outcome is Outcome.OK:
        out.append(Part("podspec", path, holder, siblings, iterates, names))
        return
    v = view(node)
    if v.kind == "array" and isinstance(v.items, Mapping):
        item = view(v.items)
        has_name = "name" in item.properties
        _walk(v.items, path + "[]", path + "[]", tuple(item.properties), ("list", path), has_name,
              depth + 1, out, budget)  # fmt: skip
        return
    if v.kind != "object":
        return
    if v.properties:
        pod = set(v.properties) & _POD_FIELDS
        if len(pod) >= 2:
            frags = {
                _FRAGMENT_FIELDS[k]: path + _step(k) for k in v.properties if k in _FRAGMENT_FIELDS
            }
            out.append(Part("fragments", path, holder, siblings, iterates, names, frags))
        for key, child in v.properties.items():
            if isinstance(child, Mapping):
                _walk(child, path + _step(key), path, tuple(v.properties), iterates, names,
                      depth + 1, out, budget)  # fmt: skip
    elif isinstance(v.additional, Mapping):
        inner = view(v.additional)
        _walk(v.additional, path + "[]", path + "[]", tuple(inner.properties), ("map", path),
              False, depth + 1, out, budget)  # fmt: skip


# --------------------------------------------------------------------------- writing


def _q(text: str) -> str:
    return json.dumps(text)


def _name(part: Part, taken: set[str]) -> str:
    words = [w for w in re.findall(r"[A-Za-z0-9]+", part.path) if w not in ("spec", "template")]
    base = (words[-1] if words else "pods").lower()
    base = re.sub(r"(specs?|templates?)$", "", base) or "pods"
    name, i = base, 2
    while name in taken:
        name, i = f"{base}{i}", i + 1
    taken.add(name)
    return name


def _status(schema: Schema) -> list[str]:
    status = view(schema).properties.get("status")
    props = view(status).properties if isinstance(status, Mapping) else {}
    if "conditions" in props:
        return [
            "      # guess: .status.conditions (a kind without conditions at first: the // []);",
            "      # check the condition types your operator sets",
            "      statusDefinition:",
            "        conditionsDefinition:",
            "          path: (.status.conditions // [])",
            "        statusMappings:",
            '          running: [{byConditions: [{type: Running, status: "True"}]}]',
            '          completed: [{byConditions: [{type: Succeeded, status: "True"}]}]',
            '          failed: [{byConditions: [{type: Failed, status: "True"}]}]',
        ]
    for path, node in _phase_fields(props):
        values = [str(e) for e in view(node).enum] or ["Running", "Succeeded", "Failed"]
        rows = []
        for category, words in (
            ("running", ("running",)),
            ("completed", ("succeeded", "completed", "complete")),
            ("failed", ("failed", "error")),
            ("initializing", ("pending", "created", "submitted")),
        ):
            hits = [v for v in values if v.lower() in words]
            if hits:
                rows.append(
                    f"          {category}: [{', '.join('{byPhase: ' + _q(h) + '}' for h in hits)}]"
                )
        return [
            f"      # guess: the phase is {path}; map the values your operator sets",
            "      statusDefinition:",
            "        phaseDefinition:",
            f"          path: {path}",
            "        statusMappings:",
            *(rows or ["          running: [{byPhase: Running}]"]),
        ]
    return [
        "      # no status.conditions, phase or state in the schema: a status path is required;",
        "      # this one finds nothing until you name the kind's own",
        "      statusDefinition:",
        "        phaseDefinition:",
        "          path: .status.phase",
        "        statusMappings:",
        "          running: [{byPhase: Running}]",
    ]


def _phase_fields(props: Mapping[str, Any]) -> list[tuple[str, Schema]]:
    out = []
    for key in ("phase", "state"):
        node = props.get(key)
        if not isinstance(node, Mapping):
            continue
        v = view(node)
        if v.kind == "string":
            out.append((f".status.{key}", node))
        elif v.kind == "object" and isinstance(v.properties.get("phase"), Mapping):
            out.append((f".status.{key}.phase", v.properties["phase"]))
    return out


def _component(part: Part, name: str, owner: str) -> list[str]:
    lines = [
        f"      - name: {name}",
        '        kind: {group: "", version: v1, kind: Pod}',
        f"        ownerRef: {owner}",
    ]
    if part.kind == "template":
        lines += [
            f"        # found: a PodTemplateSpec at {part.path}",
            "        specDefinition:",
            f"          podTemplateSpecPath: {part.path}",
        ]
    elif part.kind == "podspec":
        meta = part.holder + ".metadata" if "metadata" in part.siblings else None
        lines += [f"        # found: a PodSpec at {part.path}", "        specDefinition:"]
        lines += [f"          podSpecPath: {part.path}"]
        if meta:
            lines += [f"          metadataPath: {meta}  # guess: the metadata beside it"]
    else:
        lines += [
            f"        # found: pod fields flattened into {part.path} (fragments); guesses by name",
            "        specDefinition:",
            "          fragmentedPodSpecDefinition:",
        ]
        lines += [f"            {k}: {p}" for k, p in sorted(part.fragments.items())]
    count = next((c for c in _COUNTS if c in part.siblings), None)
    if count:
        base = part.holder if part.holder != "." else ""
        expr = f"{base} | .{count} // 1" if "[]" in base else f"{base}.{count} // 1"
        lines += [
            f"        # guess: {count} beside it counts the pods, 1 when unset",
            "        scaleDefinition:",
            f"          replicasPath: {_q(expr)}",
        ]
    if part.iterates is not None:
        how, where = part.iterates
        if how == "list" and part.names:
            ids = f"{where}[].name"
            note = "each list entry's name"
        else:
            ids = (
                f"{where} | to_entries[] | .key" if how == "map" else f"{where} | keys[] | tostring"
            )
            note = "each role's key in the map" if how == "map" else "each entry's index"
        lines += [
            f"        # guess: instances are {note}, in the order of the template paths",
            f"        instanceIdPath: {_q(ids)}",
            "        podSelector:",
            "          componentInstanceSelector:",
            "            # guess: the pod label your operator sets to the instance id; check its pods",
            f"            idPath: '.metadata.labels[\"{name}-id\"]'",
        ]
    return lines


def draft(schema: Schema, group: str, version: str, kind: str) -> str:
    """The draft definition of ``group/version kind`` as YAML text with comments."""
    parts = find_parts(schema)
    root = re.sub(r"[^a-z0-9]+", "", kind.lower()) or "root"
    stem = f"{group}-{kind}-{version}".lower().replace(".", "-")
    taken = {root}
    lines = [
        f"# Draft Karta definition for {kind} ({group}/{version}), made by `karta-webhook init`",
        "# from its CRD's schema. Every guess says so in a comment: check each against the",
        "# operator's documentation and a real object, then `karta-webhook validate --crd`.",
        "apiVersion: run.ai/v1alpha1",
        "kind: Karta",
        "metadata:",
        f"  name: {stem}",
        "spec:",
        "  structureDefinition:",
        "    rootComponent:",
        f"      name: {root}",
        f"      kind: {{group: {_q(group)}, version: {_q(version)}, kind: {_q(kind)}}}",
        *_status(schema),
    ]
    if parts:
        lines.append("    childComponents:")
        for part in parts:
            lines += _component(part, _name(part, taken), root)
    else:
        lines.append("    # no pod template, pod spec or pod fields found in the schema")
    lines += ["  optimizationInstructions: {}", ""]
    return "\n".join(lines)
