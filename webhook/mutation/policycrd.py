"""The policy CRDs' rule fields (and the chart's values schema's), written from the field table
(:data:`webhook.karta.fields.INJECTABLES`): each injectable's ``schema`` is its property in the
rules of ``KartaPolicy`` and ``KartaNamespacePolicy`` (manifests/base and the chart's copy).
The files keep the block between two marker lines for it; :func:`regenerate` rewrites that
block (``python3 hack/policy-crds.py``) and tests/install/test_policy_crds.py fails when a file
differs, so a field the table gains is never pruned by the API server unnoticed. The chart's
``values.schema.json`` gets each string or string-map field (:func:`values_schema`); its
tolerations, with their enums, are written by hand. Pure.
"""

from __future__ import annotations

import json
from typing import Any

import yaml

from webhook.karta.injectables import INJECTABLES

BEGIN = "# BEGIN rule fields: generated from webhook/karta/injectables.py by hack/policy-crds.py"
END = "# END rule fields"
#: the CRD files that hold the block, from the repository's root
FILES = (
    "manifests/base/crd-kartapolicies.yaml",
    "manifests/base/crd-kartanamespacepolicies.yaml",
    "charts/karta-webhook/crds/crd-kartapolicies.yaml",
    "charts/karta-webhook/crds/crd-kartanamespacepolicies.yaml",
)
VALUES_SCHEMA = "charts/karta-webhook/values.schema.json"


class _Dumper(yaml.SafeDumper):
    """Each schema written out where it is used (no ``&id001`` anchors)."""

    def ignore_aliases(self, data: object) -> bool:
        return True


def rule_properties(indent: int) -> list[str]:
    """The injectables' properties as YAML lines at ``indent`` spaces."""
    text = yaml.dump(
        {i.key: dict(i.schema) for i in INJECTABLES},
        Dumper=_Dumper,
        default_flow_style=None,
        sort_keys=False,
        width=200,
    )
    return [" " * indent + line for line in text.splitlines()]


def regenerate(text: str, name: str) -> str:
    """``text`` (a CRD file named ``name``) with its rule-fields block written anew; a file
    without the two markers is a ValueError naming it."""
    lines = text.split("\n")
    starts = [n for n, line in enumerate(lines) if line.strip() == BEGIN]
    ends = [n for n, line in enumerate(lines) if line.strip() == END]
    if len(starts) != 1 or len(ends) != 1 or ends[0] < starts[0]:
        raise ValueError(f"{name}: no one {BEGIN!r} ... {END!r} block")
    begin, end = starts[0], ends[0]
    indent = len(lines[begin]) - len(lines[begin].lstrip())
    return "\n".join([*lines[: begin + 1], *rule_properties(indent), *lines[end:]])


def values_schema(text: str) -> str:
    """The chart's values schema (JSON ``text``) with each string or string-map injectable as a
    rule property: a non-empty string, or the schema's ``stringMap``; new ones go before
    ``overwrite``."""
    schema = json.loads(text)
    rule = schema["properties"]["policy"]["properties"]["rules"]["items"]
    props: dict[str, Any] = rule["properties"]
    made: dict[str, Any] = {}
    for inj in INJECTABLES:
        if inj.schema == {"type": "string"}:
            made[inj.key] = {"type": "string", "minLength": 1}
        elif inj.schema == {"type": "object", "additionalProperties": {"type": "string"}}:
            made[inj.key] = {"$ref": "#/definitions/stringMap"}
    out: dict[str, Any] = {}
    for key, value in props.items():
        if key == "overwrite":
            out.update({k: v for k, v in made.items() if k not in props})
        out[key] = made.get(key, value)
    rule["properties"] = out
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"
