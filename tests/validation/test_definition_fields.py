"""Issue 48 item 1: every field of a definition checked.

Unknown Karta keys anywhere are errors with the closest known key, as the API server's strict
field validation would report them (the key table is our Karta CRD's, checked here); every
path, read-only ones and the guarded forms (``P // empty | Q``, ``(P // empty)[]``,
``if P == null then empty else … end``) included, is judged against the root kind's schema;
a correct role-map definition validates against its CRD alone without a warning. Real
validator, real libjq sandbox, real CRD files (tests/crds, examples/volcano).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from helpers import ENGINE

from webhook.base.documents import read_documents
from webhook.base.gvk import GVK
from webhook.karta.format import KARTA, OPEN, unknown_fields
from webhook.karta.loading import catalog_dir
from webhook.schema.crds import read_crds
from webhook.validation.check import Report, check

ROOT = Path(__file__).resolve().parents[2]
TF = GVK("kubeflow.org", "v1", "TFJob")
VC = GVK("batch.volcano.sh", "v1alpha1", "Job")
SD = "spec.structureDefinition"


def _crd_schema(path: Path, gvk: GVK) -> Any:
    index = read_crds(read_documents(path))
    schema = index.schema(gvk)
    assert schema is not None
    return schema


TF_SCHEMA = _crd_schema(ROOT / "tests" / "crds" / "kubeflow.org_tfjobs.yaml", TF)
VC_SCHEMA = _crd_schema(ROOT / "examples" / "volcano" / "crd.yaml", VC)


def tfjob() -> dict[str, Any]:
    doc = yaml.safe_load((catalog_dir() / "kubeflow.org-tfjob-v1.yaml").read_text())
    assert isinstance(doc, dict)
    return doc


def volcano() -> dict[str, Any]:
    doc = yaml.safe_load((ROOT / "examples" / "volcano" / "karta.yaml").read_text())
    assert isinstance(doc, dict)
    return doc


def run(doc: dict[str, Any], schema: Any = None) -> Report:
    """``validate --crd`` with no real sample (the synthesised one alone), or with none."""
    return check(doc, [], ENGINE, schema=schema)


def errors_at(r: Report, path: str) -> list[str]:
    return [e.message for e in r.errors if e.path == path]


def child(doc: dict[str, Any], i: int) -> dict[str, Any]:
    c = doc["spec"]["structureDefinition"]["childComponents"][i]
    assert isinstance(c, dict)
    return c


# --------------------------------------------------------------------------- unknown keys


def _crd_keys(node: Any) -> Any:
    """The Karta CRD's schema as the key table's nesting (None for leaves and open maps)."""
    if node.get("type") == "array":
        inner = _crd_keys(node.get("items", {}))
        return [inner] if isinstance(inner, dict) else None
    props = node.get("properties")
    if not props:
        return None
    out: dict[str, Any] = {k: _crd_keys(v) for k, v in props.items()}
    if node.get("x-kubernetes-preserve-unknown-fields"):
        out[OPEN] = None
    return out


def test_the_key_table_is_the_karta_crds() -> None:
    crd = yaml.safe_load((ROOT / "manifests" / "base" / "crd-kartas.yaml").read_text())
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    want = _crd_keys(schema)
    # metadata and status are the API server's; the table leaves them unjudged
    want["metadata"] = want["status"] = None
    assert want == KARTA


@pytest.mark.parametrize(
    ("where", "wrong", "right"),
    [
        ("specDefinition.fragmentedPodSpecDefinition", "labelPath", "labelsPath"),
        ("", "instanceIDPath", "instanceIdPath"),
        ("scaleDefinition", "replicaPath", "replicasPath"),
        ("specDefinition", "podTemplateSpec", "podTemplateSpecPath"),
        ("podSelector.componentInstanceSelector", "idpath", "idPath"),
    ],
)
def test_a_misspelt_key_is_refused_with_the_closest_known_one(
    where: str, wrong: str, right: str
) -> None:
    doc = tfjob()
    holder = child(doc, 0)
    for key in where.split(".") if where else ():
        holder = holder.setdefault(key, {})
    holder[wrong] = ".spec.x"
    r = run(doc)
    at = f"{SD}.childComponents[0]" + (f".{where}" if where else "") + f".{wrong}"
    assert errors_at(r, at) == [f'unknown field "{wrong}"; did you mean "{right}"?'], r.errors
    assert not r.ok


def test_unknown_keys_are_found_in_lists_and_instructions_too() -> None:
    doc = tfjob()
    rc = doc["spec"]["structureDefinition"]["rootComponent"]
    rc["statusDefinition"]["statusMappings"]["running"][0]["byCondition"] = []
    doc["spec"]["optimizationInstructions"]["gangScheduling"]["podGroup"]["nam"] = "x"
    doc["spec"]["structureDefinitions"] = {}
    r = run(doc)
    assert errors_at(
        r, f"{SD}.rootComponent.statusDefinition.statusMappings.running[0].byCondition"
    ) == ['unknown field "byCondition"; did you mean "byConditions"?']
    assert errors_at(r, "spec.optimizationInstructions.gangScheduling.podGroup.nam") == [
        'unknown field "nam"; did you mean "name"?'
    ]
    assert errors_at(r, "spec.structureDefinitions") == [
        'unknown field "structureDefinitions"; did you mean "structureDefinition"?'
    ]


def test_open_objects_stay_open() -> None:
    """metadata, other tools' instructions and a newer upstream's status categories are not
    ours to refuse (the category is warned about, as before)."""
    doc = tfjob()
    doc["metadata"]["labels"] = {"team": "a"}
    doc["spec"]["optimizationInstructions"]["otherTool"] = {"anything": 1}
    rc = doc["spec"]["structureDefinition"]["rootComponent"]
    rc["statusDefinition"]["statusMappings"]["hibernating"] = [{"byPhase": "X"}]
    assert unknown_fields(doc) == []
    assert run(doc).ok


def test_every_bundled_definition_has_only_known_keys() -> None:
    docs = [d for f in sorted(catalog_dir().glob("*.yaml")) for _, d in read_documents(f)]
    assert len(docs) >= 30
    assert [str(e) for d in docs for e in unknown_fields(d)] == []


# --------------------------------------------------------------------------- read-only paths


@pytest.mark.parametrize(
    ("field", "expr", "message"),
    [
        # a read-only fragment's typo (computed GPU count would silently be 0)
        (
            "specDefinition.fragmentedPodSpecDefinition.resourcesPath",
            ".spec.tfReplicaSpecs.Chief.template.spec.containers[].resourcess",
            'has no field "resourcess"; did you mean "resources"?',
        ),
        # a list indexed as an object
        (
            "specDefinition.fragmentedPodSpecDefinition.resourcesPath",
            ".spec.tfReplicaSpecs.Chief.template.spec.containers.resources",
            "[]",
        ),
        # the right field of the wrong type
        (
            "specDefinition.fragmentedPodSpecDefinition.containersPath",
            ".spec.tfReplicaSpecs.Chief.template.spec.containers[0]",
            "expected a list",
        ),
        # a guarded path's typo, in the guard and after it
        (
            "specDefinition.podTemplateSpecPath",
            ".spec.tfReplicaSpec.Chief // empty | .template",
            'did you mean "tfReplicaSpecs"?',
        ),
        (
            "specDefinition.podTemplateSpecPath",
            ".spec.tfReplicaSpecs.Chief // empty | .templat",
            'did you mean "template"?',
        ),
        ("instanceIdPath", '.spec.tfReplicaSpec.Chief // empty | "chief"', "tfReplicaSpecs"),
        (
            "scaleDefinition.replicasPath",
            "if .spec.tfReplicaSpecs.Chief == null then empty else (.spec.tfReplicaSpecs.Chief.replica // 1) end",
            'did you mean "replicas"',
        ),
        (
            "scaleDefinition.replicasPath",
            "if .spec.tfReplicaSpec.Chief == null then empty else 1 end",
            "tfReplicaSpecs",
        ),
        (
            "scaleDefinition.minReplicasPath",
            ".spec.tfReplicaSpecs.Chief.template",
            "expected an integer",
        ),
    ],
)
def test_read_and_guarded_paths_are_judged_against_the_schema(
    field: str, expr: str, message: str
) -> None:
    doc = tfjob()
    holder = child(doc, 0)
    if "fragmented" in field:  # one pattern per component
        holder["specDefinition"] = {}
    *parents, last = field.split(".")
    for key in parents:
        holder = holder.setdefault(key, {})
    holder[last] = expr
    r = run(doc, TF_SCHEMA)
    found = errors_at(r, f"{SD}.childComponents[0].{field}")
    assert found and message in found[0], r.errors
    assert "(the TFJob schema)" in found[0]


@pytest.mark.parametrize(
    ("field", "expr", "message"),
    [
        ("statusDefinition.phaseDefinition.path", ".status.state.phas", 'did you mean "phase"?'),
        ("statusDefinition.phaseDefinition.path", ".status.state", "expected a string"),
        ("instanceIdPath", ".spec.tasks.name", "[]"),
        ("specDefinition.podTemplateSpecPath", "(.spec.task // empty)[] | .template", "tasks"),
    ],
)
def test_status_and_volcano_paths_are_judged(field: str, expr: str, message: str) -> None:
    doc = volcano()
    sd = doc["spec"]["structureDefinition"]
    holder = sd["rootComponent"] if field.startswith("status") else sd["childComponents"][0]
    *parents, last = field.split(".")
    for key in parents:
        holder = holder[key]
    holder[last] = expr
    r = run(doc, VC_SCHEMA)
    where = "rootComponent" if field.startswith("status") else "childComponents[0]"
    found = errors_at(r, f"{SD}.{where}.{field}")
    assert found and message in found[0], r.errors


def test_a_correct_role_map_definition_validates_on_its_crd_alone_without_warnings() -> None:
    """The synthesised sample holds one entry per role the definition names, so no
    "finds nothing" warning teaches users to ignore warnings."""
    r = run(tfjob(), TF_SCHEMA)
    assert r.ok, r.errors
    assert r.synthesised == 1
    assert r.warnings == []


def test_the_typo_and_the_correct_definition_no_longer_read_alike() -> None:
    good = tfjob()
    bad = copy.deepcopy(good)
    child(bad, 2)["specDefinition"]["podTemplateSpecPath"] = (
        ".spec.tfReplicaSpec.Worker // empty | .template"
    )
    assert run(good, TF_SCHEMA).ok
    r = run(bad, TF_SCHEMA)
    assert not r.ok
    assert r.lines() != run(good, TF_SCHEMA).lines()


# --------------------------------------------------------------------------- carried per component


def spark() -> dict[str, Any]:
    path = catalog_dir() / "sparkoperator.k8s.io-sparkapplication-v1beta2.yaml"
    doc = yaml.safe_load(path.read_text())
    assert isinstance(doc, dict)
    return doc


def carried_line(r: Report) -> str:
    [line] = [n for n in r.notes if n.startswith("policy fields carried: ")]
    return line


def test_components_alike_print_one_line() -> None:
    line = carried_line(run(spark()))
    assert "per component" not in line


def test_a_component_carrying_fewer_fields_is_named() -> None:
    doc = spark()
    frag = child(doc, 0)["specDefinition"]["fragmentedPodSpecDefinition"]
    del frag["labelsPath"]
    r = run(doc)
    assert r.ok and not [w for w in r.warnings if "carries" in w], r.warnings
    line = carried_line(r)
    assert line.startswith("policy fields carried: labels, annotations,")  # the union
    assert "; per component: driver: annotations, schedulerName," in line
    assert "; executor: labels, annotations, schedulerName," in line


def test_a_pod_bearing_component_carrying_nothing_essential_is_warned() -> None:
    doc = spark()
    # writes a priority class only, at a place that implies no pod spec
    child(doc, 0)["specDefinition"] = {
        "fragmentedPodSpecDefinition": {"priorityClassNamePath": ".spec.driver.pcn"}
    }
    r = run(doc)
    assert [w for w in r.warnings if "carries" in w] == [
        f"{SD}.childComponents[0]: component 'driver' has pods but carries none of labels, "
        "annotations, schedulerName: no policy can reach its pods"
    ]
    assert "per component: driver: priorityClassName;" in carried_line(r)


def test_a_component_of_read_only_paths_alone_is_not_warned() -> None:
    """It describes its pods (GPUs, as NIMCache and a TrainJob's trainer do), writes nothing."""
    doc = spark()
    child(doc, 0)["specDefinition"] = {
        "fragmentedPodSpecDefinition": {"resourcesPath": ".spec.driver.gpu // empty"}
    }
    r = run(doc)
    assert not [w for w in r.warnings if "carries" in w], r.warnings
    assert "per component" not in carried_line(r)
